package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/errs"
	"github.com/buddy-run/buddy/internal/llm"
	"github.com/buddy-run/buddy/internal/llm/llmtest"
	"github.com/buddy-run/buddy/internal/llm/openai"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func provider(t *testing.T, f *llmtest.Fake, mod ...func(*openai.Options)) *openai.Provider {
	t.Helper()
	o := openai.Options{BaseURL: f.URL() + "/v1", Model: "llama3.2"}
	for _, m := range mod {
		m(&o)
	}
	p, err := openai.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// chunk is one chat.completion.chunk with one choice.
func chunk(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"llama3.2","system_fingerprint":"fp_1","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`, delta, fr)
}

func text(s string) string { return chunk(fmt.Sprintf(`{"role":"assistant","content":%q}`, s), "") }

// toolDelta is a delta with one tool call piece.
func toolDelta(index int, id, name, args string) string {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
	}
	if name != "" {
		tc["function"].(map[string]any)["name"] = name
	}
	b, _ := json.Marshal(map[string]any{"tool_calls": []any{tc}})
	return chunk(string(b), "")
}

func finish(reason string) string { return chunk(`{}`, reason) }

const usage = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"llama3.2","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`

// sse answers with the events as data lines, flushed one by one, then
// [DONE].
func sse(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func TestStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		events    []string
		deltas    []string
		text      string
		stop      string
		toolCalls []agent.ToolCall
	}{
		{
			name:   "text",
			events: []string{chunk(`{"role":"assistant","content":""}`, ""), text("Hel"), text("lo, "), text("wörld"), finish("stop"), usage},
			deltas: []string{"Hel", "lo, ", "wörld"}, text: "Hello, wörld", stop: "stop",
		},
		{
			name: "arguments split across chunks",
			events: []string{
				toolDelta(0, "call_abc", "read_file", ""),
				toolDelta(0, "", "", `{"pa`), toolDelta(0, "", "", `th": "no`), toolDelta(0, "", "", `tes.txt"}`),
				finish("tool_calls"),
			},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ID: "call_abc", Name: "read_file", Arguments: `{"path": "notes.txt"}`}},
		},
		{
			name: "text then two parallel calls, usage chunk",
			events: []string{
				text("Reading both."),
				toolDelta(0, "call_1", "read_file", `{"path":`), toolDelta(0, "", "", `"a"}`),
				toolDelta(1, "call_2", "write_file", `{"path":"b",`), toolDelta(1, "", "", `"content":"x"}`),
				finish("tool_calls"), usage,
			},
			deltas: []string{"Reading both."}, text: "Reading both.", stop: "tool_calls",
			toolCalls: []agent.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}, {ID: "call_2", Name: "write_file", Arguments: `{"path":"b","content":"x"}`}},
		},
		{
			name: "interleaved parallel calls",
			events: []string{
				toolDelta(0, "call_1", "read_file", ""), toolDelta(1, "call_2", "read_file", ""),
				toolDelta(1, "", "", `{"path":"b"}`), toolDelta(0, "", "", `{"path":"a"}`),
				finish("tool_calls"),
			},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}, {ID: "call_2", Name: "read_file", Arguments: `{"path":"b"}`}},
		},
		{
			name:      "finish_reason stop with tool calls (Ollama)",
			events:    []string{toolDelta(0, "call_x", "read_file", `{"path":"a"}`), finish("stop")},
			stop:      "stop",
			toolCalls: []agent.ToolCall{{ID: "call_x", Name: "read_file", Arguments: `{"path":"a"}`}},
		},
		{
			name:   "finish_reason length",
			events: []string{text("This answer is cut"), finish("length")},
			deltas: []string{"This answer is cut"}, text: "This answer is cut", stop: "length",
		},
		{
			name: "whole call in one chunk, with finish_reason (not streamed)",
			events: []string{chunk(`{"role":"assistant","content":null,"tool_calls":[`+
				`{"index":0,"id":"call_0","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},`+
				`{"index":1,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"b\",\"content\":\"c\"}"}}]}`, "tool_calls")},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ID: "call_0", Name: "read_file", Arguments: `{"path":"a"}`}, {ID: "call_1", Name: "write_file", Arguments: `{"path":"b","content":"c"}`}},
		},
		{
			name: "llama.cpp: every call at index 0, ids reused",
			events: []string{
				toolDelta(0, "call_0", "read_file", `{"path":`), toolDelta(0, "", "", `"a"}`),
				toolDelta(0, "call_1", "read_file", `{"path":`), toolDelta(0, "", "", `"b"}`),
				finish("tool_calls"),
			},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ID: "call_0", Name: "read_file", Arguments: `{"path":"a"}`}, {ID: "call_1", Name: "read_file", Arguments: `{"path":"b"}`}},
		},
		{
			name:      "id repeated on every chunk",
			events:    []string{toolDelta(0, "call_0", "read_file", `{"path":`), toolDelta(0, "call_0", "", `"a"}`), finish("tool_calls")},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ID: "call_0", Name: "read_file", Arguments: `{"path":"a"}`}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/chat/completions", sse(tc.events...))
			var deltas []string
			resp, err := provider(t, f).Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(d string) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(deltas) != fmt.Sprint(tc.deltas) || resp.Text != tc.text || resp.StopReason != tc.stop {
				t.Errorf("deltas %q text %q stop %q; want %q %q %q", deltas, resp.Text, resp.StopReason, tc.deltas, tc.text, tc.stop)
			}
			if fmt.Sprintf("%+v", resp.ToolCalls) != fmt.Sprintf("%+v", tc.toolCalls) {
				t.Errorf("tool calls\n%+v\nwant\n%+v", resp.ToolCalls, tc.toolCalls)
			}
		})
	}
}

// fullRequest has every part a request body can have.
func fullRequest() agent.Request {
	return agent.Request{
		System: "You are buddy.",
		Messages: []agent.Message{
			{Role: agent.RoleUser, Text: "Copy notes.txt to out.txt"},
			{Role: agent.RoleAssistant, Text: "Reading it first.", ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"notes.txt"}`}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", ToolName: "read_file", Content: `{"content":"buy oat milk\n"}`},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{
				{ID: "call_2", Name: "write_file", Arguments: `{"path":"out.txt","content":"buy oat milk\n"}`},
				{ID: "call_3", Name: "read_file", Arguments: ``},
			}},
			{Role: agent.RoleTool, ToolCallID: "call_2", ToolName: "write_file", Content: "User denied execution of write_file", IsError: true},
			{Role: agent.RoleTool, ToolCallID: "call_3", ToolName: "read_file", Content: "Error (invalid_input): missing property path", IsError: true},
			{Role: agent.RoleAssistant, Text: "You denied the write."},
			{Role: agent.RoleUser, Text: "ok, try again"},
		},
		Tools: []agent.Tool{
			{Name: "read_file", Description: "Read a text file.", InputSchema: map[string]any{
				"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string", "description": "relative path"}},
				"required": []any{"path"}, "additionalProperties": false,
			}},
			{Name: "now", Description: "The time."},
		},
	}
}

func TestRequestBodyGolden(t *testing.T) {
	temp := 0.2
	f := llmtest.NewFake(t, "/v1/chat/completions", sse(text("ok"), finish("stop")), sse(text("ok"), finish("stop")))
	p := provider(t, f, func(o *openai.Options) { o.Temperature, o.MaxTokens, o.APIKey = &temp, 512, "sk-test-secret" })
	if _, err := p.Stream(t.Context(), fullRequest(), func(string) {}); err != nil {
		t.Fatal(err)
	}
	llmtest.Golden(t, "request_full.golden", f.Body(0), *update)
	if got := f.Header(0).Get("Authorization"); got != "Bearer sk-test-secret" {
		t.Errorf("Authorization %q", got)
	}
	// Without temperature, max_tokens or a key: none is sent.
	p = provider(t, f)
	if _, err := p.Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(string) {}); err != nil {
		t.Fatal(err)
	}
	llmtest.Golden(t, "request_minimal.golden", f.Body(1), *update)
}

// status answers with an HTTP error in the OpenAI error shape.
func status(code int, hdr map[string]string, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"error","param":null,"code":null}}`, msg)
	}
}

// cut streams one text chunk then breaks the connection.
func cut(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "data: %s\n\n", text("Hel"))
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestFailures(t *testing.T) {
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	fast := map[string]string{"Retry-After-Ms": "5"}
	for _, tc := range []struct {
		name     string
		handlers []http.HandlerFunc
		baseURL  string
		timeout  time.Duration
		want     []string // in the error text
		requests int      // requests the server sees (retries included)
		deltas   string
	}{
		{name: "connection refused", baseURL: "http://" + refused + "/v1", want: []string{"connection refused", "base_url"}},
		{name: "401", handlers: []http.HandlerFunc{status(401, nil, "Incorrect API key provided")}, want: []string{"HTTP 401", "api_key_env", "Incorrect API key"}, requests: 1},
		{name: "429 retried then fails", handlers: []http.HandlerFunc{status(429, fast, "slow down"), status(429, fast, "slow down"), status(429, fast, "slow down")}, want: []string{"HTTP 429", "rate limited", "slow down"}, requests: 3},
		{name: "500 retried then fails", handlers: []http.HandlerFunc{status(500, fast, "boom"), status(500, fast, "boom"), status(503, fast, "boom")}, want: []string{"HTTP 503", "server failed", "boom"}, requests: 3},
		{name: "404 model", handlers: []http.HandlerFunc{status(404, nil, "model 'llama9' not found")}, want: []string{"HTTP 404", "model", "llama9"}, requests: 1},
		{name: "stream cut midway", handlers: []http.HandlerFunc{cut}, want: []string{"broke off"}, requests: 1, deltas: "Hel"},
		{name: "stream ends early without [DONE]", handlers: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", text("Hel"))
		}}, want: []string{"ended before the answer was complete"}, requests: 1, deltas: "Hel"},
		{name: "malformed JSON in a chunk", handlers: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\ndata: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"lo\"}\n\n", text("Hel"))
		}}, want: []string{"not valid JSON"}, requests: 1, deltas: "Hel"},
		{name: "error event in the stream", handlers: []http.HandlerFunc{sse(text("Hel"), `{"error":{"message":"the model crashed","type":"server_error"}}`)}, want: []string{"the model crashed"}, requests: 1, deltas: "Hel"},
		{name: "timeout", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", text("Hel"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}}, want: []string{"[provider] timeout"}, requests: 1, deltas: "Hel"},
		{name: "a stream that sends nothing", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}}, want: []string{"[provider] timeout"}, requests: 1},
		{name: "no answer at all", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}}, want: []string{"[provider] timeout"}, requests: 1},
		{name: "keep-alives and nothing else", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for r.Context().Err() == nil { // an empty event, again and again
				fmt.Fprint(w, ": keep-alive\n\n")
				w.(http.Flusher).Flush()
			}
		}}, want: []string{"[provider] timeout"}, requests: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/chat/completions", tc.handlers...)
			p := provider(t, f, func(o *openai.Options) {
				o.Timeout = tc.timeout
				if tc.baseURL != "" {
					o.BaseURL = tc.baseURL
				}
			})
			var deltas strings.Builder
			start := time.Now()
			resp, err := p.Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(d string) { deltas.WriteString(d) })
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			if k := errs.KindOf(err); k != errs.KindUnavailable {
				t.Errorf("kind %s, want unavailable: %v", k, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "the OpenAI-compatible endpoint: ") {
				t.Errorf("error %q does not name the endpoint", err)
			}
			if n := f.Requests(); tc.baseURL == "" && n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if deltas.String() != tc.deltas {
				t.Errorf("deltas %q, want %q", deltas.String(), tc.deltas)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

func TestRetryAfterIsHonouredThenSucceeds(t *testing.T) {
	f := llmtest.NewFake(t, "/v1/chat/completions", status(429, map[string]string{"Retry-After": "1"}, "slow down"), sse(text("ok"), finish("stop")))
	resp, err := provider(t, f).Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "ok" || f.Requests() != 2 {
		t.Fatalf("text %q after %d requests", resp.Text, f.Requests())
	}
	if gap := f.Time(1).Sub(f.Time(0)); gap < 900*time.Millisecond {
		t.Errorf("retried after %s, before Retry-After: 1", gap)
	}
	// The retry sends the same body.
	if !bytes.Equal(f.Body(0), f.Body(1)) {
		t.Errorf("retry body differs:\n%s\n%s", f.Body(0), f.Body(1))
	}
}

func TestCanceledIsNotUnavailable(t *testing.T) {
	started := make(chan struct{})
	f := llmtest.NewFake(t, "/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", text("Hel"))
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	_, err := provider(t, f).Stream(ctx, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(string) {})
	if errs.KindOf(err) != errs.KindCanceled {
		t.Fatalf("error %v (kind %s), want canceled", err, errs.KindOf(err))
	}
}

func TestNewNeedsBaseURLAndModel(t *testing.T) {
	for _, o := range []openai.Options{{Model: "m"}, {BaseURL: "http://127.0.0.1:1/v1"}} {
		if _, err := openai.New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestCaps: an answer over a cap ends the turn with too_large, saying what
// was too big; what the client saw of it is kept, marked as cut; none of its
// tool calls is made; and the next message of the conversation works.
func TestCaps(t *testing.T) {
	const max = 1024
	a600, b600 := strings.Repeat("a", 600), strings.Repeat("b", 600)
	var tiny []string
	for range 2 * max {
		tiny = append(tiny, text("x"))
	}
	reasoning := func(s string) string { return chunk(fmt.Sprintf(`{"reasoning_content":%q}`, s), "") }
	for _, tc := range []struct {
		name   string
		reply  http.HandlerFunc
		what   string   // the cap broken ("": none)
		says   []string // in the error
		deltas string   // what the client was shown, kept as cut
	}{
		{name: "text at the cap", reply: sse(text(strings.Repeat("a", 512)), text(strings.Repeat("b", 512)), finish("stop")),
			deltas: strings.Repeat("a", 512) + strings.Repeat("b", 512)},
		{name: "text over the cap", reply: sse(text(a600), text(b600), finish("stop")),
			what: llm.TooLargeAnswer, says: []string{"answer is over [provider] max_answer_bytes (1 KiB)", "raise max_answer_bytes"}, deltas: a600},
		{name: "many tiny chunks", reply: sse(append(tiny, finish("stop"))...),
			what: llm.TooLargeAnswer, deltas: strings.Repeat("x", max)},
		{name: "arguments over the cap", reply: sse(text("Writing."), toolDelta(0, "call_1", "write_file", `{"content":"`),
			toolDelta(0, "", "", a600), toolDelta(0, "", "", b600), toolDelta(0, "", "", `"}`), finish("tool_calls")),
			what: llm.TooLargeArguments, says: []string{"call of write_file", "no call of that answer was made"}, deltas: "Writing."},
		{name: "arguments in one chunk", reply: sse(toolDelta(0, "call_1", "write_file", a600+b600), finish("tool_calls")),
			what: llm.TooLargeArguments},
		{name: "too many tool calls", reply: sse(toolDelta(0, "call_1", "read_file", `{}`), toolDelta(1, "call_2", "read_file", `{}`),
			toolDelta(2, "call_3", "read_file", `{}`), toolDelta(3, "call_4", "read_file", `{}`), finish("tool_calls")),
			what: llm.TooLargeToolCalls, says: []string{"more than [provider] max_tool_calls (3)", "none was made"}},
		{name: "too many tool calls, all at index 0", reply: sse(toolDelta(0, "call_1", "read_file", `{}`), toolDelta(0, "call_2", "read_file", `{}`),
			toolDelta(0, "call_3", "read_file", `{}`), toolDelta(0, "call_4", "read_file", `{}`), finish("tool_calls")),
			what: llm.TooLargeToolCalls},
		{name: "reasoning over the cap", reply: sse(reasoning(a600), reasoning(b600), text("Hi."), finish("stop")),
			what: llm.TooLargeReasoning, says: []string{"reasoning is over [provider] max_answer_bytes"}},
		{name: "one event over the cap", reply: sse(text(strings.Repeat("c", 70<<10)), finish("stop")),
			what: llm.TooLargeEvent, says: []string{"over 68 KiB"}},
		{name: "an event that never ends", reply: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for range 10_000 { // data lines and no empty line: one event, growing
				fmt.Fprintf(w, "data: %s\n", text("x"))
			}
		}, what: llm.TooLargeEvent},
		{name: "error body over the cap", reply: status(400, nil, strings.Repeat("e", 100<<10)),
			what: llm.TooLargeErrorBody, says: []string{"HTTP 400", "over 64 KiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/chat/completions", tc.reply, sse(text("Fine."), finish("stop")))
			c := llmtest.NewChat(t, provider(t, f, func(o *openai.Options) { o.MaxAnswerBytes, o.MaxToolCalls = max, 3 }))
			out, deltas := c.Turn("first")
			llmtest.CheckCapped(t, out, tc.what, tc.says)
			if deltas != tc.deltas {
				t.Errorf("the client was shown %d bytes (%.20q…), want %d", len(deltas), deltas, len(tc.deltas))
			}
			// The conversation goes on.
			if out, _ := c.Turn("second"); out.Reason != agent.ReasonFinal || out.Text != "Fine." {
				t.Fatalf("the next turn: %+v", out)
			}
			llmtest.CheckRows(t, c.Messages(), tc.what, tc.deltas)
			// The model sees what the client saw, marked as cut, and no
			// call of the cut answer.
			var sent struct {
				Messages []struct {
					Role      string `json:"role"`
					Content   string `json:"content"`
					ToolCalls []any  `json:"tool_calls"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(f.Body(1), &sent); err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, m := range sent.Messages {
				roles = append(roles, m.Role)
				if len(m.ToolCalls) > 0 || m.Role == "tool" {
					t.Errorf("the model was sent a call of the cut answer: %+v", m)
				}
			}
			want := []string{"system", "user", "user"}
			if tc.deltas != "" {
				want = []string{"system", "user", "assistant", "user"}
				if a := sent.Messages[2].Content; !strings.HasPrefix(a, tc.deltas) || (tc.what != "") != strings.Contains(a, "[this answer was cut short (too_large)") {
					t.Errorf("the model was sent the answer %.80q…", a)
				}
			}
			if fmt.Sprint(roles) != fmt.Sprint(want) {
				t.Errorf("the model was sent %v, want %v", roles, want)
			}
		})
	}
}
