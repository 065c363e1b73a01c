package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
)

// fakeSkill is one skill of the fake catalog.
type fakeSkill struct {
	info  catalog.Info
	run   func(ctx context.Context, args json.RawMessage) ([]byte, error)
	calls atomic.Int64
}

// fakeCatalog is the ungated catalog the real gate wraps in these tests:
// Check validates arguments against the schema with the registry's own
// validator; Invoke counts and runs.
type fakeCatalog struct {
	skills map[string]*fakeSkill
}

var pathSchema = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"path": map[string]any{"type": "string"}},
	"required":             []any{"path"},
	"additionalProperties": false,
}

var writeSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"path":    map[string]any{"type": "string"},
		"content": map[string]any{"type": "string"},
	},
	"required": []any{"path", "content"},
}

// newCatalog has read_file (read_only, trust), write_file (mutating,
// always) and broken (not ready).
func newCatalog() *fakeCatalog {
	c := &fakeCatalog{skills: map[string]*fakeSkill{}}
	c.add(catalog.Info{Name: "read_file", Description: "Read a text file.", Permission: catalog.ReadOnly, Policy: catalog.Trust, InputSchema: pathSchema, Status: "ready"},
		func(_ context.Context, args json.RawMessage) ([]byte, error) {
			var a struct{ Path string }
			_ = json.Unmarshal(args, &a)
			return fmt.Appendf(nil, `{"content":"contents of %s"}`, a.Path), nil
		})
	c.add(catalog.Info{Name: "write_file", Description: "Write a text file.", Permission: catalog.Mutating, Policy: catalog.Always, InputSchema: writeSchema, Status: "ready"},
		func(context.Context, json.RawMessage) ([]byte, error) { return []byte(`{"ok":true}`), nil })
	c.add(catalog.Info{Name: "broken", Description: "Never offered.", Permission: catalog.ReadOnly, Policy: catalog.Trust, Status: "verification_failed"},
		func(context.Context, json.RawMessage) ([]byte, error) { return []byte(`{}`), nil })
	return c
}

func (c *fakeCatalog) add(i catalog.Info, run func(context.Context, json.RawMessage) ([]byte, error)) *fakeSkill {
	s := &fakeSkill{info: i, run: run}
	c.skills[i.Name] = s
	return s
}

func (c *fakeCatalog) List(context.Context) ([]catalog.Info, error) {
	var out []catalog.Info
	for _, s := range c.skills {
		out = append(out, s.info)
	}
	slices.SortFunc(out, func(a, b catalog.Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (c *fakeCatalog) Lookup(_ context.Context, name string) (catalog.Info, error) {
	s, ok := c.skills[name]
	if !ok {
		return catalog.Info{}, errs.New(errs.ErrNotFound, "no skill named "+name)
	}
	return s.info, nil
}

func (c *fakeCatalog) Check(ctx context.Context, call catalog.Call) (catalog.Info, error) {
	i, err := c.Lookup(ctx, call.Skill)
	if err != nil {
		return i, err
	}
	if !i.Ready() {
		return i, errs.New(errs.ErrUnavailable, "skill "+i.Name+" is "+i.Status)
	}
	if err := skills.ValidateInput(i.InputSchema, call.Arguments); err != nil {
		return i, err
	}
	return i, nil
}

func (c *fakeCatalog) Prepare(ctx context.Context, call catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, c, call)
}

func (c *fakeCatalog) Invoke(ctx context.Context, call catalog.Call) (*catalog.Result, error) {
	i, err := c.Check(ctx, call)
	if err != nil {
		return nil, err
	}
	s := c.skills[i.Name]
	s.calls.Add(1)
	start := time.Now()
	out, err := s.run(ctx, call.Arguments)
	if err != nil {
		return nil, err
	}
	return &catalog.Result{Skill: i.Name, Output: out, Fuel: 1, Duration: time.Since(start)}, nil
}

// event is one thing a sink was told.
type event struct {
	kind string // delta | message | tool_call | tool_result
	text string
	call catalog.Call
	err  error
}

// recSink records what a turn produced.
type recSink struct {
	mu     sync.Mutex
	events []event
}

func (s *recSink) add(e event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

func (s *recSink) Delta(text string) { s.add(event{kind: "delta", text: text}) }
func (s *recSink) Message(role, text string) {
	s.add(event{kind: "message", text: role + ":" + text})
}
func (s *recSink) ToolCall(call catalog.Call) { s.add(event{kind: "tool_call", call: call}) }
func (s *recSink) ToolResult(call catalog.Call, _ *catalog.Result, err error, _ time.Duration) {
	s.add(event{kind: "tool_result", call: call, err: err})
}

func (s *recSink) of(kind string) []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []event
	for _, e := range s.events {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// step is one scripted model response: deltas streamed, then the response
// (or an error).
type step func(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error)

// script is a fake provider answering with its steps in order and keeping
// every request it was sent.
type script struct {
	mu    sync.Mutex
	steps []step
	reqs  []agent.Request
}

func (s *script) provider() agent.Provider {
	return agent.ProviderFunc(func(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		s.mu.Lock()
		req.Messages = slices.Clone(req.Messages)
		s.reqs = append(s.reqs, req)
		n := len(s.reqs)
		s.mu.Unlock()
		if n > len(s.steps) {
			return nil, fmt.Errorf("the script has %d steps; request %d was not expected", len(s.steps), n)
		}
		return s.steps[n-1](ctx, req, onText)
	})
}

func (s *script) requests() []agent.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// say streams pieces and answers with no tool calls.
func say(pieces ...string) step {
	return func(_ context.Context, _ agent.Request, onText func(string)) (*agent.Response, error) {
		for _, p := range pieces {
			onText(p)
		}
		return &agent.Response{Text: strings.Join(pieces, ""), StopReason: "stop"}, nil
	}
}

// call answers with tool calls (name, arguments pairs), ids "call_0" as a
// local server would.
func call(nameArgs ...string) step {
	return func(context.Context, agent.Request, func(string)) (*agent.Response, error) {
		r := &agent.Response{StopReason: "tool_calls"}
		for i := 0; i+1 < len(nameArgs); i += 2 {
			r.ToolCalls = append(r.ToolCalls, agent.ToolCall{ID: "call_0", Name: nameArgs[i], Arguments: nameArgs[i+1]})
		}
		return r, nil
	}
}

// env is an agent over a real gate, a fake catalog and a real store.
type env struct {
	t      *testing.T
	cat    *fakeCatalog
	gate   *approval.Gate
	st     *store.Store
	dbPath string
	conv   string
	asked  atomic.Int64
}

type envOpts struct {
	asker   func(ctx context.Context, req approval.Request) (bool, error)
	timeout time.Duration
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, cat: newCatalog(), dbPath: filepath.Join(t.TempDir(), "buddy.db")}
	asker := o.asker
	if asker == nil {
		asker = func(context.Context, approval.Request) (bool, error) { return true, nil }
	}
	e.gate = approval.New(e.cat, approval.Options{Settings: approval.Fixed(approval.Settings{Timeout: o.timeout}), Asker: approval.AskerFunc(func(ctx context.Context, req approval.Request) (bool, error) {
		e.asked.Add(1)
		return asker(ctx, req)
	})})
	e.open()
	e.conv = e.newConversation()
	return e
}

// open (re)opens the store.
func (e *env) open() {
	e.t.Helper()
	st, err := store.Open(e.t.Context(), e.dbPath, store.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
	e.t.Cleanup(func() { st.Close(context.Background()) })
}

var convN atomic.Int64

func (e *env) newConversation() string {
	e.t.Helper()
	id := fmt.Sprintf("c_test%d", convN.Add(1))
	now := time.Now().UTC()
	if err := e.st.CreateConversation(e.t.Context(), store.Conversation{ID: id, CreatedAt: now, UpdatedAt: now}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) agent(p agent.Provider, mod ...func(*agent.Options)) *agent.Agent {
	o := agent.Options{Provider: p, Skills: e.gate, History: e.st}
	for _, m := range mod {
		m(&o)
	}
	return agent.New(o)
}

// toolMessages are the tool messages of a request, in order.
func toolMessages(req agent.Request) []agent.Message {
	var out []agent.Message
	for _, m := range req.Messages {
		if m.Role == agent.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// lastAssistantCalls are the tool calls of the last assistant message.
func lastAssistantCalls(req agent.Request) []agent.ToolCall {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == agent.RoleAssistant {
			return req.Messages[i].ToolCalls
		}
	}
	return nil
}

// checkValid fails unless every assistant tool call is answered by the tool
// messages right after it, in the same order, and no tool message answers
// anything else.
func checkValid(t *testing.T, req agent.Request) {
	t.Helper()
	ms := req.Messages
	for i := 0; i < len(ms); i++ {
		switch ms[i].Role {
		case agent.RoleTool:
			t.Fatalf("message %d: a tool message that answers no call just before it: %+v", i, ms[i])
		case agent.RoleAssistant:
			for j, tc := range ms[i].ToolCalls {
				k := i + 1 + j
				want := tc.ProviderID // the provider's id goes back with the result
				if want == "" {
					want = tc.ID
				}
				if k >= len(ms) || ms[k].Role != agent.RoleTool || ms[k].ToolCallID != want {
					t.Fatalf("call %s (%s) of message %d is not answered in order: %+v", tc.ID, tc.Name, i, ms)
				}
			}
			i += len(ms[i].ToolCalls)
		}
	}
}
