package registry

import (
	"context"
	"sync"

	"github.com/buddy-run/buddy/internal/catalog"
)

// Live is a catalog whose registry can be replaced while it serves: on a
// configuration reload (SIGHUP) new calls go to the new registry, calls
// already running finish on the old one, which is closed after them.
type Live struct {
	mu  sync.RWMutex
	cur *Registry
	// active counts calls per registry, so an old one closes only when idle.
	active map[*Registry]*sync.WaitGroup
}

var _ catalog.Catalog = (*Live)(nil)

// NewLive serves r.
func NewLive(r *Registry) *Live {
	return &Live{cur: r, active: map[*Registry]*sync.WaitGroup{r: {}}}
}

// Current is the registry new calls go to.
func (l *Live) Current() *Registry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cur
}

// acquire returns the current registry, counted as busy until release.
func (l *Live) acquire() (*Registry, func()) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	wg := l.active[l.cur]
	wg.Add(1)
	return l.cur, wg.Done
}

// Swap makes next the registry new calls go to and closes the previous one
// once its calls have ended.
func (l *Live) Swap(ctx context.Context, next *Registry) {
	l.mu.Lock()
	old := l.cur
	wg := l.active[old]
	l.cur = next
	l.active[next] = &sync.WaitGroup{}
	delete(l.active, old)
	l.mu.Unlock()
	go func() {
		wg.Wait()
		_ = old.Close(context.WithoutCancel(ctx))
	}()
}

// Close closes the current registry.
func (l *Live) Close(ctx context.Context) error { return l.Current().Close(ctx) }

// List implements catalog.Catalog.
func (l *Live) List(ctx context.Context) ([]catalog.Info, error) {
	r, done := l.acquire()
	defer done()
	return r.List(ctx)
}

// Lookup implements catalog.Catalog.
func (l *Live) Lookup(ctx context.Context, name string) (catalog.Info, error) {
	r, done := l.acquire()
	defer done()
	return r.Lookup(ctx, name)
}

// Check implements catalog.Catalog.
func (l *Live) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	r, done := l.acquire()
	defer done()
	return r.Check(ctx, c)
}

// Invoke implements catalog.Catalog.
func (l *Live) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	r, done := l.acquire()
	defer done()
	return r.Invoke(ctx, c)
}
