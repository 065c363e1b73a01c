//go:build unix

package osfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// within fails the test when f has not returned after a few seconds: a read
// that blocks on a FIFO or streams /dev/zero must not hang the suite.
func within[T any](t *testing.T, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("the read is still blocked after 5s")
		panic("unreachable")
	}
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return path
}

func writeFile(t *testing.T, path string, data []byte, mode fs.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	const max = 64
	small := writeFile(t, filepath.Join(dir, "small"), []byte("hello"), 0o644)
	exact := writeFile(t, filepath.Join(dir, "exact"), bytes.Repeat([]byte("x"), max), 0o644)
	over := writeFile(t, filepath.Join(dir, "over"), bytes.Repeat([]byte("x"), max+1), 0o644)
	empty := writeFile(t, filepath.Join(dir, "empty"), nil, 0o644)
	fifo := mkfifo(t, filepath.Join(dir, "fifo"))
	linkFIFO := filepath.Join(dir, "link-to-fifo")
	linkFile := filepath.Join(dir, "link-to-file")
	for old, link := range map[string]string{fifo: linkFIFO, small: linkFile} {
		if err := os.Symlink(old, link); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	tests := []struct {
		name     string
		path     string
		want     string
		wantKind errs.Kind
		wantMsg  string
		notExist bool
	}{
		{name: "regular file", path: small, want: "hello"},
		{name: "empty file", path: empty, want: ""},
		{name: "exactly the cap", path: exact, want: strings.Repeat("x", max)},
		{name: "symlink to a regular file", path: linkFile, want: "hello"},
		{name: "one byte over the cap", path: over, wantKind: errs.KindTooLarge, wantMsg: over + " is 65 bytes, over the cap of 64 bytes"},
		{name: "FIFO", path: fifo, wantKind: errs.KindInvalidInput, wantMsg: fifo + " is a named pipe (FIFO), not a regular file"},
		{name: "symlink to a FIFO", path: linkFIFO, wantKind: errs.KindInvalidInput, wantMsg: "named pipe (FIFO)"},
		{name: "/dev/zero", path: "/dev/zero", wantKind: errs.KindInvalidInput, wantMsg: "/dev/zero is a character device"},
		{name: "/dev/null", path: "/dev/null", wantKind: errs.KindInvalidInput, wantMsg: "character device"},
		{name: "directory", path: dir, wantKind: errs.KindInvalidInput, wantMsg: dir + " is a directory"},
		{name: "socket", path: sock, wantKind: errs.KindInvalidInput, wantMsg: "a socket"},
		{name: "missing", path: filepath.Join(dir, "missing"), notExist: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type result struct {
				data []byte
				err  error
			}
			r := within(t, func() result {
				data, err := ReadBounded(tt.path, max)
				return result{data, err}
			})
			switch {
			case tt.notExist:
				if !errors.Is(r.err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want fs.ErrNotExist", r.err)
				}
			case tt.wantKind != "":
				if k := errs.KindOf(r.err); k != tt.wantKind || !strings.Contains(r.err.Error(), tt.wantMsg) {
					t.Fatalf("err = %v (%s), want %s containing %q", r.err, k, tt.wantKind, tt.wantMsg)
				}
				if r.data != nil {
					t.Errorf("data = %q on error", r.data)
				}
			default:
				if r.err != nil || string(r.data) != tt.want {
					t.Fatalf("ReadBounded = %q, %v; want %q", r.data, r.err, tt.want)
				}
			}
		})
	}
}

// TestReadBoundedSwappedForFIFO: a file replaced by a FIFO between the stat
// and the open is opened without blocking and refused on the opened fd.
func TestReadBoundedSwappedForFIFO(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, filepath.Join(dir, "input"), []byte("{}"), 0o600)
	afterStat = func(p string) {
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		mkfifo(t, p)
	}
	t.Cleanup(func() { afterStat = func(string) {} })
	err := within(t, func() error { _, err := ReadBounded(path, 1<<20); return err })
	var nr *NotRegularError
	if !errors.As(err, &nr) || errs.KindOf(err) != errs.KindInvalidInput {
		t.Fatalf("err = %v, want a NotRegularError", err)
	}
}

// TestReadBoundedGrew: a /proc-like file whose size says nothing (0) is still
// capped by what is read.
func TestReadBoundedUnsizedFile(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := ReadBounded("/proc/self/status", 1<<20); err != nil {
		t.Fatalf("under the cap: %v", err)
	}
	_, err := ReadBounded("/proc/self/status", 16)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Name != "/proc/self/status" || tl.Size != -1 {
		t.Fatalf("err = %#v, want a TooLargeError naming the file", err)
	}
	if !strings.Contains(err.Error(), "/proc/self/status is over the cap of 16 bytes") {
		t.Errorf("message = %q", err)
	}
}

func TestReadAllBounded(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		r       io.Reader
		max     int64
		want    string
		wantErr error
	}{
		{name: "under", r: strings.NewReader("abc"), max: 4, want: "abc"},
		{name: "exact", r: strings.NewReader("abcd"), max: 4, want: "abcd"},
		{name: "over", r: strings.NewReader("abcde"), max: 4, wantErr: errs.ErrTooLarge},
		{name: "endless", r: zeros{}, max: 1 << 20, wantErr: errs.ErrTooLarge},
		{name: "zero cap, empty", r: strings.NewReader(""), max: 0, want: ""},
		{name: "zero cap, one byte", r: strings.NewReader("a"), max: 0, wantErr: errs.ErrTooLarge},
		{name: "reader error", r: iotest.ErrReader(boom), max: 4, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadAllBounded(tt.r, tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("ReadAllBounded = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestCheckUTF8(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		offset int // -1 = valid
	}{
		{"ascii", `{"a":"b"}`, -1},
		{"multibyte", `{"a":"héllo ✓ 🎉"}`, -1},
		{"empty", "", -1},
		{"lone continuation byte", "ab\x80", 2},
		{"invalid lead byte", "\xff{}", 0},
		{"truncated sequence", `{"a":"` + "\xe2\x9c" + `"}`, 6},
		{"overlong encoding of /", "a\xc0\xafb", 1},
		{"UTF-16 surrogate", "ok\xed\xa0\x80", 2},
		{"U+FFFD itself is valid", "\uFFFD", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckUTF8("input", []byte(tt.in))
			if tt.offset < 0 {
				if err != nil {
					t.Fatalf("CheckUTF8 = %v, want nil", err)
				}
				return
			}
			var ie *InvalidUTF8Error
			if !errors.As(err, &ie) || ie.Offset != tt.offset || errs.KindOf(err) != errs.KindInvalidInput {
				t.Fatalf("CheckUTF8 = %v, want an invalid_input error at offset %d", err, tt.offset)
			}
			if !strings.Contains(err.Error(), "input is not valid UTF-8") {
				t.Errorf("message = %q", err)
			}
		})
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{32 << 20: "32 MiB", 1 << 20: "1 MiB", 512 << 10: "512 KiB", 1000: "1000 bytes", 0: "0 bytes", 1<<20 + 1: "1048577 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
