package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
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

// usageChunk is the chunk include_usage asks for: no choices, the usage.
func usageChunk(u string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"llama3.2","choices":[],"usage":` + u + `}`
}

var usage = usageChunk(`{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}`)

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
		usage     agent.Usage
		// made are the calls whose ProviderID buddy made up (the server
		// sent none, or one an earlier call of the answer has).
		made []int
	}{
		{
			name:   "text",
			events: []string{chunk(`{"role":"assistant","content":""}`, ""), text("Hel"), text("lo, "), text("wörld"), finish("stop"), usage},
			deltas: []string{"Hel", "lo, ", "wörld"}, text: "Hello, wörld", stop: "stop",
			usage: agent.Usage{PromptTokens: 12, CompletionTokens: 7, Reported: true},
		},
		{
			name: "arguments split across chunks",
			events: []string{
				toolDelta(0, "call_abc", "read_file", ""),
				toolDelta(0, "", "", `{"pa`), toolDelta(0, "", "", `th": "no`), toolDelta(0, "", "", `tes.txt"}`),
				finish("tool_calls"),
			},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ProviderID: "call_abc", Name: "read_file", Arguments: `{"path": "notes.txt"}`}},
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
			usage:     agent.Usage{PromptTokens: 12, CompletionTokens: 7, Reported: true},
			toolCalls: []agent.ToolCall{{ProviderID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}, {ProviderID: "call_2", Name: "write_file", Arguments: `{"path":"b","content":"x"}`}},
		},
		{
			name: "interleaved parallel calls",
			events: []string{
				toolDelta(0, "call_1", "read_file", ""), toolDelta(1, "call_2", "read_file", ""),
				toolDelta(1, "", "", `{"path":"b"}`), toolDelta(0, "", "", `{"path":"a"}`),
				finish("tool_calls"),
			},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ProviderID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}, {ProviderID: "call_2", Name: "read_file", Arguments: `{"path":"b"}`}},
		},
		{
			name:      "finish_reason stop with tool calls (Ollama)",
			events:    []string{toolDelta(0, "call_x", "read_file", `{"path":"a"}`), finish("stop")},
			stop:      "stop",
			toolCalls: []agent.ToolCall{{ProviderID: "call_x", Name: "read_file", Arguments: `{"path":"a"}`}},
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
			toolCalls: []agent.ToolCall{{ProviderID: "call_0", Name: "read_file", Arguments: `{"path":"a"}`}, {ProviderID: "call_1", Name: "write_file", Arguments: `{"path":"b","content":"c"}`}},
		},
		{
			name: "llama.cpp: every call at index 0, ids reused",
			events: []string{
				toolDelta(0, "call_0", "read_file", `{"path":`), toolDelta(0, "", "", `"a"}`),
				toolDelta(0, "call_1", "read_file", `{"path":`), toolDelta(0, "", "", `"b"}`),
				finish("tool_calls"),
			},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ProviderID: "call_0", Name: "read_file", Arguments: `{"path":"a"}`}, {ProviderID: "call_1", Name: "read_file", Arguments: `{"path":"b"}`}},
		},
		{
			name:      "id repeated on every chunk",
			events:    []string{toolDelta(0, "call_0", "read_file", `{"path":`), toolDelta(0, "call_0", "", `"a"}`), finish("tool_calls")},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ProviderID: "call_0", Name: "read_file", Arguments: `{"path":"a"}`}},
		},
		{
			name:   "usage with cached tokens",
			events: []string{text("ok"), finish("stop"), usageChunk(`{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0}}`)},
			deltas: []string{"ok"}, text: "ok", stop: "stop",
			usage: agent.Usage{PromptTokens: 2006, CompletionTokens: 300, CachedTokens: 1920, Reported: true},
		},
		{
			name: "usage beside the finish_reason (llama.cpp)",
			events: []string{text("ok"), `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1758108431,"id":"chatcmpl-C","model":"gemma","object":"chat.completion.chunk",` +
				`"usage":{"completion_tokens":31,"prompt_tokens":75,"total_tokens":106,"prompt_tokens_details":{"cached_tokens":64}},"timings":{"cache_n":64,"prompt_n":11}}`},
			deltas: []string{"ok"}, text: "ok", stop: "stop",
			usage: agent.Usage{PromptTokens: 75, CompletionTokens: 31, CachedTokens: 64, Reported: true},
		},
		{
			name: "null usage on every chunk, then none: not reported",
			events: []string{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`},
			deltas: []string{"ok"}, text: "ok", stop: "stop",
		},
		{
			name:      "a Mistral-style nine-character id is kept as it is",
			events:    []string{toolDelta(0, "D681PevKs", "read_file", `{"path":"a"}`), finish("tool_calls")},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{ProviderID: "D681PevKs", Name: "read_file", Arguments: `{"path":"a"}`}},
		},
		{
			name:      "a call without an id gets one",
			events:    []string{toolDelta(0, "", "read_file", `{"path":"a"}`), finish("tool_calls")},
			stop:      "tool_calls",
			toolCalls: []agent.ToolCall{{Name: "read_file", Arguments: `{"path":"a"}`}},
			made:      []int{0},
		},
		{
			name: "two calls of one answer with the same id: the later one gets its own",
			events: []string{
				toolDelta(0, "call_0", "read_file", `{"path":"a"}`), toolDelta(1, "call_0", "read_file", `{"path":"b"}`),
				toolDelta(2, "call_0", "now", `{}`), finish("tool_calls"),
			},
			stop: "tool_calls",
			toolCalls: []agent.ToolCall{{ProviderID: "call_0", Name: "read_file", Arguments: `{"path":"a"}`},
				{Name: "read_file", Arguments: `{"path":"b"}`}, {Name: "now", Arguments: `{}`}},
			made: []int{1, 2},
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
			llmtest.CheckMadeIDs(t, resp.ToolCalls, tc.made)
			if fmt.Sprintf("%+v", resp.ToolCalls) != fmt.Sprintf("%+v", tc.toolCalls) {
				t.Errorf("tool calls\n%+v\nwant\n%+v", resp.ToolCalls, tc.toolCalls)
			}
			if resp.Usage != tc.usage {
				t.Errorf("usage %+v, want %+v", resp.Usage, tc.usage)
			}
			if !bytes.Contains(f.Body(0), []byte(`"stream_options":{"include_usage":true}`)) {
				t.Errorf("usage not asked for: %s", f.Body(0))
			}
		})
	}
}

// fullRequest has every part a request body can have: call_1 with the id
// the server gave it (sent back for the call and its result), call_2 and
// call_3 as rows stored before provider ids were kept (sent as they are).
func fullRequest() agent.Request {
	return agent.Request{
		System: "You are buddy.",
		Messages: []agent.Message{
			{Role: agent.RoleUser, Text: "Copy notes.txt to out.txt"},
			{Role: agent.RoleAssistant, Text: "Reading it first.", ToolCalls: []agent.ToolCall{{ID: "call_1", ProviderID: "D681PevKs", Name: "read_file", Arguments: `{"path":"notes.txt"}`}}},
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

// TestToolCallIDsRoundTrip: the id a server gives a call (Mistral's nine
// characters, which vLLM checks) goes back exactly, for the call and its
// result, while buddy's own id stays the agent loop's.
func TestToolCallIDsRoundTrip(t *testing.T) {
	f := llmtest.NewFake(t, "/v1/chat/completions",
		sse(toolDelta(0, "D681PevKs", "read_file", `{"path":"a"}`), finish("tool_calls")),
		sse(text("Done."), finish("stop")))
	p := provider(t, f)
	resp, err := p.Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "read a"}}}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	call := resp.ToolCalls[0]
	if call.ProviderID != "D681PevKs" || call.ID != "" {
		t.Fatalf("call %+v", call)
	}
	call.ID = "c_buddy1" // the agent loop's own id
	history := []agent.Message{
		{Role: agent.RoleUser, Text: "read a"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}},
		{Role: agent.RoleTool, ToolCallID: "c_buddy1", ToolName: "read_file", Content: "A"},
	}
	if _, err := p.Stream(t.Context(), agent.Request{Messages: history}, func(string) {}); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Messages []struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(f.Body(1), &sent); err != nil {
		t.Fatal(err)
	}
	if got := sent.Messages[1].ToolCalls[0].ID + " " + sent.Messages[2].ToolCallID; got != "D681PevKs D681PevKs" {
		t.Errorf("sent back call and result ids %q, want the server's own", got)
	}
}

// TestUsageOptionRefused: a server that refuses stream_options (Mistral's
// API answers 422 extra_forbidden) is asked again without it, once, and
// never again by the same provider.
func TestUsageOptionRefused(t *testing.T) {
	mistral := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(422)
		fmt.Fprint(w, `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","stream_options","include_usage"],"msg":"Extra inputs are not permitted","input":true}]},"type":"invalid_request_error","param":null,"code":null}`)
	}
	f := llmtest.NewFake(t, "/v1/chat/completions", mistral,
		sse(text("Hi."), finish("stop"), usage), sse(text("Again."), finish("stop")))
	p := provider(t, f)
	for i, want := range []string{"Hi.", "Again."} {
		resp, err := p.Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(string) {})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if resp.Text != want {
			t.Errorf("call %d: %q", i, resp.Text)
		}
	}
	for i, asked := range []bool{true, false, false} {
		if got := bytes.Contains(f.Body(i), []byte("stream_options")); got != asked {
			t.Errorf("request %d: stream_options sent %v, want %v", i, got, asked)
		}
	}
}

// TestUsageOptionNotRetriedForOtherRefusals: a 400 about anything else is
// not sent again.
func TestUsageOptionNotRetriedForOtherRefusals(t *testing.T) {
	f := llmtest.NewFake(t, "/v1/chat/completions", status(400, nil, "tools are not supported by this model"))
	_, err := provider(t, f).Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(string) {})
	if err == nil || f.Requests() != 1 {
		t.Fatalf("error %v after %d requests", err, f.Requests())
	}
}

// raw answers with status and body as they are.
func raw(code int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}
}

// TestContextExceeded: each server's "the request does not fit the window",
// in its own wire format, is an error wrapping agent.ErrContextExceeded of
// kind too_large that says what the server said, and is not sent again; its
// neighbours are not.
func TestContextExceeded(t *testing.T) {
	const llamaCpp = `{"error":{"code":400,"message":"request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4390,"n_ctx":4096}}`
	nested, _ := json.Marshal(map[string]string{"error": llamaCpp})
	fast := map[string]string{"Retry-After-Ms": "5"}
	for _, tc := range []struct {
		name     string
		handlers []http.HandlerFunc
		match    bool
		says     string
		window   int
	}{
		{name: "llama.cpp", handlers: []http.HandlerFunc{raw(400, "application/json; charset=utf-8", llamaCpp)},
			match: true, says: "HTTP 400: request (4390 tokens) exceeds the available context size (4096 tokens)", window: 4096},
		{name: "llama.cpp, an answer that runs out of room, 500 (not retried)",
			handlers: []http.HandlerFunc{raw(500, "application/json", `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`)},
			match:    true, says: "Context size has been exceeded"},
		{name: "llama.cpp, an error event after 200", handlers: []http.HandlerFunc{sse(text("Hel"),
			`{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`)},
			match: true, says: "the server said: Context size has been exceeded"},
		{name: "OpenAI", handlers: []http.HandlerFunc{raw(400, "application/json",
			`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130511 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)},
			match: true, says: "maximum context length is 128000 tokens", window: 128000},
		{name: "vLLM", handlers: []http.HandlerFunc{raw(400, "application/json",
			`{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 0 output tokens and your prompt contains at least 4097 input tokens, for a total of at least 4097 tokens.","type":"BadRequestError","param":"input_tokens","code":400}}`)},
			match: true, says: "your prompt contains at least 4097 input tokens", window: 4096},
		{name: "vLLM before 0.10", handlers: []http.HandlerFunc{raw(400, "application/json",
			`{"object":"error","message":"This model's maximum context length is 6048 tokens. However, you requested 6616 tokens (568 in the messages, 6048 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`)},
			match: true, says: "you requested 6616 tokens", window: 6048},
		{name: "Ollama, llama-server's body as its message", handlers: []http.HandlerFunc{raw(400, "application/json", string(nested))},
			match: true, says: "exceeds the available context size", window: 4096},
		{name: "LM Studio, an error event after 200", handlers: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: error\ndata: {\"error\":{\"message\":\"Input does not fit in context length. The input has 31430 tokens, but the context length only supports 30000 tokens.\"},\"message\":\"Input does not fit in context length. The input has 31430 tokens, but the context length only supports 30000 tokens.\"}\n\n")
		}}, match: true, says: "Input does not fit in context length", window: 30000},
		{name: "LM Studio 0.3", handlers: []http.HandlerFunc{raw(400, "application/json",
			`{"error":"Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}`)},
			match: true, says: "Trying to keep the first 15857 tokens", window: 4096},
		// Neighbours.
		{name: "another 400", handlers: []http.HandlerFunc{raw(400, "application/json",
			`{"error":{"code":400,"message":"Multimodal data provided, but model does not support multimodal requests.","type":"invalid_request_error"}}`)},
			says: "HTTP 400: the request was refused: invalid_request_error: Multimodal data provided"},
		{name: "a proxy's 413", handlers: []http.HandlerFunc{raw(413, "text/html",
			"<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>")},
			says: "HTTP 413: the request was refused: <html>"},
		{name: "a 500 about something else is retried", handlers: []http.HandlerFunc{raw(500, "application/json", `{"error":"model runner crashed"}`),
			status(500, fast, "boom"), status(503, fast, "boom")},
			says: "HTTP 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/chat/completions", tc.handlers...)
			_, err := provider(t, f).Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(string) {})
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, agent.ErrContextExceeded); got != tc.match {
				t.Fatalf("errors.Is(%q, ErrContextExceeded) = %v", err, got)
			}
			kind := errs.KindUnavailable
			if tc.match {
				kind = errs.KindTooLarge
			}
			if k := errs.KindOf(err); k != kind {
				t.Errorf("kind %s, want %s", k, kind)
			}
			if !strings.HasPrefix(err.Error(), "the OpenAI-compatible endpoint: ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if f.Requests() != len(tc.handlers) {
				t.Errorf("%d requests, want %d", f.Requests(), len(tc.handlers))
			}
			var ce *llm.ContextExceededError
			if errors.As(err, &ce) && ce.WindowTokens != tc.window {
				t.Errorf("window %d, want %d", ce.WindowTokens, tc.window)
			}
		})
	}
}
