package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

func TestTurnSendsSystemPromptHistoryAndTools(t *testing.T) {
	e := newEnv(t, envOpts{})
	s := &script{steps: []step{say("Hi."), say("Fine.")}}
	a := e.agent(s.provider(), func(o *agent.Options) { o.SystemPrompt = "You are a test." })
	if out := a.Turn(t.Context(), e.conv, "hello", &recSink{}); out.Reason != agent.ReasonFinal || out.Text != "Hi." {
		t.Fatalf("first turn: %+v", out)
	}
	if out := a.Turn(t.Context(), e.conv, "how are you?", &recSink{}); out.Reason != agent.ReasonFinal || out.Text != "Fine." {
		t.Fatalf("second turn: %+v", out)
	}
	reqs := s.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	req := reqs[1]
	if req.System != "You are a test." {
		t.Errorf("system prompt %q", req.System)
	}
	want := []agent.Message{
		{Role: agent.RoleUser, Text: "hello"},
		{Role: agent.RoleAssistant, Text: "Hi."},
		{Role: agent.RoleUser, Text: "how are you?"},
	}
	if len(req.Messages) != len(want) {
		t.Fatalf("history %+v, want %+v", req.Messages, want)
	}
	for i, m := range want {
		if got := req.Messages[i]; got.Role != m.Role || got.Text != m.Text || len(got.ToolCalls) != 0 {
			t.Errorf("message %d = %+v, want %+v", i, got, m)
		}
	}
	// Only ready skills are offered, with their schemas; the others' note
	// says approval may be needed.
	names := map[string]agent.Tool{}
	for _, tool := range req.Tools {
		names[tool.Name] = tool
	}
	if len(names) != 2 || names["broken"].Name != "" {
		t.Fatalf("tools %+v, want read_file and write_file only", req.Tools)
	}
	if rf := names["read_file"]; rf.Description != "Read a text file." || rf.InputSchema["required"].([]any)[0] != "path" {
		t.Errorf("read_file tool %+v", rf)
	}
	if wf := names["write_file"]; !strings.Contains(wf.Description, "approval") {
		t.Errorf("write_file's description %q does not say it may need approval", wf.Description)
	}
}

func TestDefaultSystemPrompt(t *testing.T) {
	e := newEnv(t, envOpts{})
	s := &script{steps: []step{say("ok")}}
	e.agent(s.provider()).Turn(t.Context(), e.conv, "hi", &recSink{})
	sys := s.requests()[0].System
	if sys != agent.DefaultSystemPrompt {
		t.Fatalf("system prompt %q, want the default", sys)
	}
	for _, w := range []string{"buddy", "approval"} {
		if !strings.Contains(sys, w) {
			t.Errorf("default system prompt does not mention %q", w)
		}
	}
}

func TestDeltasConcatenateToTheMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		step step
		want string
	}{
		{"streamed", say("Hel", "", "lo, ", "wörld", "!"), "Hello, wörld!"},
		{"not streamed", func(context.Context, agent.Request, func(string)) (*agent.Response, error) {
			return &agent.Response{Text: "whole answer", StopReason: "stop"}, nil
		}, "whole answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			sink := &recSink{}
			out := e.agent((&script{steps: []step{tc.step}}).provider()).Turn(t.Context(), e.conv, "hi", sink)
			var deltas strings.Builder
			for _, d := range sink.of("delta") {
				if d.text == "" {
					t.Error("an empty delta was sent")
				}
				deltas.WriteString(d.text)
			}
			msgs := sink.of("message")
			if deltas.String() != tc.want || len(msgs) != 1 || msgs[0].text != "assistant:"+tc.want || out.Text != tc.want {
				t.Fatalf("deltas %q, messages %+v, outcome %q; want all %q", deltas.String(), msgs, out.Text, tc.want)
			}
			// The message comes after its deltas.
			if last := sink.events[len(sink.events)-1]; last.kind != "message" {
				t.Errorf("last event %+v, want the message", last)
			}
		})
	}
}

func TestBadArgumentsGoBackWithoutInvoking(t *testing.T) {
	for _, tc := range []struct {
		name, skill, args, want string
	}{
		{"not JSON", "read_file", `{"path": "a.txt"`, "not a JSON object"},
		{"not an object", "read_file", `["a.txt"]`, "not a JSON object"},
		{"null", "read_file", `null`, "not a JSON object"},
		{"missing required", "read_file", `{}`, "invalid_input"},
		{"wrong type", "read_file", `{"path": 7}`, "invalid_input"},
		{"unknown property", "read_file", `{"path": "a", "mode": "x"}`, "invalid_input"},
		{"write_file missing content", "write_file", `{"path": "a"}`, "invalid_input"},
		{"unknown skill", "delete_everything", `{}`, "not_found"},
		{"skill not ready", "broken", `{}`, "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			s := &script{steps: []step{call(tc.skill, tc.args), say("sorry")}}
			sink := &recSink{}
			out := e.agent(s.provider()).Turn(t.Context(), e.conv, "go", sink)
			if out.Reason != agent.ReasonFinal {
				t.Fatalf("outcome %+v", out)
			}
			for name, sk := range e.cat.skills {
				if n := sk.calls.Load(); n != 0 {
					t.Errorf("%s was invoked %d times", name, n)
				}
			}
			if n := e.asked.Load(); n != 0 {
				t.Errorf("the user was asked %d times about a call that cannot run", n)
			}
			reqs := s.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			checkValid(t, reqs[1])
			tm := toolMessages(reqs[1])
			if len(tm) != 1 || !tm[0].IsError || !strings.Contains(tm[0].Content, tc.want) {
				t.Fatalf("tool messages %+v, want one error containing %q", tm, tc.want)
			}
			if len(out.ToolCalls) != 1 || out.ToolCalls[0].OK || out.ToolCalls[0].ErrorKind == "" {
				t.Errorf("outcome tool calls %+v", out.ToolCalls)
			}
		})
	}
}

func TestSeveralCallsAreAllAnsweredInOrder(t *testing.T) {
	e := newEnv(t, envOpts{})
	s := &script{steps: []step{
		call("read_file", `{"path":"a"}`, "read_file", `{"path":`, "write_file", `{"path":"w","content":"x"}`, "read_file", `{"path":"b"}`),
		say("done"),
	}}
	sink := &recSink{}
	out := e.agent(s.provider()).Turn(t.Context(), e.conv, "go", sink)
	if out.Reason != agent.ReasonFinal || out.Text != "done" {
		t.Fatalf("outcome %+v", out)
	}
	req := s.requests()[1]
	checkValid(t, req)
	calls := lastAssistantCalls(req)
	tm := toolMessages(req)
	if len(calls) != 4 || len(tm) != 4 {
		t.Fatalf("%d calls, %d results", len(calls), len(tm))
	}
	seen, seenPID := map[string]bool{}, map[string]bool{}
	for i, c := range calls {
		// buddy's call ids are its own; the model's "call_0" is kept for
		// the first call and made unique for the others (a result must
		// name one call).
		if c.ID == "" || seen[c.ID] || c.ProviderID == "" || seenPID[c.ProviderID] {
			t.Fatalf("call ids %+v are not unique", calls)
		}
		seen[c.ID], seenPID[c.ProviderID] = true, true
		if i == 0 && c.ProviderID != "call_0" {
			t.Errorf("the provider's own id was not kept: %+v", c)
		}
		if tm[i].ToolCallID != c.ProviderID || tm[i].ToolName != c.Name {
			t.Errorf("result %d answers %s/%s, want %s/%s", i, tm[i].ToolCallID, tm[i].ToolName, c.ProviderID, c.Name)
		}
	}
	wantContent := []string{"contents of a", "not a JSON object", `{"ok":true}`, "contents of b"}
	for i, w := range wantContent {
		if !strings.Contains(tm[i].Content, w) {
			t.Errorf("result %d = %q, want it to contain %q", i, tm[i].Content, w)
		}
	}
	if len(out.ToolCalls) != 4 || !out.ToolCalls[0].OK || out.ToolCalls[1].OK || out.ToolCalls[1].ErrorKind != "invalid_input" || !out.ToolCalls[2].OK {
		t.Errorf("outcome tool calls %+v", out.ToolCalls)
	}
	// The sink saw a tool_call and a tool_result for each call that went to
	// the gate (not the unparsable one), in order.
	var order []string
	for _, ev := range sink.events {
		if ev.kind == "tool_call" || ev.kind == "tool_result" {
			order = append(order, ev.kind+":"+ev.call.ID)
		}
	}
	want := []string{"tool_call:" + calls[0].ID, "tool_result:" + calls[0].ID, "tool_call:" + calls[2].ID, "tool_result:" + calls[2].ID, "tool_call:" + calls[3].ID, "tool_result:" + calls[3].ID}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("sink order %v, want %v", order, want)
	}
}

func TestDenialGoesBackToTheModel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		asker   func(ctx context.Context, req approval.Request) (bool, error)
		timeout time.Duration
	}{
		{"denied", func(context.Context, approval.Request) (bool, error) { return false, nil }, 0},
		{"timeout", func(ctx context.Context, _ approval.Request) (bool, error) {
			<-ctx.Done()
			return false, ctx.Err()
		}, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{asker: tc.asker, timeout: tc.timeout})
			s := &script{steps: []step{call("write_file", `{"path":"a","content":"b"}`), say("I could not write it.")}}
			out := e.agent(s.provider()).Turn(t.Context(), e.conv, "write", &recSink{})
			if out.Reason != agent.ReasonFinal || out.Text != "I could not write it." {
				t.Fatalf("the loop did not go on after the denial: %+v", out)
			}
			if n := e.cat.skills["write_file"].calls.Load(); n != 0 {
				t.Fatalf("write_file ran %d times", n)
			}
			tm := toolMessages(s.requests()[1])
			if len(tm) != 1 || !tm[0].IsError || !strings.HasPrefix(tm[0].Content, "User denied execution of write_file") {
				t.Fatalf("tool messages %+v", tm)
			}
			if out.ToolCalls[0].ErrorKind != string(errs.KindDenied) {
				t.Errorf("outcome %+v", out.ToolCalls)
			}
		})
	}
}

func TestMaxIterations(t *testing.T) {
	e := newEnv(t, envOpts{})
	var steps []step
	for range 5 {
		steps = append(steps, call("read_file", `{"path":"a"}`))
	}
	s := &script{steps: steps}
	sink := &recSink{}
	out := e.agent(s.provider(), func(o *agent.Options) { o.MaxIterations = 3 }).Turn(t.Context(), e.conv, "loop", sink)
	if out.Reason != agent.ReasonMaxIterations {
		t.Fatalf("reason %q, want max_iterations", out.Reason)
	}
	if n := len(s.requests()); n != 3 {
		t.Errorf("%d model calls, want 3", n)
	}
	if !strings.Contains(out.Text, "max_iterations = 3") {
		t.Errorf("final text %q does not say the limit", out.Text)
	}
	msgs := sink.of("message")
	if len(msgs) == 0 || msgs[len(msgs)-1].text != "assistant:"+out.Text {
		t.Errorf("messages %+v, want the limit message last", msgs)
	}
	// The message is stored: the next turn's model sees it after the
	// answered calls.
	s2 := &script{steps: []step{say("ok")}}
	e.agent(s2.provider()).Turn(t.Context(), e.conv, "and now?", &recSink{})
	req := s2.requests()[0]
	checkValid(t, req)
	if n := len(req.Messages); req.Messages[n-2].Role != agent.RoleAssistant || req.Messages[n-2].Text != out.Text {
		t.Errorf("history does not end with the limit message then the user's: %+v", req.Messages[n-2:])
	}
}

func TestCancel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(started chan<- struct{}) step
		block func(started chan<- struct{}) func(ctx context.Context, _ json.RawMessage) ([]byte, error)
	}{
		{name: "during the stream", first: func(started chan<- struct{}) step {
			return func(ctx context.Context, _ agent.Request, onText func(string)) (*agent.Response, error) {
				onText("Let me th")
				close(started)
				<-ctx.Done()
				return nil, errs.Wrap(errs.ErrCanceled, "the model call was canceled", ctx.Err())
			}
		}},
		{name: "during a tool call", first: func(chan<- struct{}) step {
			// Two calls: the second never starts, and is still answered.
			return call("read_file", `{"path":"slow"}`, "read_file", `{"path":"next"}`)
		}, block: func(started chan<- struct{}) func(ctx context.Context, _ json.RawMessage) ([]byte, error) {
			return func(ctx context.Context, _ json.RawMessage) ([]byte, error) {
				close(started)
				<-ctx.Done()
				return nil, errs.Wrap(errs.ErrCanceled, "read_file canceled", ctx.Err())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			started := make(chan struct{})
			if tc.block != nil {
				e.cat.skills["read_file"].run = tc.block(started)
			}
			s := &script{steps: []step{tc.first(started), say("back again")}}
			a := e.agent(s.provider())
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan agent.Outcome, 1)
			go func() { done <- a.Turn(ctx, e.conv, "think", &recSink{}) }()
			<-started
			t0 := time.Now()
			cancel()
			var out agent.Outcome
			select {
			case out = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the turn did not end after cancel")
			}
			if took := time.Since(t0); took > 2*time.Second {
				t.Errorf("cancel took %s", took)
			}
			if out.Reason != agent.ReasonCanceled {
				t.Fatalf("outcome %+v, want canceled", out)
			}
			// The conversation stays usable: a new turn gets a valid history.
			out = a.Turn(t.Context(), e.conv, "again", &recSink{})
			if out.Reason != agent.ReasonFinal || out.Text != "back again" {
				t.Fatalf("turn after cancel: %+v", out)
			}
			req := s.requests()[1]
			checkValid(t, req)
			last := req.Messages[len(req.Messages)-1]
			if last.Role != agent.RoleUser || last.Text != "again" {
				t.Errorf("last message %+v", last)
			}
		})
	}
}

func TestResultsAreCapped(t *testing.T) {
	e := newEnv(t, envOpts{})
	big := `{"content":"` + strings.Repeat("é", 5000) + `"}` // 10,014 bytes
	e.cat.skills["read_file"].run = func(context.Context, json.RawMessage) ([]byte, error) { return []byte(big), nil }
	s := &script{steps: []step{call("read_file", `{"path":"big"}`), say("ok"), say("ok")}}
	a := e.agent(s.provider(), func(o *agent.Options) { o.MaxResultBytes = 1001 })
	a.Turn(t.Context(), e.conv, "read", &recSink{})
	check := func(c string) {
		t.Helper()
		body, note, ok := strings.Cut(c, "\n[result cut")
		if !ok || !strings.Contains(note, "of 10014 bytes") {
			t.Fatalf("no cut note in %q", c[max(0, len(c)-120):])
		}
		if len(body) > 1001 || len(body) < 990 || !utf8.ValidString(body) || !strings.HasPrefix(big, body) {
			t.Errorf("kept %d bytes (valid UTF-8: %v), want a prefix of at most 1001", len(body), utf8.ValidString(body))
		}
	}
	check(toolMessages(s.requests()[1])[0].Content)
	// The store keeps the whole result; the cap applies again on reload.
	a.Turn(t.Context(), e.conv, "again", &recSink{})
	check(toolMessages(s.requests()[2])[0].Content)
	msgs, err := e.st.Messages(t.Context(), e.conv)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Role == "tool" && len(m.Result) != len(big) {
			t.Errorf("stored result of %d bytes, want %d", len(m.Result), len(big))
		}
	}
}

func TestHistorySurvivesARestart(t *testing.T) {
	e := newEnv(t, envOpts{})
	s := &script{steps: []step{call("read_file", `{"path":"notes.txt"}`, "write_file", `{"path":"x"}`), say("It says hi.")}}
	if out := e.agent(s.provider()).Turn(t.Context(), e.conv, "read notes", &recSink{}); out.Reason != agent.ReasonFinal {
		t.Fatal(out)
	}
	before := s.requests()[1]
	// A new store handle and a new agent: the server restarted.
	if err := e.st.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.open()
	gate := approval.New(e.cat, approval.Options{})
	s2 := &script{steps: []step{say("Yes.")}}
	a2 := agent.New(agent.Options{Provider: s2.provider(), Skills: gate, History: e.st})
	if out := a2.Turn(t.Context(), e.conv, "are you sure?", &recSink{}); out.Reason != agent.ReasonFinal || out.Text != "Yes." {
		t.Fatalf("after restart: %+v", out)
	}
	after := s2.requests()[0]
	checkValid(t, after)
	// Everything the model saw before, then its answer and the new message.
	if len(after.Messages) != len(before.Messages)+2 {
		t.Fatalf("history after restart has %d messages, want %d: %+v", len(after.Messages), len(before.Messages)+2, after.Messages)
	}
	for i, m := range before.Messages {
		got := after.Messages[i]
		if got.Role != m.Role || got.Text != m.Text || got.ToolCallID != m.ToolCallID || got.Content != m.Content || got.IsError != m.IsError || fmt.Sprint(got.ToolCalls) != fmt.Sprint(m.ToolCalls) {
			t.Errorf("message %d after restart %+v, before %+v", i, got, m)
		}
	}
	if m := after.Messages[len(before.Messages)]; m.Role != agent.RoleAssistant || m.Text != "It says hi." {
		t.Errorf("answer after restart: %+v", m)
	}
}

func TestDirectInvokeResultsAreNotSentToTheModel(t *testing.T) {
	e := newEnv(t, envOpts{})
	// What the server stores for a skill invoked by a client: a tool message
	// whose call no assistant message made.
	if _, err := e.st.AppendMessage(t.Context(), store.Message{
		Conversation: e.conv, Role: "tool", CallID: "call_direct", Skill: "read_file",
		Arguments: json.RawMessage(`{"path":"secret.txt"}`), OK: true, Result: json.RawMessage(`{"content":"SECRET"}`),
	}); err != nil {
		t.Fatal(err)
	}
	s := &script{steps: []step{say("hi")}}
	e.agent(s.provider()).Turn(t.Context(), e.conv, "hello", &recSink{})
	req := s.requests()[0]
	checkValid(t, req)
	if len(req.Messages) != 1 || req.Messages[0].Role != agent.RoleUser {
		t.Fatalf("messages %+v, want only the user's", req.Messages)
	}
	if strings.Contains(fmt.Sprint(req), "SECRET") {
		t.Fatal("a direct invocation's result reached the model")
	}
}

func TestProviderFailureEndsTheTurnAndTheConversationGoesOn(t *testing.T) {
	e := newEnv(t, envOpts{})
	upstream := errs.Wrap(errs.ErrUnavailable, "the OpenAI-compatible endpoint: HTTP 500: the server failed", errors.New("500"))
	s := &script{steps: []step{
		func(_ context.Context, _ agent.Request, onText func(string)) (*agent.Response, error) {
			onText("partial ")
			return nil, upstream
		},
		say("recovered"),
	}}
	a := e.agent(s.provider())
	sink := &recSink{}
	out := a.Turn(t.Context(), e.conv, "hi", sink)
	if out.Reason != agent.ReasonError || errs.KindOf(out.Err) != errs.KindUnavailable || !strings.Contains(out.Err.Error(), "HTTP 500") {
		t.Fatalf("outcome %+v", out)
	}
	// The partial text was shown and closed by a message.
	if msgs := sink.of("message"); len(msgs) != 1 || msgs[0].text != "assistant:partial " {
		t.Errorf("messages %+v", msgs)
	}
	if out := a.Turn(t.Context(), e.conv, "again", &recSink{}); out.Reason != agent.ReasonFinal || out.Text != "recovered" {
		t.Fatalf("next turn: %+v", out)
	}
	checkValid(t, s.requests()[1])
}

func TestToolFailureGoesBackWithItsKind(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.cat.skills["read_file"].run = func(context.Context, json.RawMessage) ([]byte, error) {
		return nil, errs.New(errs.ErrForbidden, "path /etc/passwd is outside the allowed directories")
	}
	s := &script{steps: []step{call("read_file", `{"path":"/etc/passwd"}`), say("not allowed")}}
	out := e.agent(s.provider()).Turn(t.Context(), e.conv, "read", &recSink{})
	tm := toolMessages(s.requests()[1])
	if len(tm) != 1 || !tm[0].IsError || tm[0].Content != "Error (forbidden): path /etc/passwd is outside the allowed directories" {
		t.Fatalf("tool messages %+v", tm)
	}
	if out.ToolCalls[0].ErrorKind != "forbidden" {
		t.Errorf("outcome %+v", out.ToolCalls)
	}
}

func TestNoProviderError(t *testing.T) {
	if errs.KindOf(agent.ErrNoProvider) != errs.KindConfig || !strings.Contains(agent.ErrNoProvider.Error(), "[provider]") {
		t.Fatalf("ErrNoProvider = %v (%s)", agent.ErrNoProvider, errs.KindOf(agent.ErrNoProvider))
	}
}

// TestCutAnswersAreKeptMarked: the text streamed before a model call failed
// stays in the conversation, marked with why it stopped; the model sees it
// again shortened, with a note that it was cut; a complete answer is seen
// whole.
func TestCutAnswersAreKeptMarked(t *testing.T) {
	long := strings.Repeat("é", 5000) // 10,000 bytes
	for _, tc := range []struct {
		name   string
		shown  string
		err    error
		cancel bool
		kind   errs.Kind
	}{
		{name: "over a cap", shown: long, err: errs.New(errs.ErrTooLarge, "the model's answer is over [provider] max_answer_bytes (10 KiB)"), kind: errs.KindTooLarge},
		{name: "upstream failure", shown: "partial ", err: errs.New(errs.ErrUnavailable, "the stream broke off midway"), kind: errs.KindUnavailable},
		{name: "canceled", shown: "Let me th", cancel: true, kind: errs.KindCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			ctx, cancel := context.WithCancel(t.Context())
			s := &script{steps: []step{
				func(ctx context.Context, _ agent.Request, onText func(string)) (*agent.Response, error) {
					onText(tc.shown[:len(tc.shown)/2])
					onText(tc.shown[len(tc.shown)/2:])
					if tc.cancel {
						cancel()
						return nil, errs.Wrap(errs.ErrCanceled, "the model call was canceled", ctx.Err())
					}
					return nil, tc.err
				},
				say("Again."),
			}}
			a := e.agent(s.provider(), func(o *agent.Options) { o.MaxResultBytes = 1001 })
			sink := &recSink{}
			out := a.Turn(ctx, e.conv, "first", sink)
			if tc.cancel {
				if out.Reason != agent.ReasonCanceled {
					t.Fatalf("outcome %+v", out)
				}
			} else if out.Reason != agent.ReasonError || errs.KindOf(out.Err) != tc.kind {
				t.Fatalf("outcome %+v", out)
			}
			// The client was shown the text, closed by a message.
			if msgs := sink.of("message"); len(msgs) != 1 || msgs[0].text != "assistant:"+tc.shown {
				t.Errorf("messages %.200v", msgs)
			}
			if out := a.Turn(t.Context(), e.conv, "second", &recSink{}); out.Reason != agent.ReasonFinal {
				t.Fatalf("the next turn: %+v", out)
			}
			// Stored whole, marked.
			rows, err := e.st.Messages(t.Context(), e.conv)
			if err != nil {
				t.Fatal(err)
			}
			if r := rows[1]; r.Role != "assistant" || r.Text != tc.shown || r.ErrorKind != string(tc.kind) || r.ErrorDetail == "" || len(r.ToolCalls) != 0 {
				t.Errorf("stored %+v", r)
			}
			// Sent again shortened and marked.
			req := s.requests()[1]
			checkValid(t, req)
			got := req.Messages[1].Text
			body, note, ok := strings.Cut(got, "\n[this answer was cut short ("+string(tc.kind)+"): ")
			if !ok || !utf8.ValidString(got) {
				t.Fatalf("sent %.80q…, want a note that it was cut", got)
			}
			if len(tc.shown) > 1001 {
				kept, more, _ := strings.Cut(body, "\n[… ")
				if len(kept) > 1001 || len(kept) < 990 || !strings.HasPrefix(tc.shown, kept) || more != fmt.Sprintf("%d more bytes]", len(tc.shown)-len(kept)) {
					t.Errorf("sent %d bytes then %q, want a prefix of at most 1001", len(kept), more)
				}
			} else if body != tc.shown {
				t.Errorf("sent %q, want %q", body, tc.shown)
			}
			if !strings.HasSuffix(note, "]") {
				t.Errorf("note %q", note)
			}
		})
	}
}
