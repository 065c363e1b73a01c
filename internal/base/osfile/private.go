package osfile

import (
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// InsecureError: a directory buddy keeps code or data in, or a file that
// grants capabilities, can be changed by someone other than the user running
// buddy: it is writable by group or others, or owned by another user. It
// matches errs.ErrConfig, and says how to fix it.
type InsecureError struct {
	Path  string
	Dir   bool
	Mode  fs.FileMode // the permission and sticky bits found
	Owner int         // the owner's uid; -1 when the owner is not the problem
	UID   int         // the user running buddy
}

func (e *InsecureError) Error() string {
	var why, fix string
	if e.Dir {
		why = "buddy keeps code it runs (the compilation cache, installed skills) and its database under its directories"
		fix = "chmod 700 " + shellQuote(e.Path)
	} else {
		why = "a file others can change must not decide what skills may do"
		fix = "chmod 600 " + shellQuote(e.Path)
	}
	if e.Owner >= 0 {
		return fmt.Sprintf("%s is owned by uid %d, not by the user running buddy (uid %d): %s; use one of your own, or take it over after checking it: chown %d %s && %s",
			shellQuote(e.Path), e.Owner, e.UID, why, e.UID, shellQuote(e.Path), fix)
	}
	return fmt.Sprintf("%s is writable by %s (mode %s): %s; fix: %s",
		shellQuote(e.Path), writers(e.Mode), modeString(e.Mode), why, fix)
}

// Is matches errs.ErrConfig.
func (e *InsecureError) Is(target error) bool { return target == errs.ErrConfig }

// PrivateDir creates path (and missing parents) with mode 0700, or checks the
// existing directory: it must be a directory (after symlinks), owned by the
// user running buddy or by root, and not writable by group or others (a
// sticky, world-writable directory like /tmp is refused too). It does not
// change the mode of an existing directory: that is the operator's call.
func PrivateDir(path string) error {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return errs.Wrap(errs.ErrConfig, "creating directory "+path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return errs.Wrap(errs.ErrConfig, "directory "+path, err)
	}
	if !fi.IsDir() {
		return errs.Wrap(errs.ErrConfig, "directory "+path, &NotRegularError{Name: path, Type: describe(fi.Mode())})
	}
	return checkPrivate(path, fi)
}

// CheckPrivate checks a file or directory already stat'ed as PrivateDir and
// ReadPrivate do: owned by the user running buddy or root, not writable by
// group or others. It is a no-op where the platform has no Unix modes.
func CheckPrivate(path string, fi fs.FileInfo) error { return checkPrivate(path, fi) }

func checkPrivate(path string, fi fs.FileInfo) error {
	if !unixModes {
		return nil
	}
	uid := os.Geteuid()
	if owner, ok := ownerOf(fi); ok && owner != uid && owner != 0 {
		return &InsecureError{Path: path, Dir: fi.IsDir(), Mode: fi.Mode() & (fs.ModePerm | fs.ModeSticky), Owner: owner, UID: uid}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &InsecureError{Path: path, Dir: fi.IsDir(), Mode: fi.Mode() & (fs.ModePerm | fs.ModeSticky), Owner: -1, UID: uid}
	}
	return nil
}

func writers(m fs.FileMode) string {
	switch m.Perm() & 0o022 {
	case 0o022:
		return "group and others"
	case 0o020:
		return "group"
	}
	return "others"
}

// modeString is the octal mode as chmod takes it: 0770, 1777.
func modeString(m fs.FileMode) string {
	n := uint32(m.Perm())
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	return fmt.Sprintf("%04o", n)
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote quotes a path for the fix command line: as is when it needs no
// quoting, in single quotes when printable, else Go-quoted (control
// characters escaped, never printed raw).
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	if isPrintable(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strconv.Quote(s)
}

func isPrintable(s string) bool {
	for _, r := range s {
		if !strconv.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}
