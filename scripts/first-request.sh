#!/usr/bin/env bash
# first-request.sh [RUNS] — the memory and first-request figures of
# docs/BENCHMARKS.md ("Idle memory"): starts bin/buddy serve on a fresh data
# directory, reads its resident set once it is up and again after 3 s idle,
# then times the first and second GET /api/skills. Linux (reads /proc).
set -euo pipefail
runs=${1:-3}
bin=${BUDDY_BIN:-bin/buddy}
[ -x "$bin" ] || { echo "build first: make build" >&2; exit 1; }
rss() { awk '/^VmRSS:/ {printf "%.1f", $2/1024}' "/proc/$1/status"; }
for _ in $(seq "$runs"); do
	d=$(mktemp -d)
	XDG_DATA_HOME=$d/data XDG_CONFIG_HOME=$d/config HOME=$d "$bin" serve --listen 127.0.0.1:0 >"$d/out" 2>"$d/err" &
	pid=$!
	for _ in $(seq 500); do grep -q 'open the page' "$d/out" 2>/dev/null && break; sleep 0.01; done
	addr=$(grep -o 'http://[0-9.:]*' "$d/out" | head -1)
	tok=$(grep -o 'token=[0-9a-f]*' "$d/out" | head -1 | cut -d= -f2)
	up=$(rss "$pid")
	sleep 3
	idle=$(rss "$pid")
	t1=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $tok" "$addr/api/skills")
	t2=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $tok" "$addr/api/skills")
	after=$(rss "$pid")
	echo "RSS up ${up} MiB, idle 3s ${idle} MiB; GET /api/skills first ${t1}s, second ${t2}s; RSS after ${after} MiB"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	rm -rf "$d"
done
