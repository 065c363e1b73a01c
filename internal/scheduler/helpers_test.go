package scheduler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/budget"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/scheduler"
	"github.com/buddy-run/buddy/internal/store"
)

// clock is a fake clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// page records what the scheduler told the page, and answers held
// questions with answer (nil: never, until ctx ends).
type page struct {
	mu     sync.Mutex
	notes  []scheduler.Notification
	asked  []approval.Request
	answer func(req approval.Request) (bool, error)
	ids    atomic.Int64
}

func (p *page) Notify(n scheduler.Notification) {
	p.mu.Lock()
	p.notes = append(p.notes, n)
	p.mu.Unlock()
}

func (p *page) AskHeld(ctx context.Context, req approval.Request, asked func(string)) (bool, error) {
	p.mu.Lock()
	p.asked = append(p.asked, req)
	answer := p.answer
	p.mu.Unlock()
	asked("ap_" + string(rune('0'+p.ids.Add(1))))
	if answer != nil {
		return answer(req)
	}
	<-ctx.Done()
	return false, ctx.Err()
}

func (p *page) notifications() []scheduler.Notification {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.notes)
}

func (p *page) questions() []approval.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

// channel is a paired channel: deliveries and held questions.
type channel struct {
	mu    sync.Mutex
	notes []scheduler.Notification
	held  []scheduler.Held
	err   error // what Deliver answers
}

func (c *channel) Deliver(_ context.Context, n scheduler.Notification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.notes = append(c.notes, n)
	return nil
}

func (c *channel) AskHeld(_ context.Context, h scheduler.Held) error {
	c.mu.Lock()
	c.held = append(c.held, h)
	c.mu.Unlock()
	return nil
}

// provider is a fake LLM that counts its requests and answers with its
// script (the last step repeats); each answer reports usage tokens.
type provider struct {
	mu    sync.Mutex
	steps []func(req agent.Request) *agent.Response
	reqs  []agent.Request
	usage int64
}

func (p *provider) Stream(_ context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	n := len(p.reqs)
	step := p.steps[min(n, len(p.steps))-1]
	p.mu.Unlock()
	r := step(req)
	if r.Text != "" {
		onText(r.Text)
	}
	if p.usage > 0 {
		r.Usage = agent.Usage{PromptTokens: p.usage / 2, CompletionTokens: p.usage - p.usage/2, Reported: true}
	}
	return r, nil
}

func (p *provider) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

func answer(text string) func(agent.Request) *agent.Response {
	return func(agent.Request) *agent.Response { return &agent.Response{Text: text, StopReason: "stop"} }
}

func toolCall(name, args string) func(agent.Request) *agent.Response {
	return func(agent.Request) *agent.Response {
		return &agent.Response{StopReason: "tool_calls", ToolCalls: []agent.ToolCall{{ID: "c1", Name: name, Arguments: args}}}
	}
}

// fakeCatalog has write_file (mutating, always) and read_file (trust).
type fakeCatalog struct {
	writes atomic.Int64
}

var objSchema = map[string]any{"type": "object"}

func (c *fakeCatalog) List(context.Context) ([]catalog.Info, error) {
	return []catalog.Info{
		{Name: "read_file", Description: "Read.", Permission: catalog.ReadOnly, Policy: catalog.Trust, InputSchema: objSchema, Status: "ready"},
		{Name: "schedule", Description: "Schedule.", Permission: catalog.Mutating, Policy: catalog.Always, InputSchema: objSchema, Status: "ready"},
		{Name: "write_file", Description: "Write.", Permission: catalog.Mutating, Policy: catalog.Always, InputSchema: objSchema, Status: "ready"},
	}, nil
}

func (c *fakeCatalog) Lookup(ctx context.Context, name string) (catalog.Info, error) {
	infos, _ := c.List(ctx)
	for _, i := range infos {
		if i.Name == name {
			return i, nil
		}
	}
	return catalog.Info{}, errs.New(errs.ErrNotFound, "no skill "+name)
}

func (c *fakeCatalog) Check(ctx context.Context, call catalog.Call) (catalog.Info, error) {
	return c.Lookup(ctx, call.Skill)
}

func (c *fakeCatalog) Prepare(ctx context.Context, call catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, c, call)
}

func (c *fakeCatalog) Invoke(_ context.Context, call catalog.Call) (*catalog.Result, error) {
	if call.Skill == "write_file" {
		c.writes.Add(1)
	}
	return &catalog.Result{Skill: call.Skill, Output: json.RawMessage(`{"ok":true}`)}, nil
}

// rig is a scheduler over a real store, a real gate and real agents on a
// fake provider, with a fake clock, page and channel.
type rig struct {
	t     *testing.T
	st    *store.Store
	clock *clock
	page  *page
	chat  *channel
	prov  *provider
	cat   *fakeCatalog
	caps  config.Budget
	s     *scheduler.Scheduler
	dir   string
}

type rigOpts struct {
	dbPath    string
	dataDir   string
	owner     string
	loc       *time.Location
	heartbeat time.Duration
	now       *clock
	prov      *provider
	caps      config.Budget
	reserve   int
	poll      time.Duration
	logger    *slog.Logger
	wrap      func(scheduler.Store) scheduler.Store // the store as the scheduler sees it
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	if o.dbPath == "" {
		o.dbPath = filepath.Join(t.TempDir(), "buddy.db")
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	if o.loc == nil {
		o.loc = time.UTC
	}
	if o.now == nil {
		o.now = &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	}
	if o.prov == nil {
		o.prov = &provider{steps: []func(agent.Request) *agent.Response{answer(scheduler.NothingToSay)}}
	}
	st, err := store.Open(t.Context(), o.dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, st: st, clock: o.now, page: &page{}, chat: &channel{}, prov: o.prov, cat: &fakeCatalog{}, caps: o.caps, dir: o.dataDir}
	caps := func() config.Budget { return r.caps }
	var sst scheduler.Store = st
	if o.wrap != nil {
		sst = o.wrap(st)
	}
	r.s = scheduler.New(scheduler.Options{Store: sst, Location: o.loc, Now: o.now.Now, Owner: o.owner, Heartbeat: o.heartbeat,
		DataDir: o.dataDir, Caps: caps, Page: r.page, Deliverer: r.chat, Poll: o.poll, Logger: o.logger})
	gate := approval.New(r.cat, approval.Options{Asker: r.s.Asker(), Settings: approval.Fixed(approval.Settings{Timeout: scheduler.HoldFor})})
	meter := budget.New(budget.Options{Usage: st, Caps: caps, Location: o.loc, Now: o.now.Now})
	mk := func(skills catalog.Skills, lean bool) *agent.Agent {
		return agent.New(agent.Options{Provider: o.prov, Skills: skills, History: st, Usage: st, Meter: meter, Lean: lean,
			Window: 8192, Reserve: o.reserve, Now: o.now.Now, SystemPrompt: scheduler.SystemPrompt("")})
	}
	r.s.SetAgents(mk(r.s.Skills(gate, false), false), mk(r.s.Skills(gate, true), true))
	if err := r.s.SyncHeartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.s.Close(context.Background())
		_ = st.Close(context.Background())
	})
	return r
}

// add adds a job and fails the test on an error.
func (r *rig) add(sp scheduler.Spec) scheduler.Job {
	r.t.Helper()
	j, err := r.s.Add(r.t.Context(), sp, scheduler.ByCLI)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// messages are the texts of a conversation's messages of a role.
func (r *rig) messages(conv, role string) []string {
	r.t.Helper()
	ms, err := r.st.Messages(r.t.Context(), conv)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.Role == role {
			out = append(out, m.Text)
		}
	}
	return out
}

func (r *rig) job(id string) scheduler.Job {
	r.t.Helper()
	j, err := r.s.Get(r.t.Context(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func contains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
