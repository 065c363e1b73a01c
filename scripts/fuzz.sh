#!/usr/bin/env bash
# Runs every fuzz target of buddy (the root module and the guest modules) for
# FUZZTIME each, FUZZJOBS at a time (each with -parallel FUZZPAR workers), and
# prints a Markdown table: target, time, executions, new corpus entries,
# result. A crasher makes the target fail: `go test` writes it under the
# package's testdata/fuzz/<Target>/, where it stays as a seed once fixed.
#
#   scripts/fuzz.sh                      # FUZZTIME=60s FUZZJOBS=1
#   FUZZTIME=10m FUZZJOBS=2 FUZZPAR=1 scripts/fuzz.sh
#   FUZZONLY='FuzzParse|FuzzVerifyAudit' scripts/fuzz.sh
#
# Logs go to $FUZZLOGS (default: a temporary directory, named at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
FUZZJOBS=${FUZZJOBS:-1}
FUZZPAR=${FUZZPAR:-$(nproc)}
FUZZONLY=${FUZZONLY:-.}
FUZZLOGS=${FUZZLOGS:-$(mktemp -d -t buddy-fuzz.XXXXXX)}
mkdir -p "$FUZZLOGS"

# Every (module, package, target).
targets=()
for mod in . skillkit builtins-src; do
	for pkg in $(cd "$mod" && $GO list ./...); do
		for t in $(cd "$mod" && $GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
			if [[ $t =~ $FUZZONLY ]]; then
				targets+=("$mod $pkg $t")
			fi
		done
	done
done
echo "fuzzing ${#targets[@]} targets for $FUZZTIME each, $FUZZJOBS at a time, $FUZZPAR workers each; logs in $FUZZLOGS" >&2

run_one() {
	local mod=$1 pkg=$2 t=$3
	local log="$FUZZLOGS/$t.log"
	local start=$SECONDS
	if (cd "$mod" && $GO test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" -parallel "$FUZZPAR" "$pkg") >"$log" 2>&1; then
		echo "ok $((SECONDS - start))" >"$log.status"
	else
		echo "FAIL $((SECONDS - start))" >"$log.status"
	fi
}

running=0
for entry in "${targets[@]}"; do
	# shellcheck disable=SC2086
	run_one $entry &
	running=$((running + 1))
	if ((running >= FUZZJOBS)); then
		wait -n || true
		running=$((running - 1))
	fi
done
wait || true

failed=0
printf '| target | package | seconds | executions | new corpus entries | result |\n|---|---|---|---|---|---|\n'
for entry in "${targets[@]}"; do
	read -r _ pkg t <<<"$entry"
	log="$FUZZLOGS/$t.log"
	read -r result secs <"$log.status"
	last=$(grep -E 'fuzz: elapsed: .*execs: ' "$log" | tail -n 1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	fresh=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
	printf '| %s | %s | %s | %s | %s | %s |\n' "$t" "${pkg#github.com/buddy-run/buddy/}" "$secs" "${execs:-?}" "${fresh:-?}" "$result"
	if [[ $result != ok ]]; then
		failed=1
		echo "--- $t failed; its log ($log) ends:" >&2
		tail -n 30 "$log" >&2
	fi
done
echo "logs: $FUZZLOGS" >&2
exit $failed
