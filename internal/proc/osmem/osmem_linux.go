//go:build linux

package osmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReleaseStartup frees the heap's garbage and pages out the executable's
// read-only mappings (text and read-only data). It is safe at any time; it
// costs a garbage collection and the page faults that bring back what is
// used next.
func ReleaseStartup() (Report, error) {
	r := Report{Before: residentBytes()}
	debug.FreeOSMemory()
	ranges, err := executableRanges()
	if err == nil {
		for _, m := range ranges {
			if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_PAGEOUT); e != 0 {
				if e == syscall.EINVAL {
					err = ErrUnsupported // before Linux 5.4
				} else {
					err = fmt.Errorf("madvise %#x-%#x: %w", m.start, m.end, e)
				}
				break
			}
			r.Mappings++
		}
	}
	r.After = residentBytes()
	return r, err
}

type mapping struct{ start, end uintptr }

// executableRanges lists the mappings of the running executable that are not
// writable, from /proc/self/maps (matched by device and inode, so a binary
// replaced on disk since it started is still found).
func executableRanges() ([]mapping, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return nil, fmt.Errorf("the executable: %w", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	return parseMaps(maps, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
}

// parseMaps picks the non-writable mappings of file (major:minor, inode) out
// of a /proc/PID/maps listing.
func parseMaps(maps []byte, major, minor uint32, ino uint64) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// address perms offset dev inode [path]
		f := strings.Fields(sc.Text())
		if len(f) < 5 || strings.Contains(f[1], "w") {
			continue
		}
		if n, err := strconv.ParseUint(f[4], 10, 64); err != nil || n != ino {
			continue
		}
		maj, min, ok := strings.Cut(f[3], ":")
		if !ok || !hexIs(maj, major) || !hexIs(min, minor) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("/proc/self/maps: bad range %q", f[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("/proc/self/maps: bad range %q", f[0])
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}

func hexIs(s string, want uint32) bool {
	v, err := strconv.ParseUint(s, 16, 32)
	return err == nil && uint32(v) == want
}

// residentBytes is VmRSS from /proc/self/statm (0 if unreadable).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
