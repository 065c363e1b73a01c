//go:build linux

package osmem

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

const sampleMaps = `00400000-01000000 r-xp 00000000 fd:01 4242 /usr/bin/buddy
01000000-02000000 r--p 00c00000 fd:01 4242 /usr/bin/buddy
02000000-02100000 rw-p 01c00000 fd:01 4242 /usr/bin/buddy
02100000-02200000 rw-p 00000000 00:00 0
7f0000000000-7f0000100000 r-xp 00000000 fd:01 4243 /usr/lib/other.so
7f0000200000-7f0000300000 r--p 00000000 fd:02 4242 /mnt/same-inode-other-device
7f0000400000-7f0000500000 r-xp 00000000 fd:01 4242 /usr/bin/buddy (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
`

// TestParseMaps: only the executable's own non-writable mappings are picked,
// by device and inode (also once the file is deleted), never another file's,
// a writable one or an anonymous one.
func TestParseMaps(t *testing.T) {
	got, err := parseMaps([]byte(sampleMaps), 0xfd, 0x01, 4242)
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x1000000}, {0x1000000, 0x2000000}, {0x7f0000400000, 0x7f0000500000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d: %x, want %x", i, got[i], want[i])
		}
	}
	for _, bad := range []string{
		"zz-01000000 r-xp 00000000 fd:01 4242 /usr/bin/buddy\n",
		"01000000-00400000 r-xp 00000000 fd:01 4242 /usr/bin/buddy\n",
		"00400000 r-xp 00000000 fd:01 4242 /usr/bin/buddy\n",
	} {
		if m, err := parseMaps([]byte(bad), 0xfd, 0x01, 4242); err == nil {
			t.Errorf("%q: %x, want an error", bad, m)
		}
	}
	for _, skipped := range []string{"", "short line\n", "00400000-01000000 r-xp 0 fd:01 notanumber x\n", "00400000-01000000 r-xp 0 fd 4242 x\n"} {
		if m, err := parseMaps([]byte(skipped), 0xfd, 0x01, 4242); err != nil || len(m) != 0 {
			t.Errorf("%q: %x, %v; want nothing", skipped, m, err)
		}
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add([]byte(sampleMaps), uint64(4242))
	f.Add([]byte("0-1 r 0 0:0 0\n"), uint64(0))
	f.Fuzz(func(t *testing.T, maps []byte, ino uint64) {
		ms, err := parseMaps(maps, 0xfd, 0x01, ino)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.end <= m.start {
				t.Fatalf("empty or inverted range %x", m)
			}
		}
	})
}

// rssFile is RssFile of /proc/self/status, in kB.
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%q", line)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseStartup: the executable's pages leave the resident set, the
// report says so, and the program runs on (its code comes back on use).
func TestReleaseStartup(t *testing.T) {
	before := rssFile(t)
	r, err := ReleaseStartup()
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if r.Mappings < 2 {
		t.Errorf("%d mappings released, want the text and the read-only data at least", r.Mappings)
	}
	if before > 4096 && after > before/2 {
		t.Errorf("file-backed resident memory %d kB → %d kB; want it at least halved", before, after)
	}
	if r.Before <= 0 || r.After <= 0 || r.After >= r.Before {
		t.Errorf("report: %+v; want a smaller resident set after", r)
	}
	// Code and read-only data paged out are read back on use.
	if m, err := parseMaps([]byte(sampleMaps), 0xfd, 0x01, 4242); err != nil || len(m) != 3 {
		t.Fatalf("after the release: %x, %v", m, err)
	}
}
