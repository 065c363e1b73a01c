package hostfns

import (
	"context"
	"net/netip"
	"slices"
	"sync"

	"github.com/buddy-run/buddy/hostfns/fs"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
)

// Usage records what the host functions of one call touched: the caller puts
// it in the call's context (WithUsage) and reads it after the call. It is safe
// for concurrent use.
type Usage struct {
	mu           sync.Mutex
	bytesRead    int64
	bytesWritten int64
	paths        []string
	hosts        []string
	addrs        []string
	credentials  []string
}

// Report is a copy of what a Usage recorded; lists are distinct, in order of
// first use.
type Report struct {
	BytesRead, BytesWritten int64
	Paths, Hosts, Addresses []string
	// Credentials are the names of the credentials added to its requests.
	Credentials []string
}

type usageKey struct{}

// WithUsage returns ctx recording into u.
func WithUsage(ctx context.Context, u *Usage) context.Context {
	ctx = context.WithValue(ctx, usageKey{}, u)
	ctx = buddyhttp.WithCredentialUse(ctx, func(name string) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.credentials = addOnce(u.credentials, name)
	})
	return buddyhttp.WithContacts(ctx, func(host string, addr netip.AddrPort) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.hosts = addOnce(u.hosts, host)
		u.addrs = addOnce(u.addrs, addr.String())
	})
}

func usageFrom(ctx context.Context) *Usage {
	u, _ := ctx.Value(usageKey{}).(*Usage)
	return u
}

// Report returns what u recorded.
func (u *Usage) Report() Report {
	u.mu.Lock()
	defer u.mu.Unlock()
	return Report{
		BytesRead: u.bytesRead, BytesWritten: u.bytesWritten,
		Paths: slices.Clone(u.paths), Hosts: slices.Clone(u.hosts), Addresses: slices.Clone(u.addrs),
		Credentials: slices.Clone(u.credentials),
	}
}

// maxListed bounds each list, so that a skill looping over paths cannot grow
// an audit row without limit.
const maxListed = 64

func addOnce(list []string, v string) []string {
	if v == "" || len(list) >= maxListed || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// touched records a file access of n bytes at the canonical form of path.
func touched(ctx context.Context, roots *fs.Roots, path string, read, written int) {
	u := usageFrom(ctx)
	if u == nil {
		return
	}
	canon := roots.Canonical(path)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.bytesRead += int64(read)
	u.bytesWritten += int64(written)
	u.paths = addOnce(u.paths, canon)
}

// InspectRead resolves what fs_read of path would touch (see fs.Roots.Inspect).
// ok is false when the skill is granted no reads.
func (s *Set) InspectRead(ctx context.Context, path string) (t fs.Target, ok bool, err error) {
	if s.read == nil {
		return fs.Target{}, false, nil
	}
	t, err = s.read.Inspect(ctx, path, false, nil)
	return t, true, err
}

// InspectWrite resolves what fs_write of data to path would touch.
func (s *Set) InspectWrite(ctx context.Context, path string, data []byte) (t fs.Target, ok bool, err error) {
	if s.write == nil {
		return fs.Target{}, false, nil
	}
	t, err = s.write.Inspect(ctx, path, true, data)
	return t, true, err
}

// InspectURL resolves what http_get of url would contact first.
func (s *Set) InspectURL(ctx context.Context, url string) (t buddyhttp.Target, ok bool, err error) {
	if s.fetch == nil {
		return buddyhttp.Target{}, false, nil
	}
	t, err = s.fetch.Inspect(ctx, url)
	return t, true, err
}
