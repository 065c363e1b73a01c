package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/store"
)

// windowModel is a fake model with a context window, strict like
// llama.cpp's server: it counts a token a byte of the request (a byte-level
// tokenizer, like make e2e-llm's scripted model), refuses a request over its
// window with a context-exceeded error, and reports usage. Asked without
// tools it summarises; otherwise it calls read_file first in a turn (when
// toolFirst) and then answers "OK".
type windowModel struct {
	window      int
	toolFirst   bool
	failSummary bool
	// exceed is how many more requests to refuse whatever their size.
	exceed int
	// id is the tool-call id it gives ("" = none); args the call's
	// arguments (default {"path":"x"}).
	id, args string

	mu     sync.Mutex
	reqs   []agent.Request
	sizes  []int
	summed int // summary requests
}

// size is what the model counts of a request: every byte of it.
func (m *windowModel) size(req agent.Request) int {
	n := len(req.System)
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(agent.SchemaJSON(t))
	}
	for _, msg := range req.Messages {
		n += len(msg.Text) + len(msg.Content) + 4
		for _, tc := range msg.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments)
		}
	}
	return n
}

func (m *windowModel) Stream(_ context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	req.Messages = slices.Clone(req.Messages)
	m.reqs = append(m.reqs, req)
	n := m.size(req)
	m.sizes = append(m.sizes, n)
	if m.exceed > 0 || n > m.window {
		if m.exceed > 0 {
			m.exceed--
		}
		return nil, errs.Wrap(errs.ErrTooLarge, fmt.Sprintf("HTTP 400: the request (%d tokens) exceeds the available context size (%d tokens)", n, m.window), agent.ErrContextExceeded)
	}
	usage := agent.Usage{PromptTokens: int64(n), CompletionTokens: 2, Reported: true}
	if req.Tools == nil {
		m.summed++
		if m.failSummary {
			return nil, errs.New(errs.ErrUnavailable, "HTTP 500: the summary failed")
		}
		return &agent.Response{Text: fmt.Sprintf("summary %d", m.summed), StopReason: "stop", Usage: usage}, nil
	}
	last := req.Messages[len(req.Messages)-1]
	if m.toolFirst && last.Role == agent.RoleUser {
		args := m.args
		if args == "" {
			args = `{"path":"x"}`
		}
		return &agent.Response{StopReason: "tool_calls", Usage: usage,
			ToolCalls: []agent.ToolCall{{ProviderID: m.id, Name: "read_file", Arguments: args}}}, nil
	}
	onText("OK")
	return &agent.Response{Text: "OK", StopReason: "stop", Usage: usage}, nil
}

func (m *windowModel) requests() ([]agent.Request, []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs), slices.Clone(m.sizes)
}

// words is about n bytes of text.
func words(n int, seed string) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s%d ", seed, i%97)
	}
	return b.String()[:n]
}

// noticeSink records notices too.
type noticeSink struct {
	recSink
	mu      sync.Mutex
	notices []agent.Notice
}

func (s *noticeSink) Notice(n agent.Notice) {
	s.mu.Lock()
	s.notices = append(s.notices, n)
	s.mu.Unlock()
}

func (s *noticeSink) kinds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.notices {
		out = append(out, n.Kind)
	}
	return out
}

// TestConversationKeepsFitting: thirty turns of ~300 words against a
// 4,096-token model that counts a token a byte, with a restart half-way, a
// message larger than the window and a 40 KB tool result: every turn
// answers, every request the model accepted fits its window, the oldest
// turns are summarised (by a request without tools) and a tool call is
// never separated from its result, and the store keeps every message.
func TestConversationKeepsFitting(t *testing.T) {
	e := newEnv(t, envOpts{})
	big := words(40<<10, "r")
	e.cat.skills["read_file"].run = func(_ context.Context, args json.RawMessage) ([]byte, error) {
		if strings.Contains(string(args), "big") {
			return json.Marshal(map[string]string{"content": big})
		}
		return []byte(`{"content":"contents of x"}`), nil
	}
	model := &windowModel{window: 4096, toolFirst: true}
	var compactions []agent.Compaction
	newAgent := func() *agent.Agent {
		return e.agent(model, func(o *agent.Options) {
			o.Window, o.Reserve = 4096, 512
			o.OnCompaction = func(_ context.Context, c agent.Compaction) { compactions = append(compactions, c) }
		})
	}
	a := newAgent()
	sink := &noticeSink{}
	for i := range 30 {
		if i == 15 {
			a = newAgent() // a restart: nothing in memory
		}
		text := words(1800, fmt.Sprintf("t%d-", i))
		switch i {
		case 20:
			text = words(10<<10, "huge") // larger than the window
		case 25:
			model.args = `{"path":"big"}`
			text = "read the big file"
		}
		out := a.Turn(t.Context(), e.conv, text, sink)
		if out.Reason != agent.ReasonFinal || out.Text != "OK" {
			t.Fatalf("turn %d: %+v", i, out)
		}
		model.args = ""
	}
	reqs, sizes := model.requests()
	over := 0
	for i, r := range reqs {
		if sizes[i] > 4096 {
			over++ // refused: the turn compacted harder and retried
		}
		if r.Tools != nil {
			checkValid(t, r)
		}
	}
	// The first request is sent before any calibration (a guess of three
	// bytes a token, against a model counting one): it may be refused once.
	if over > 1 {
		t.Errorf("%d of %d requests did not fit the window: %v", over, len(reqs), sizes)
	}
	if model.summed == 0 || len(compactions) == 0 {
		t.Fatalf("no compaction in thirty turns of 300 words (%d summaries)", model.summed)
	}
	for _, c := range compactions {
		if c.Method != agent.MethodSummary || c.CoversFrom <= 0 || c.CoversTo < c.CoversFrom || c.Messages == 0 {
			t.Errorf("compaction %+v", c)
		}
	}
	if !slices.Contains(sink.kinds(), agent.NoticeCompaction) {
		t.Errorf("the user was not told of a compaction: %v", sink.kinds())
	}
	rows, err := e.st.Messages(t.Context(), e.conv)
	if err != nil {
		t.Fatal(err)
	}
	users, summaries, fullResult := 0, 0, false
	for _, r := range rows {
		switch r.Role {
		case store.RoleUser:
			users++
		case store.RoleSummary:
			summaries++
		case store.RoleTool:
			fullResult = fullResult || strings.Contains(string(r.Result), big)
		}
	}
	if users != 30 || summaries != len(compactions) || !fullResult {
		t.Fatalf("the store holds %d user messages (want 30), %d summaries (want %d), the whole 40 KB result: %v", users, summaries, len(compactions), fullResult)
	}
	// The big message and the big result reached the model cut, with notes.
	var sawCutMessage, sawCutResult bool
	for _, r := range reqs {
		for _, m := range r.Messages {
			sawCutMessage = sawCutMessage || m.Role == agent.RoleUser && strings.Contains(m.Text, "this message was cut to fit the model's context window")
			sawCutResult = sawCutResult || m.Role == agent.RoleTool && strings.Contains(m.Content, "this result was cut to fit the model's context window")
		}
	}
	if !sawCutMessage || !sawCutResult {
		t.Errorf("cut message seen: %v, cut result seen: %v", sawCutMessage, sawCutResult)
	}
	// The summary reached the model, in the system prompt.
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.System, "summarised; the user still sees them all") {
		t.Errorf("the last request's system prompt holds no summary:\n%s", last.System)
	}
}

// TestSummaryThatFailsDropsTurns: when the summary request fails, the
// oldest turns are left out instead, the model is told, and the turn
// answers.
func TestSummaryThatFailsDropsTurns(t *testing.T) {
	e := newEnv(t, envOpts{})
	model := &windowModel{window: 4096, failSummary: true}
	var comps []agent.Compaction
	a := e.agent(model, func(o *agent.Options) {
		o.Window, o.Reserve = 4096, 512
		o.OnCompaction = func(_ context.Context, c agent.Compaction) { comps = append(comps, c) }
	})
	for i := range 6 {
		if out := a.Turn(t.Context(), e.conv, words(1500, fmt.Sprint(i)), &recSink{}); out.Reason != agent.ReasonFinal {
			t.Fatalf("turn %d: %+v", i, out)
		}
	}
	if len(comps) == 0 || comps[0].Method != agent.MethodDropped || comps[0].Error == "" {
		t.Fatalf("compactions %+v, want dropped turns with the summary's error", comps)
	}
	reqs, _ := model.requests()
	if !strings.Contains(reqs[len(reqs)-1].System, "were left out of what you see") {
		t.Fatalf("the model was not told turns were left out:\n%s", reqs[len(reqs)-1].System)
	}
}

// TestContextExceededRecovery: a context-exceeded answer compacts harder
// and retries once; a second one ends the turn with too_large in plain
// words; the next message works.
func TestContextExceededRecovery(t *testing.T) {
	e := newEnv(t, envOpts{})
	model := &windowModel{window: 8192}
	a := e.agent(model, func(o *agent.Options) { o.Window, o.Reserve = 8192, 512 })
	for i := range 3 {
		a.Turn(t.Context(), e.conv, words(1500, fmt.Sprint(i)), &recSink{})
	}
	model.exceed = 1
	if out := a.Turn(t.Context(), e.conv, "once more", &recSink{}); out.Reason != agent.ReasonFinal {
		t.Fatalf("after one context-exceeded answer: %+v", out)
	}
	model.exceed = 2
	out := a.Turn(t.Context(), e.conv, "and again", &recSink{})
	if out.Reason != agent.ReasonError || !errors.Is(out.Err, errs.ErrTooLarge) || !strings.Contains(out.Err.Error(), "start a new conversation") &&
		!strings.Contains(out.Err.Error(), "Start a new conversation") {
		t.Fatalf("after two: %+v", out)
	}
	if out := a.Turn(t.Context(), e.conv, "still there?", &recSink{}); out.Reason != agent.ReasonFinal {
		t.Fatalf("the conversation is poisoned after a failed turn: %+v", out)
	}
}

// TestFixedPartTrimmed: tools and the SKILL.md list that would take more
// than their share of a small window are trimmed in the documented order,
// and the user is told what was left out.
func TestFixedPartTrimmed(t *testing.T) {
	e := newEnv(t, envOpts{})
	long := strings.Repeat("A tool that does many things, described at great length. ", 30)
	for i := range 12 {
		e.cat.add(catalog.Info{Name: fmt.Sprintf("tool%02d", i), Description: long, Permission: catalog.ReadOnly, Policy: catalog.Trust, Status: "ready"},
			func(context.Context, json.RawMessage) ([]byte, error) { return []byte(`{}`), nil })
	}
	for i := range 5 {
		e.cat.add(catalog.Info{Name: fmt.Sprintf("guide%d", i), Description: long, Type: catalog.TypeInstruction, Permission: catalog.ReadOnly, Policy: catalog.Trust, Status: "ready"},
			func(context.Context, json.RawMessage) ([]byte, error) { return []byte(`{}`), nil })
	}
	model := &windowModel{window: 2048}
	sink := &noticeSink{}
	out := e.agent(model, func(o *agent.Options) { o.Window, o.Reserve = 2048, 256 }).Turn(t.Context(), e.conv, "hi", sink)
	if out.Reason != agent.ReasonFinal {
		t.Fatalf("%+v", out)
	}
	if len(sink.notices) == 0 || sink.notices[0].Kind != agent.NoticeLeftOut {
		t.Fatalf("notices %+v, want what was left out", sink.notices)
	}
	lo := sink.notices[0].LeftOut
	if len(lo) < 2 || !strings.Contains(lo[0], "SKILL.md skills") || !strings.Contains(lo[1], "long descriptions") {
		t.Fatalf("left out %q, want the SKILL.md list first, then long descriptions", lo)
	}
	reqs, sizes := model.requests()
	last := len(reqs) - 1 // the first, before any calibration, may be refused
	for _, tool := range reqs[last].Tools {
		if strings.HasPrefix(tool.Name, "skill_") {
			t.Errorf("a skill_ tool was kept: %s", tool.Name)
		}
	}
	if sizes[last] > 2048 || last > 1 {
		t.Fatalf("requests took %v tokens of 2,048", sizes)
	}
}

// TestUsageAccounting: every request's usage is recorded with its purpose
// and cost, and the turn's Outcome sums it.
func TestUsageAccounting(t *testing.T) {
	e := newEnv(t, envOpts{})
	model := &windowModel{window: 100000, toolFirst: true}
	out := e.agent(model, func(o *agent.Options) {
		o.Window, o.Model, o.Usage = 100000, "m", e.st
		o.PriceInPerMTok, o.PriceOutPerMTok = 3, 15
	}).Turn(t.Context(), e.conv, "read x", &recSink{})
	if out.Reason != agent.ReasonFinal {
		t.Fatalf("%+v", out)
	}
	_, sizes := model.requests()
	want := int64(sizes[0] + sizes[1])
	u := out.Usage
	if u.Requests != 2 || u.PromptTokens != want || u.CompletionTokens != 4 || u.ContextTokens != int64(sizes[1]) || u.WindowTokens != 100000 || u.Estimated {
		t.Fatalf("usage %+v, want 2 requests, %d prompt tokens", u, want)
	}
	if wantCost := (float64(want)*3 + 4*15) / 1e6; u.CostUSD < wantCost*0.99 || u.CostUSD > wantCost*1.01 {
		t.Fatalf("cost %v, want %v", u.CostUSD, wantCost)
	}
	tot, err := e.st.ConversationUsage(t.Context(), e.conv)
	if err != nil || tot.Requests != 2 || tot.PromptTokens != want || tot.Last.Model != "m" || !tot.Last.Reported {
		t.Fatalf("stored usage %+v, %v", tot, err)
	}
}

// TestProviderToolCallIDs: the provider's own ids go back with the results
// (a Mistral-style nine-character id round-trips exactly); buddy's call ids
// stay its own; a call without an id gets one.
func TestProviderToolCallIDs(t *testing.T) {
	for _, id := range []string{"a1B2c3D4e", ""} {
		e := newEnv(t, envOpts{})
		model := &windowModel{window: 100000, toolFirst: true, id: id}
		sink := &recSink{}
		if out := e.agent(model).Turn(t.Context(), e.conv, "go", sink); out.Reason != agent.ReasonFinal {
			t.Fatalf("%+v", out)
		}
		reqs, _ := model.requests()
		calls, results := lastAssistantCalls(reqs[1]), toolMessages(reqs[1])
		if len(calls) != 1 || len(results) != 1 {
			t.Fatalf("calls %+v results %+v", calls, results)
		}
		pid := calls[0].ProviderID
		if id != "" && pid != id || id == "" && len(pid) != 9 || results[0].ToolCallID != pid {
			t.Fatalf("id %q: call %+v answered as %q", id, calls[0], results[0].ToolCallID)
		}
		if got := sink.of("tool_call")[0].call.ID; got == pid || !strings.HasPrefix(got, "call_") {
			t.Fatalf("buddy's call id %q", got)
		}
	}
}

// countingHistory counts the rows a History hands out.
type countingHistory struct {
	*store.Store
	mu   sync.Mutex
	rows int
}

func (c *countingHistory) MessagesAfter(ctx context.Context, conv string, after int64) ([]store.Message, error) {
	rows, err := c.Store.MessagesAfter(ctx, conv, after)
	c.mu.Lock()
	c.rows += len(rows)
	c.mu.Unlock()
	return rows, err
}

func (c *countingHistory) Messages(ctx context.Context, conv string) ([]store.Message, error) {
	return c.MessagesAfter(ctx, conv, 0)
}

// TestTurnReadsOnlyNewRows: after its first turn in a conversation, the
// agent reads only the rows appended since: a turn's cost does not grow with
// the conversation.
func TestTurnReadsOnlyNewRows(t *testing.T) {
	e := newEnv(t, envOpts{})
	for i := range 200 {
		if _, err := e.st.AppendMessage(t.Context(), store.Message{Conversation: e.conv, Role: store.RoleUser, Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	h := &countingHistory{Store: e.st}
	a := agent.New(agent.Options{Provider: &windowModel{window: 1 << 20}, Skills: e.gate, History: h, Window: 1 << 20})
	a.Turn(t.Context(), e.conv, "one", &recSink{})
	first := h.rows
	a.Turn(t.Context(), e.conv, "two", &recSink{})
	if first != 200 || h.rows-first != 2 {
		t.Fatalf("rows read: %d by the first turn (want 200), %d by the second (want 2: its predecessor's message and answer)", first, h.rows-first)
	}
}

// onlyMessages is a History that can only read a whole conversation.
type onlyMessages struct{ st *store.Store }

func (o onlyMessages) AppendMessage(ctx context.Context, m store.Message) (int64, error) {
	return o.st.AppendMessage(ctx, m)
}
func (o onlyMessages) Messages(ctx context.Context, conv string) ([]store.Message, error) {
	return o.st.Messages(ctx, conv)
}

// TestHistoryWithoutIncrementalReads: a History that can only read whole
// conversations still works turn after turn (the history is rebuilt).
func TestHistoryWithoutIncrementalReads(t *testing.T) {
	e := newEnv(t, envOpts{})
	model := &windowModel{window: 100000}
	a := agent.New(agent.Options{Provider: model, Skills: e.gate, History: onlyMessages{e.st}, Window: 100000})
	for i := range 3 {
		if out := a.Turn(t.Context(), e.conv, fmt.Sprint("turn ", i), &recSink{}); out.Reason != agent.ReasonFinal {
			t.Fatalf("turn %d: %+v", i, out)
		}
	}
	reqs, _ := model.requests()
	if got := len(reqs[2].Messages); got != 5 {
		t.Fatalf("the third turn sent %d messages, want 5 (two turns and the new message)", got)
	}
}
