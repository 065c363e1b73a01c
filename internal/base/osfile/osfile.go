// Package osfile reads the files an operator names (buddy.toml, skill.toml,
// a module, --input @FILE) with bounds, and keeps buddy's own directories
// private.
//
// A name on the command line can point anywhere: at a FIFO that never ends,
// at /dev/zero, at a directory, at a 10 GB log. ReadBounded refuses anything
// but a regular file (checked before the open, and again on the opened file,
// which is opened non-blocking so a FIFO swapped in between cannot hang it)
// and anything over its cap, with an error naming the file and the cap:
//
//	data, err := osfile.ReadBounded(path, 1<<20)  // *NotRegularError, *TooLargeError
//	data, err := osfile.ReadAllBounded(os.Stdin, max)
//	err = osfile.CheckUTF8(path, data)            // *InvalidUTF8Error: never rewritten to U+FFFD
//
// buddy runs native code from its compilation cache and grants capabilities
// from buddy.toml, so neither may be writable by anyone but the user running
// buddy:
//
//	err = osfile.PrivateDir(dataDir)              // creates 0700, or refuses a shared one (*InsecureError)
//	data, err := osfile.ReadPrivate(configPath, max)
//
// Every error matches an errs sentinel: too_large, invalid_input, config.
package osfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TooLargeError: a file or stream over its cap. It matches errs.ErrTooLarge.
type TooLargeError struct {
	Name string // the file; "" for a stream the caller names
	Size int64  // the file's size; -1 when only "more than Max" is known
	Max  int64
}

func (e *TooLargeError) Error() string {
	what := e.Name
	if what == "" {
		what = "the data"
	}
	if e.Size >= 0 {
		return fmt.Sprintf("%s is %d bytes, over the cap of %s", what, e.Size, Size(e.Max))
	}
	return fmt.Sprintf("%s is over the cap of %s", what, Size(e.Max))
}

// Is matches errs.ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == errs.ErrTooLarge }

// NotRegularError: the path names a FIFO, a device, a directory or a socket,
// which buddy does not read (a FIFO or a device can block or never end). It
// matches errs.ErrInvalidInput.
type NotRegularError struct {
	Name string
	Type string // "a directory", "a named pipe (FIFO)", ...
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Name, e.Type)
}

// Is matches errs.ErrInvalidInput.
func (e *NotRegularError) Is(target error) bool { return target == errs.ErrInvalidInput }

// InvalidUTF8Error: text that is not valid UTF-8. It matches
// errs.ErrInvalidInput.
type InvalidUTF8Error struct {
	Name   string
	Offset int // of the first invalid byte
}

func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("%s is not valid UTF-8 (invalid byte at offset %d)", e.Name, e.Offset)
}

// Is matches errs.ErrInvalidInput.
func (e *InvalidUTF8Error) Is(target error) bool { return target == errs.ErrInvalidInput }

// ReadBounded reads the regular file at path, at most max bytes. A path that
// does not exist gives the *fs.PathError of the open (fs.ErrNotExist); one
// that is not a regular file (after symlinks) a *NotRegularError, without
// reading; one over max a *TooLargeError.
func ReadBounded(path string, max int64) ([]byte, error) {
	return read(path, max, false)
}

// ReadPrivate is ReadBounded for a file that decides what buddy may do
// (buddy.toml): the file as opened must also be owned by the user running
// buddy (or root) and not writable by group or others (*InsecureError).
func ReadPrivate(path string, max int64) ([]byte, error) {
	return read(path, max, true)
}

func read(path string, max int64, private bool) ([]byte, error) {
	check := func(fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return &NotRegularError{Name: path, Type: describe(fi.Mode())}
		}
		if private {
			return checkPrivate(path, fi)
		}
		return nil
	}
	// Refuse before opening: opening a device or a FIFO can have effects of
	// its own (a tape rewinds, a FIFO's writer wakes up).
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	afterStat(path)
	// The file may have been swapped since the stat: open without blocking
	// (a FIFO's open would wait for a writer) and check what was opened.
	f, err := os.OpenFile(path, readFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, &TooLargeError{Name: path, Size: fi.Size(), Max: max}
	}
	data, err := ReadAllBounded(f, max)
	if err != nil {
		if tl, ok := err.(*TooLargeError); ok {
			tl.Name = path // the file grew while it was read
		}
		return nil, err
	}
	return data, nil
}

// afterStat is a no-op; tests swap the file between the stat and the open.
var afterStat = func(string) {}

// ReadAllBounded reads r to its end, at most max bytes; more is a
// *TooLargeError (with no Name: the caller says what r is).
func ReadAllBounded(r io.Reader, max int64) ([]byte, error) {
	if max < 0 {
		max = 0
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooLargeError{Size: -1, Max: max}
	}
	return data, nil
}

// CheckUTF8 returns an *InvalidUTF8Error naming name when b is not valid
// UTF-8. Text is refused rather than decoded with U+FFFD in place of the bad
// bytes: a rewritten input is not what the operator wrote.
func CheckUTF8(name string, b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	off := 0
	for off < len(b) {
		r, n := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return &InvalidUTF8Error{Name: name, Offset: off}
}

// Size writes a byte count for people: "32 MiB", "512 KiB", "1000 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file (" + m.Type().String() + ")"
}
