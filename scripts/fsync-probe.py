#!/usr/bin/env python3
"""How long fdatasync takes on a quiet machine, for comparison with make load.

An analysis aid for docs/BENCHMARKS.md ("What sets the burst's tail"), not
part of any make target. It does what the server's WAL commits do, alone and
back to back: overwrite ~12 KiB of a 4 MiB file and fdatasync it, for a few
seconds, and prints the distribution.

    scripts/fsync-probe.py [DIR [SECONDS]]     # DIR defaults to ., SECONDS to 4
"""

import os
import sys
import time


def main():
    where = sys.argv[1] if len(sys.argv) > 1 else "."
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    path = os.path.join(where, f".fsync-probe-{os.getpid()}")
    size, frame = 4 << 20, b"x" * (3 * 4120)  # three WAL frames: 24-byte header + 4 KiB page
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.pwrite(fd, b"\0" * size, 0)
        os.fsync(fd)
        durations, offset, end = [], 0, time.monotonic() + seconds
        while time.monotonic() < end:
            os.pwrite(fd, frame, offset)
            offset = (offset + len(frame)) % (size - len(frame))
            t = time.perf_counter()
            os.fdatasync(fd)
            durations.append((time.perf_counter() - t) * 1e3)
    finally:
        os.close(fd)
        os.unlink(path)
    d = sorted(durations)
    p = lambda q: d[min(len(d) - 1, int(q * len(d)))]
    print(f"{where}: {len(d)} fdatasync calls in {seconds:g} s; ms: p50 {p(.5):.2f}  p90 {p(.9):.2f}  "
          f"p99 {p(.99):.2f}  p99.9 {p(.999):.2f}  max {d[-1]:.2f};  over 2.5 ms: {sum(x > 2.5 for x in d)}")


if __name__ == "__main__":
    main()
