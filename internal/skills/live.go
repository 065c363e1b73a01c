package skills

import (
	"context"
	"fmt"
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

// Prepare implements catalog.Catalog on the current registry. The prepared
// call keeps that registry open until it runs or is released; after a
// reload it is current only if the new registry serves the same skill.
func (l *Live) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	r, done := l.acquire()
	p, err := r.Prepare(ctx, c)
	if err != nil {
		done()
		return nil, err
	}
	return &livePrepared{Prepared: p, l: l, r: r, done: done}, nil
}

// livePrepared is a prepared call of a registry Live served when it was
// prepared.
type livePrepared struct {
	catalog.Prepared
	l    *Live
	r    *Registry
	once sync.Once
	done func()
}

// Current implements catalog.Prepared across reloads.
func (p *livePrepared) Current(ctx context.Context) (string, error) {
	why, err := p.Prepared.Current(ctx)
	if err != nil || why != "" {
		return why, err
	}
	now := p.l.Current()
	if now == p.r {
		return "", nil
	}
	was := p.Info()
	info, err := now.Lookup(ctx, was.Name)
	if err != nil {
		return fmt.Sprintf("%s is no longer enabled after the configuration was reloaded", was.Name), nil
	}
	return changedOr(was, info, was.Name), nil
}

// Run implements catalog.Prepared.
func (p *livePrepared) Run(ctx context.Context) (*catalog.Result, error) {
	defer p.once.Do(p.done)
	return p.Prepared.Run(ctx)
}

// Release implements catalog.Prepared.
func (p *livePrepared) Release() {
	p.Prepared.Release()
	p.once.Do(p.done)
}

// Invoke prepares and runs c on the current registry without asking (cmd/
// and tests; front ends go through the gate).
func (l *Live) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	p, err := l.Prepare(ctx, c)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx)
}
