//go:build unix

package fs

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/testkit/hostile"
)

// Kinds the other tests of this package use.
const (
	forbidden = errs.KindForbidden
	tooLarge  = errs.KindTooLarge
)

// hostileCase is a row of hostile.PathRows with its path in this fixture: a
// guest path that both Read and Write must refuse, and the exact kind each
// must refuse it with.
type hostileCase struct {
	name      string
	path      string
	read      errs.Kind
	write     errs.Kind
	writeSize int  // bytes Write is given; 0 means 5
	device    bool // needs fixture.hasDevice
}

// hostileCases is the escape table (hostile.PathRows, shared with the
// end-to-end tests of cmd/buddy) for this fixture. It also seeds
// FuzzResolvePath.
func hostileCases(fx *fixture) []hostileCase {
	out := make([]hostileCase, 0, len(hostile.PathRows))
	for _, r := range hostile.PathRows {
		out = append(out, hostileCase{name: r.Name, path: r.In(fx.data), read: r.Read, write: r.Write, writeSize: r.WriteSize, device: r.Device})
	}
	return out
}

// TestSharedCapsMatch: the shared table's assumptions are this package's caps.
func TestSharedCapsMatch(t *testing.T) {
	if hostile.MaxPathDepth != MaxPathDepth {
		t.Errorf("hostile.MaxPathDepth = %d, MaxPathDepth = %d", hostile.MaxPathDepth, MaxPathDepth)
	}
	if hostile.MaxPathBytes != MaxPathBytes {
		t.Errorf("hostile.MaxPathBytes = %d, MaxPathBytes = %d", hostile.MaxPathBytes, MaxPathBytes)
	}
	fx := newFixture(t)
	for _, c := range hostileCases(fx) {
		if strings.Contains(c.path, "{") {
			t.Errorf("row %q: unexpanded placeholder in %q", c.name, c.path)
		}
	}
}

func TestHostileRead(t *testing.T) {
	fx := newFixture(t)
	cases := hostileCases(fx)
	if len(cases) < 60 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.device && !fx.hasDevice {
				t.Skip("cannot create a device node here (needs CAP_MKNOD)")
			}
			var data []byte
			var err error
			finishWithin(t, 5*time.Second, "Read", func() { data, err = fx.roots.Read(t.Context(), c.path) })
			noSecret(t, "Read", data)
			if data != nil {
				t.Errorf("Read returned %d bytes with an error", len(data))
			}
			wantKind(t, err, c.read, c.path)
			if !filepath.IsAbs(c.path) && strings.Contains(err.Error(), fx.tmp) {
				t.Errorf("error %q shows the host directory", err)
			}
			_, _, rerr := fx.roots.Resolve(c.path)
			if rerr != nil && errs.KindOf(rerr) != c.read {
				t.Errorf("Resolve refused with %s, Read with %s", errs.KindOf(rerr), c.read)
			}
		})
	}
	fx.checkOutsideUnchanged(t)
}

func TestHostileWrite(t *testing.T) {
	fx := newFixture(t)
	for _, c := range hostileCases(fx) {
		t.Run(c.name, func(t *testing.T) {
			if c.device && !fx.hasDevice {
				t.Skip("cannot create a device node here (needs CAP_MKNOD)")
			}
			size := c.writeSize
			if size == 0 {
				size = 5
			}
			var n int
			var err error
			finishWithin(t, 5*time.Second, "Write", func() {
				n, err = fx.roots.Write(t.Context(), c.path, []byte(strings.Repeat("w", size)))
			})
			if n != 0 {
				t.Errorf("Write returned n=%d with an error", n)
			}
			wantKind(t, err, c.write, c.path)
			if !filepath.IsAbs(c.path) && strings.Contains(err.Error(), fx.tmp) {
				t.Errorf("error %q shows the host directory", err)
			}
			// A refused write changes nothing at all, inside or outside.
			if d := diffSnapshots(fx.before, snapshot(t, fx.tmp), nil); len(d) > 0 {
				t.Fatalf("refused write changed the tree: %v", d)
			}
		})
	}
}
