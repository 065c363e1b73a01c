#!/usr/bin/env python3
"""Line up make load's slow round trips with the server's fdatasync calls.

An analysis aid for docs/BENCHMARKS.md ("What sets the burst's tail"), not
part of any make target. Record both while the load runs, as root:

    perf record -q -a -k mono -o /tmp/load.perf \
        -e syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync &
    BUDDY_LOAD_DUMP=/tmp/load.calls make load
    kill -INT %1
    perf script -i /tmp/load.perf -F comm,tid,time,event,trace > /tmp/load.syncs
    scripts/load-syncs.py /tmp/load.calls /tmp/load.syncs

It prints the distribution of the server's fdatasync durations during the
burst, and for each burst call slower than --slow ms the fdatasync calls of
over --long ms that overlapped it. Both clocks are CLOCK_MONOTONIC (perf's
-k mono; the dump's third column).
"""

import argparse
import re
import sys

SYNC = re.compile(r"^\s*(?P<comm>\S+)\s+(?P<tid>\d+)\s+(?P<time>[\d.]+):\s+syscalls:sys_(?P<dir>enter|exit)_fdatasync:\s*(?P<rest>.*)$")


def read_calls(path):
    calls = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            phase, _unix, mono, rtt_us, skill_us = line.split()
            if phase == "burst":
                calls.append((int(mono) / 1e9, int(rtt_us) / 1e3, int(skill_us) / 1e3))
    if not calls:
        sys.exit(f"{path}: no burst calls (is it a BUDDY_LOAD_DUMP file?)")
    return sorted(calls)


def read_syncs(path, comm):
    open_, syncs = {}, []
    with open(path) as f:
        for line in f:
            m = SYNC.match(line)
            if not m or m["comm"] != comm:
                continue
            tid, t = m["tid"], float(m["time"])
            if m["dir"] == "enter":
                fd = m["rest"].split("fd:")[-1].strip()
                open_[tid] = (t, fd)
            elif tid in open_:
                start, fd = open_.pop(tid)
                syncs.append((start, (t - start) * 1e3, fd))
    if not syncs:
        sys.exit(f"{path}: no fdatasync of a {comm!r} process (recorded with perf script -F comm,tid,time,event,trace?)")
    return sorted(syncs)


def pct(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("calls", help="the BUDDY_LOAD_DUMP file")
    ap.add_argument("syncs", help="perf script output")
    ap.add_argument("--comm", default="buddy", help="the server's process name (default buddy)")
    ap.add_argument("--slow", type=float, default=8.0, help="a slow round trip, ms (default 8)")
    ap.add_argument("--long", type=float, default=2.5, help="a long fdatasync, ms (default 2.5)")
    args = ap.parse_args()

    calls = read_calls(args.calls)
    syncs = read_syncs(args.syncs, args.comm)
    # A call spans its round trip plus its skill's run (the round trip
    # excludes it).
    end = lambda c: c[0] + (c[1] + c[2]) / 1e3
    t0, t1 = calls[0][0], max(end(c) for c in calls)
    during = [s for s in syncs if t0 <= s[0] <= t1]
    if not during:
        sys.exit("no fdatasync during the burst: were both recorded in the same run?")
    d = sorted(s[1] for s in during)
    print(f"burst: {len(calls)} calls over {(t1 - t0) * 1e3:.0f} ms; {len(d)} fdatasync calls by {args.comm}")
    print(f"fdatasync ms: p50 {pct(d, .5):.2f}  p90 {pct(d, .9):.2f}  p99 {pct(d, .99):.2f}  max {d[-1]:.2f};"
          f"  over {args.long} ms: {sum(x > args.long for x in d)}")
    long_ = [s for s in during if s[1] > args.long]
    slow = [c for c in calls if c[1] > args.slow]
    explained = 0
    print(f"\nround trips over {args.slow} ms: {len(slow)} of {len(calls)} (asked at, ms into the burst)")
    for asked, rtt, skill in slow:
        over = [s for s in long_ if s[0] < end((asked, rtt, skill)) and s[0] + s[1] / 1e3 > asked]
        explained += bool(over)
        where = ", ".join(f"{(s[0] - t0) * 1e3:.1f} ({s[1]:.1f} ms, fd {s[2]})" for s in over) or "none"
        print(f"  asked {(asked - t0) * 1e3:8.1f}  round trip {rtt:6.2f}  skill {skill:5.2f}  | long fdatasync overlapping: {where}")
    if slow:
        print(f"\n{explained} of {len(slow)} slow round trips overlap a fdatasync of over {args.long} ms")


if __name__ == "__main__":
    main()
