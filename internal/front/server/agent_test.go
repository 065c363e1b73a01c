package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/llm/openai"
)

// The approval flow through the agent loop: a real WebSocket client sends a message,
// a fake OpenAI-compatible server (scripted: a tool call, then an answer)
// plays the model, and the real stack runs the skills behind the gate.

// llmReply is one scripted answer of the fake model.
type llmReply func(w http.ResponseWriter)

// fakeLLM is an OpenAI-compatible /v1/chat/completions server answering
// with its replies in order and keeping every request body.
type fakeLLM struct {
	mu      sync.Mutex
	replies []llmReply
	bodies  []chatRequest
	srv     *httptest.Server
}

// chatRequest is the part of a Chat Completions request the tests read.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func newFakeLLM(t *testing.T, replies ...llmReply) *fakeLLM {
	f := &fakeLLM{replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("fake LLM: request body: %v", err)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, req)
		n := len(f.bodies)
		f.mu.Unlock()
		if n > len(f.replies) {
			t.Errorf("fake LLM: request %d was not scripted", n)
			http.Error(w, `{"error":{"message":"not scripted"}}`, http.StatusBadRequest)
			return
		}
		f.replies[n-1](w)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLLM) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.bodies...)
}

// toolContents are the tool messages of a request: call id → content.
func (r chatRequest) toolContents() map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		if m.Role == "tool" {
			s, _ := m.Content.(string)
			out[m.ToolCallID] = s
		}
	}
	return out
}

// toolResults counts the tool messages of a request (a server that numbers
// every call call_0 gives several the same id).
func (r chatRequest) toolResults() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

func sseChunks(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func llmChunk(delta, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + `}]}`
}

// callsTool asks for one tool call, its arguments split in two chunks, with
// llama.cpp's reused id.
func callsTool(skill, args string) llmReply {
	half := len(args) / 2
	a1, _ := json.Marshal(args[:half])
	a2, _ := json.Marshal(args[half:])
	return func(w http.ResponseWriter) {
		sseChunks(w,
			llmChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"`+skill+`","arguments":`+string(a1)+`}}]}`, ""),
			llmChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(a2)+`}}]}`, ""),
			llmChunk(`{}`, "tool_calls"))
	}
}

// answers streams text in pieces.
func answers(pieces ...string) llmReply {
	return func(w http.ResponseWriter) {
		var cs []string
		for _, p := range pieces {
			b, _ := json.Marshal(p)
			cs = append(cs, llmChunk(`{"role":"assistant","content":`+string(b)+`}`, ""))
		}
		sseChunks(w, append(cs, llmChunk(`{}`, "stop"))...)
	}
}

func failsWith(code int) llmReply {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After-Ms", "1")
		w.WriteHeader(code)
		fmt.Fprint(w, `{"error":{"message":"the GPU caught fire","type":"server_error"}}`)
	}
}

// withLLM makes the stack's agent talk to llm.
func withLLM(t *testing.T, llm *fakeLLM, mod ...func(*openai.Options)) func(*server.Options) {
	return func(o *server.Options) {
		po := openai.Options{BaseURL: llm.srv.URL + "/v1", Model: "fake", Timeout: frameWait}
		for _, m := range mod {
			m(&po)
		}
		p, err := openai.New(po)
		if err != nil {
			t.Fatal(err)
		}
		o.NewAgent = func(gate server.Gate) server.Agent {
			return agent.New(agent.Options{Provider: p, Skills: gate, History: o.Store, NewCallID: server.NewCallID})
		}
	}
}

// sendText sends a message; conv "" starts a conversation, whose id is
// returned.
func (c *client) sendText(conv, text string) string {
	c.t.Helper()
	f := map[string]any{"type": "send", "text": text}
	if conv != "" {
		f["conversation_id"] = conv
	}
	c.send(f)
	if conv == "" {
		conv = c.expect("conversation").str("conversation_id")
		if conv == "" {
			c.t.Fatal("conversation frame without an id")
		}
	}
	return conv
}

// turnWait bounds the wait for each frame of a turn: a skill's first call
// in a test process compiles its module, which takes over 10 s under -race
// on a loaded two-core machine.
const turnWait = 90 * time.Second

// nextWithin returns the next frame, waiting at most d. Frames read before
// the connection closed are still returned.
func (c *client) nextWithin(d time.Duration) frame {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-c.closed:
		select {
		case f := <-c.frames:
			return f
		default:
		}
		c.t.Fatalf("connection closed while waiting for a frame: %v", c.err)
	case <-time.After(d):
		c.t.Fatalf("no frame within %s", d)
	}
	return nil
}

// turn collects the frames of a turn up to its done frame, answering each
// approval_request with answer (nil: leave it unanswered).
func (c *client) turn(conv string, answer *bool) (frames []frame, done frame) {
	c.t.Helper()
	for {
		f := c.nextWithin(turnWait)
		if cid := f.str("conversation_id"); cid != "" && cid != conv && f.typ() != "approval_resolved" {
			c.t.Fatalf("frame of another conversation: %v", f)
		}
		frames = append(frames, f)
		switch f.typ() {
		case "approval_request":
			if answer != nil {
				c.send(approveFrame(f.str("id"), *answer))
			}
		case "done":
			return frames, f
		}
	}
}

func ofType(frames []frame, typ string) []frame {
	var out []frame
	for _, f := range frames {
		if f.typ() == typ {
			out = append(out, f)
		}
	}
	return out
}

var yes, no = func() (*bool, *bool) { t, f := true, false; return &t, &f }()

func TestAgentSeed002(t *testing.T) {
	type want struct {
		asked      bool   // an approval_request was sent
		level      string // its permission_level
		resultKind string // "" = ok
		inLLM      string // in the tool message the model gets next
		file       bool   // out.txt exists afterwards
	}
	for _, tc := range []struct {
		name   string
		opts   stackOpts
		skill  string
		args   string
		answer *bool
		want   want
	}{
		{name: "read_file runs without approval", skill: "read_file", args: readArgs, want: want{inLLM: "buy oat milk"}},
		{name: "write_file approved", skill: "write_file", args: writeArgs, answer: yes, want: want{asked: true, level: "mutating", inLLM: "{", file: true}},
		{name: "write_file denied", skill: "write_file", args: writeArgs, answer: no, want: want{asked: true, level: "mutating", resultKind: "denied", inLLM: "User denied execution of write_file"}},
		{name: "write_file trusted", opts: stackOpts{writeApproval: "trust"}, skill: "write_file", args: writeArgs, want: want{file: true, inLLM: "{"}},
		{name: "fetch_url asks", opts: stackOpts{fetchDomains: []string{"example.com"}}, skill: "fetch_url", args: `{"url":"https://example.com/"}`, answer: no, want: want{asked: true, level: "network", resultKind: "denied", inLLM: "User denied execution of fetch_url"}},
		{name: "timeout is a denial", opts: stackOpts{timeout: 300 * time.Millisecond}, skill: "write_file", args: writeArgs, want: want{asked: true, level: "mutating", resultKind: "denied", inLLM: "User denied execution of write_file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			llm := newFakeLLM(t, callsTool(tc.skill, tc.args), answers("All ", "done."))
			o := tc.opts
			o.server = withLLM(t, llm)
			s := newStack(t, o)
			c := s.dial(t)
			conv := c.sendText("", "please do it")
			frames, done := c.turn(conv, tc.answer)
			if done.str("reason") != "final" {
				t.Fatalf("done %v; frames %v", done, frames)
			}
			calls, results, reqs := ofType(frames, "tool_call"), ofType(frames, "tool_result"), ofType(frames, "approval_request")
			if len(calls) != 1 || calls[0].str("skill") != tc.skill || len(results) != 1 || results[0].str("call_id") != calls[0].str("call_id") {
				t.Fatalf("tool_call %v, tool_result %v", calls, results)
			}
			callID := calls[0].str("call_id")
			if !strings.HasPrefix(callID, "call_") || callID == "call_0" {
				t.Errorf("call id %q: want the server's own, not the model's", callID)
			}
			if tc.want.asked {
				if len(reqs) != 1 {
					t.Fatalf("%d approval requests, want 1", len(reqs))
				}
				checkRequest(t, reqs[0], conv, tc.skill, tc.args, tc.want.level)
			} else if len(reqs) != 0 {
				t.Fatalf("approval requested: %v", reqs)
			}
			if tc.want.resultKind == "" {
				wantOK(t, results[0])
			} else if k, _ := resultError(t, results[0]); k != tc.want.resultKind {
				t.Errorf("result kind %q, want %q", k, tc.want.resultKind)
			}
			if got := fileExists(t, s.outFile()); got != tc.want.file {
				t.Errorf("out.txt exists: %v, want %v", got, tc.want.file)
			}
			// The model's next request carries the result under the
			// model's own id of the call (llama.cpp's "call_0"), after the
			// assistant message that made the call; the frames carry
			// buddy's (callID).
			bodies := llm.requests()
			if len(bodies) != 2 {
				t.Fatalf("%d model requests, want 2", len(bodies))
			}
			content, ok := bodies[1].toolContents()["call_0"]
			if !ok || !strings.Contains(content, tc.want.inLLM) || !strings.HasPrefix(callID, "call_") || callID == "call_0" {
				t.Fatalf("tool messages to the model %v, want call_0 to contain %q (frames' call id %s)", bodies[1].toolContents(), tc.want.inLLM, callID)
			}
			// The answer streamed: deltas add up to the message before done.
			var deltas strings.Builder
			for _, d := range ofType(frames, "delta") {
				deltas.WriteString(d.str("text"))
			}
			msgs := ofType(frames, "message")
			if deltas.String() != "All done." || len(msgs) != 1 || msgs[0].str("text") != "All done." || msgs[0].str("role") != "assistant" {
				t.Errorf("deltas %q, messages %v", deltas.String(), msgs)
			}
			if frames[len(frames)-2].typ() != "message" {
				t.Errorf("the frame before done is %v, want the answer", frames[len(frames)-2])
			}
			// The tools offered are the registered skills, with schemas.
			var names []string
			for _, tool := range bodies[0].Tools {
				names = append(names, tool.Function.Name)
				if tool.Function.Parameters["type"] != "object" {
					t.Errorf("tool %s parameters %v", tool.Function.Name, tool.Function.Parameters)
				}
			}
			if !strings.Contains(strings.Join(names, ","), tc.skill) {
				t.Errorf("tools %v do not offer %s", names, tc.skill)
			}
		})
	}
}

func TestAgentSeed002Once(t *testing.T) {
	llm := newFakeLLM(t,
		callsTool("write_file", writeArgs), answers("one"),
		callsTool("write_file", writeArgs), answers("two"),
		callsTool("write_file", writeArgs), answers("three"),
	)
	s := newStack(t, stackOpts{writeApproval: "once", server: withLLM(t, llm)})
	c := s.dial(t)
	conv := c.sendText("", "write it")
	frames, done := c.turn(conv, yes)
	if n := len(ofType(frames, "approval_request")); n != 1 || done.str("reason") != "final" {
		t.Fatalf("first call: %d approval requests, done %v", n, done)
	}
	// Second call in the same conversation: not asked.
	c.sendText(conv, "again")
	frames, done = c.turn(conv, nil)
	if n := len(ofType(frames, "approval_request")); n != 0 || done.str("reason") != "final" {
		t.Fatalf("second call: %d approval requests, done %v", n, done)
	}
	wantOK(t, ofType(frames, "tool_result")[0])
	// A new conversation asks again.
	conv2 := c.sendText("", "write it elsewhere")
	frames, _ = c.turn(conv2, yes)
	if n := len(ofType(frames, "approval_request")); n != 1 {
		t.Fatalf("new conversation: %d approval requests, want 1", n)
	}
	// The second turn's model request held the whole first turn.
	bodies := llm.requests()
	if bodies[2].toolResults() != 1 || bodies[3].toolResults() != 2 {
		t.Errorf("tool results in the second turn's requests: %d then %d, want 1 then 2", bodies[2].toolResults(), bodies[3].toolResults())
	}
}

func TestAgentNoProvider(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	c.send(map[string]any{"type": "send", "text": "hello"})
	e := c.expect("error")
	if e.str("kind") != "config" || !strings.Contains(e.str("detail"), "[provider]") {
		t.Fatalf("error frame %v, want kind config naming [provider]", e)
	}
	// invoke still works.
	_, tc := c.invokeNew("read_file", readArgs)
	wantOK(t, expectResult(t, c, tc))
	// The HTTP route says the same.
	status, body := s.request(t, http.MethodPost, "/api/conversations", map[string]any{}, nil)
	if status != http.StatusCreated {
		t.Fatalf("POST /api/conversations: %d %s", status, body)
	}
	var created struct {
		ID string `json:"conversation_id"`
	}
	_ = json.Unmarshal(body, &created)
	status, body = s.request(t, http.MethodPost, "/api/chat/"+created.ID+"/messages", map[string]any{"text": "hi"}, nil)
	if kind, _ := apiError(t, body); status != http.StatusServiceUnavailable || kind != "config" {
		t.Errorf("POST messages without a provider: %d %s", status, body)
	}
}

func TestAgentUpstreamFailureEndsTheTurn(t *testing.T) {
	llm := newFakeLLM(t, failsWith(500), failsWith(500), failsWith(502), answers("I am back."))
	s := newStack(t, stackOpts{server: withLLM(t, llm)})
	c := s.dial(t)
	conv := c.sendText("", "hello")
	frames, done := c.turn(conv, nil)
	if done.str("reason") != "error" {
		t.Fatalf("done %v, want reason error", done)
	}
	errsF := ofType(frames, "error")
	if len(errsF) != 1 || errsF[0].str("kind") != "unavailable" || !strings.Contains(errsF[0].str("detail"), "HTTP 502") || !strings.Contains(errsF[0].str("detail"), "the GPU caught fire") {
		t.Fatalf("error frames %v", errsF)
	}
	if frames[len(frames)-2].typ() != "error" {
		t.Errorf("error frame is not right before done: %v", frames)
	}
	// The conversation stays usable.
	c.sendText(conv, "hello again")
	frames, done = c.turn(conv, nil)
	if done.str("reason") != "final" || ofType(frames, "message")[0].str("text") != "I am back." {
		t.Fatalf("after the failure: %v", frames)
	}
	// Both user messages reach the model, in order.
	var users []string
	for _, m := range llm.requests()[3].Messages {
		if m.Role == "user" {
			users = append(users, fmt.Sprint(m.Content))
		}
	}
	if strings.Join(users, "|") != "hello|hello again" {
		t.Errorf("user messages to the model: %q", users)
	}
}

// TestAgentAnswerOverTheCap: the client sees the answer up to the cap,
// then an error frame of kind too_large; the conversation keeps the part
// shown, marked as cut, and goes on.
func TestAgentAnswerOverTheCap(t *testing.T) {
	a600, b600 := strings.Repeat("a", 600), strings.Repeat("b", 600)
	llm := newFakeLLM(t, answers(a600, b600), answers("Shorter."))
	s := newStack(t, stackOpts{server: withLLM(t, llm, func(o *openai.Options) { o.MaxAnswerBytes = 1024 })})
	c := s.dial(t)
	conv := c.sendText("", "write a lot")
	frames, done := c.turn(conv, nil)
	if done.str("reason") != "error" {
		t.Fatalf("done %v, want reason error", done)
	}
	var shown strings.Builder
	for _, d := range ofType(frames, "delta") {
		shown.WriteString(d.str("text"))
	}
	if msgs := ofType(frames, "message"); shown.String() != a600 || len(msgs) != 1 || msgs[0].str("text") != a600 {
		t.Errorf("shown %d bytes, messages %.100v", shown.Len(), msgs)
	}
	errsF := ofType(frames, "error")
	if len(errsF) != 1 || errsF[0].str("kind") != "too_large" || !strings.Contains(errsF[0].str("detail"), "[provider] max_answer_bytes (1 KiB)") || errsF[0].str("conversation_id") != conv {
		t.Fatalf("error frames %v", errsF)
	}
	status, body := s.request(t, http.MethodGet, "/api/conversations/"+conv, nil, nil)
	var got struct {
		Messages []struct {
			Role  string `json:"role"`
			Text  string `json:"text"`
			Error *struct {
				Kind string `json:"kind"`
			} `json:"error"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil {
		t.Fatalf("GET the conversation: %d %v", status, err)
	}
	if m := got.Messages; len(m) != 2 || m[1].Role != "assistant" || m[1].Text != a600 || m[1].Error == nil || m[1].Error.Kind != "too_large" {
		t.Errorf("stored %.300s", body)
	}
	c.sendText(conv, "shorter, please")
	frames, done = c.turn(conv, nil)
	if done.str("reason") != "final" || ofType(frames, "message")[0].str("text") != "Shorter." {
		t.Fatalf("after the cut answer: %v", frames)
	}
}

func TestAgentPostMessage(t *testing.T) {
	llm := newFakeLLM(t, callsTool("read_file", readArgs), answers("It says ", "buy oat milk."))
	s := newStack(t, stackOpts{server: withLLM(t, llm)})
	status, body := s.request(t, http.MethodPost, "/api/conversations", map[string]any{"title": "shopping"}, nil)
	if status != http.StatusCreated {
		t.Fatalf("POST /api/conversations: %d %s", status, body)
	}
	var created struct {
		ID string `json:"conversation_id"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.ID == "" {
		t.Fatalf("created %s: %v", body, err)
	}
	// A subscriber sees the turn's frames while the request waits.
	c := s.dial(t)
	c.send(map[string]any{"type": "subscribe", "conversation_id": created.ID})
	time.Sleep(50 * time.Millisecond)
	status, body = s.request(t, http.MethodPost, "/api/chat/"+created.ID+"/messages", map[string]any{"text": "what does notes.txt say?"}, nil)
	if status != http.StatusOK {
		t.Fatalf("POST messages: %d %s", status, body)
	}
	var resp struct {
		ConversationID string `json:"conversation_id"`
		Text           string `json:"text"`
		Reason         string `json:"reason"`
		ToolCalls      []struct {
			CallID    string          `json:"call_id"`
			Skill     string          `json:"skill"`
			Arguments json.RawMessage `json:"arguments"`
			OK        bool            `json:"ok"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.ConversationID != created.ID || resp.Text != "It says buy oat milk." || resp.Reason != "final" ||
		len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Skill != "read_file" || !resp.ToolCalls[0].OK || !sameJSON(t, resp.ToolCalls[0].Arguments, []byte(readArgs)) {
		t.Fatalf("answer %s", body)
	}
	frames, done := c.turn(created.ID, nil)
	if done.str("reason") != "final" || ofType(frames, "tool_call")[0].str("call_id") != resp.ToolCalls[0].CallID {
		t.Errorf("subscriber frames %v", frames)
	}
	// Bad bodies and unknown conversations.
	for _, tc := range []struct {
		path string
		body any
		code int
	}{
		{"/api/chat/" + created.ID + "/messages", map[string]any{}, http.StatusBadRequest},
		{"/api/chat/" + created.ID + "/messages", map[string]any{"text": ""}, http.StatusBadRequest},
		{"/api/chat/c_nosuch/messages", map[string]any{"text": "hi"}, http.StatusNotFound},
	} {
		if status, body := s.request(t, http.MethodPost, tc.path, tc.body, nil); status != tc.code {
			t.Errorf("POST %s %v: %d %s, want %d", tc.path, tc.body, status, body, tc.code)
		}
	}
}

func TestAgentCancelKeepsTheConversation(t *testing.T) {
	release := make(chan struct{})
	hang := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", llmChunk(`{"role":"assistant","content":"Thinking"}`, ""))
		w.(http.Flusher).Flush()
		<-release
	}
	llm := newFakeLLM(t, hang, answers("ok"))
	t.Cleanup(func() { close(release) })
	s := newStack(t, stackOpts{server: withLLM(t, llm)})
	c := s.dial(t)
	conv := c.sendText("", "think hard")
	if d := c.expect("delta"); d.str("text") != "Thinking" {
		t.Fatalf("delta %v", d)
	}
	c.send(map[string]any{"type": "cancel", "conversation_id": conv})
	frames, done := c.turn(conv, nil)
	if done.str("reason") != "canceled" || len(ofType(frames, "error")) != 0 {
		t.Fatalf("after cancel: %v", frames)
	}
	c.sendText(conv, "never mind")
	if _, done := c.turn(conv, nil); done.str("reason") != "final" {
		t.Fatalf("after cancel, the next turn: %v", done)
	}
	// The cut text was kept in the history the model sees, marked as cut.
	msgs := llm.requests()[1].Messages
	if len(msgs) != 4 || msgs[0].Role != "system" || fmt.Sprint(msgs[2].Content) != "Thinking\n[this answer was cut short (canceled): the turn was canceled before the answer was complete]" || fmt.Sprint(msgs[3].Content) != "never mind" {
		t.Errorf("history after cancel: %+v", msgs)
	}
}

// A client that sends its next message the moment it reads done is never
// told that a turn is still running.
func TestAgentSendRightAfterDone(t *testing.T) {
	const n = 20
	var replies []llmReply
	for i := range n {
		replies = append(replies, answers(fmt.Sprint("answer ", i)))
	}
	llm := newFakeLLM(t, replies...)
	s := newStack(t, stackOpts{server: withLLM(t, llm)})
	c := s.dial(t)
	conv := ""
	for i := range n {
		conv = c.sendText(conv, fmt.Sprint("message ", i))
		frames, done := c.nextTurn(conv)
		if done.str("reason") != "final" || len(ofType(frames, "error")) != 0 {
			t.Fatalf("turn %d: %v", i, frames)
		}
	}
}

// nextTurn collects frames up to done, failing fast on an error frame that
// would leave no done behind.
func (c *client) nextTurn(conv string) (frames []frame, done frame) {
	c.t.Helper()
	for {
		f := c.nextWithin(turnWait)
		frames = append(frames, f)
		switch f.typ() {
		case "error":
			if f.str("kind") != "unavailable" {
				c.t.Fatalf("error frame: %v", f)
			}
		case "done":
			return frames, f
		}
	}
}
