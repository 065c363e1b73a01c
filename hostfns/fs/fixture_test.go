//go:build unix

package fs

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/testkit/hostile"
)

// The fixture's secrets and caps: the shared tree's (internal/testkit/hostile).
const (
	secretOutside = hostile.SecretOutside
	secretEvil    = hostile.SecretEvil
	helloContent  = hostile.HelloContent
	fxMax         = hostile.MaxBytes // the fixture's read and write caps
)

// fixture is the tree of hostile.BuildTree in a temporary directory, the
// layout hostile.PathRows assume:
//
//	tmp/data/         the allowed directory (hello.txt, sub/, dir/, symlinks, a FIFO, ...)
//	tmp/data-evil/    a sibling whose name starts with "data"
//	tmp/data2/        another sibling
//	tmp/outside/      secrets
type fixture struct {
	tmp, data, outside, evil string
	roots                    *Roots
	hasDevice                bool // data/zero_dev is a character device (needs CAP_MKNOD)
	before                   map[string]string
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	data := hostile.BuildTree(tb, tb.TempDir())
	tmp := filepath.Dir(data)
	fx := &fixture{
		tmp:       tmp,
		data:      data,
		outside:   filepath.Join(tmp, "outside"),
		evil:      filepath.Join(tmp, "data-evil"),
		hasDevice: hostile.HasDevice(data),
	}
	var err error
	fx.roots, err = Open([]string{fx.data}, Options{MaxReadBytes: fxMax, MaxWriteBytes: fxMax})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fx.roots.Close() })
	fx.before = snapshot(tb, tmp)
	return fx
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// snapshot describes every entry under dir (hostile.Snapshot).
func snapshot(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	return hostile.Snapshot(tb, dir)
}

// snapshotExcept is snapshot without the entries (and subtrees) skip selects.
func snapshotExcept(tb testing.TB, dir string, skip func(rel string) bool) map[string]string {
	tb.Helper()
	return hostile.SnapshotExcept(tb, dir, skip)
}

// diffSnapshots lists what differs between two snapshots.
func diffSnapshots(before, after map[string]string, skip func(string) bool) []string {
	return hostile.Diff(before, after, skip)
}

// outsideOnly skips the allowed directory: what is outside it must never change.
func (fx *fixture) outsideOnly(rel string) bool { return hostile.InRoot(fx.data)(rel) }

// checkOutsideUnchanged fails if anything outside data was created, removed or
// modified since the fixture was built.
func (fx *fixture) checkOutsideUnchanged(tb testing.TB) {
	tb.Helper()
	if d := diffSnapshots(fx.before, snapshotExcept(tb, fx.tmp, fx.outsideOnly), fx.outsideOnly); len(d) > 0 {
		tb.Fatalf("outside the allowed directory changed: %v", d)
	}
}

// noSecret fails if data holds any of the fixture's secrets.
func noSecret(tb testing.TB, what string, data []byte) {
	tb.Helper()
	for _, s := range hostile.Secrets {
		if bytes.Contains(data, []byte(s)) {
			tb.Fatalf("%s returned a secret from outside the allowed directory: %q", what, data)
		}
	}
}

// tempFiles lists the temporary files Write left under dir.
func tempFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), tempMarker) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// finishWithin runs f, failing the test if it does not return within d (a FIFO
// opened the wrong way blocks forever).
func finishWithin(tb testing.TB, d time.Duration, what string, f func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("%s did not return within %v (blocked?)", what, d)
	}
}

// wantKind fails unless err is of kind want and names the guest path.
func wantKind(tb testing.TB, err error, want errs.Kind, path string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error, want %s", want)
	}
	if got := errs.KindOf(err); got != want {
		tb.Fatalf("got kind %s (%v), want %s", got, err, want)
	}
	if !errors.Is(err, errs.Sentinel(want)) {
		tb.Fatalf("errors.Is(%v, %v) is false", err, errs.Sentinel(want))
	}
	quoted := strconv.Quote(path)
	if len(quoted) > 200 {
		quoted = quoted[:200]
	}
	if !strings.Contains(err.Error(), quoted) {
		tb.Fatalf("error %q does not name the path %s", err, quoted)
	}
}
