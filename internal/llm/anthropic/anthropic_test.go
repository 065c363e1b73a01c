package anthropic_test

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
	"github.com/buddy-run/buddy/internal/llm/anthropic"
	"github.com/buddy-run/buddy/internal/llm/llmtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func provider(t *testing.T, f *llmtest.Fake, mod ...func(*anthropic.Options)) *anthropic.Provider {
	t.Helper()
	o := anthropic.Options{BaseURL: f.URL(), Model: "claude-test", APIKey: "sk-ant-test"}
	for _, m := range mod {
		m(&o)
	}
	p, err := anthropic.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ev is one SSE event: its name and its data.
type ev struct{ name, data string }

const messageStart = `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`

func start() ev { return ev{"message_start", messageStart} }
func ping() ev  { return ev{"ping", `{"type": "ping"}`} }
func textStart(i int) ev {
	return ev{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i)}
}
func textDelta(i int, s string) ev {
	b, _ := json.Marshal(s)
	return ev{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, b)}
}
func toolStart(i int, id, name string) ev {
	return ev{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i, id, name)}
}
func jsonDelta(i int, s string) ev {
	b, _ := json.Marshal(s)
	return ev{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, b)}
}
func blockStop(i int) ev {
	return ev{"content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)}
}
func messageDelta(reason string) ev {
	return ev{"message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":89}}`, reason)}
}
func stop() ev { return ev{"message_stop", `{"type":"message_stop"}`} }

// sse answers with the events, flushed one by one.
func sse(events ...ev) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, e.data)
			w.(http.Flusher).Flush()
		}
	}
}

func TestStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		events    []ev
		deltas    []string
		text      string
		stop      string
		toolCalls []agent.ToolCall
		usage     *agent.Usage // nil: the default events' 25 in, 89 out
		made      []int        // calls whose ProviderID buddy made up
	}{
		{
			name:   "text",
			events: []ev{start(), textStart(0), ping(), textDelta(0, "Hel"), textDelta(0, "lo, "), textDelta(0, "wörld"), blockStop(0), messageDelta("end_turn"), stop()},
			deltas: []string{"Hel", "lo, ", "wörld"}, text: "Hello, wörld", stop: "end_turn",
		},
		{
			name: "text then a tool call with split input",
			events: []ev{
				start(), textStart(0), textDelta(0, "Reading it."), blockStop(0),
				toolStart(1, "toolu_01", "read_file"), jsonDelta(1, ""), jsonDelta(1, `{"pa`), ping(), jsonDelta(1, `th": "notes`), jsonDelta(1, `.txt"}`), blockStop(1),
				messageDelta("tool_use"), stop(),
			},
			deltas: []string{"Reading it."}, text: "Reading it.", stop: "tool_use",
			toolCalls: []agent.ToolCall{{ProviderID: "toolu_01", Name: "read_file", Arguments: `{"path": "notes.txt"}`}},
		},
		{
			name: "two parallel tool calls",
			events: []ev{
				start(),
				toolStart(0, "toolu_a", "read_file"), jsonDelta(0, `{"path":"a"}`), blockStop(0),
				toolStart(1, "toolu_b", "write_file"), jsonDelta(1, `{"path":"b",`), jsonDelta(1, `"content":"x"}`), blockStop(1),
				messageDelta("tool_use"), stop(),
			},
			stop:      "tool_use",
			toolCalls: []agent.ToolCall{{ProviderID: "toolu_a", Name: "read_file", Arguments: `{"path":"a"}`}, {ProviderID: "toolu_b", Name: "write_file", Arguments: `{"path":"b","content":"x"}`}},
		},
		{
			name:      "tool call without input deltas",
			events:    []ev{start(), toolStart(0, "toolu_n", "now"), blockStop(0), messageDelta("tool_use"), stop()},
			stop:      "tool_use",
			toolCalls: []agent.ToolCall{{ProviderID: "toolu_n", Name: "now", Arguments: `{}`}},
		},
		{
			name: "input sent whole at block start",
			events: []ev{start(), {"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_w","name":"read_file","input":{"path":"a"}}}`},
				blockStop(0), messageDelta("tool_use"), stop()},
			stop:      "tool_use",
			toolCalls: []agent.ToolCall{{ProviderID: "toolu_w", Name: "read_file", Arguments: `{"path":"a"}`}},
		},
		{
			name:   "max_tokens",
			events: []ev{start(), textStart(0), textDelta(0, "This is cut"), blockStop(0), messageDelta("max_tokens"), stop()},
			deltas: []string{"This is cut"}, text: "This is cut", stop: "max_tokens",
		},
		{
			name: "thinking block is not text",
			events: []ev{start(),
				{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`},
				{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`},
				{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}`},
				blockStop(0), textStart(1), textDelta(1, "Yes."), blockStop(1), messageDelta("end_turn"), stop()},
			deltas: []string{"Yes."}, text: "Yes.", stop: "end_turn",
		},
		{
			name: "usage with the cache",
			events: []ev{{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,` +
				`"usage":{"input_tokens":12,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":1,"service_tier":"standard"}}}`},
				textStart(0), textDelta(0, "ok"), blockStop(0),
				{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`}, stop()},
			deltas: []string{"ok"}, text: "ok", stop: "end_turn",
			usage: &agent.Usage{PromptTokens: 3012, CompletionTokens: 15, CachedTokens: 2000, Reported: true},
		},
		{
			name: "message_delta with the input side again (cumulative)",
			events: []ev{start(), textStart(0), textDelta(0, "ok"), blockStop(0),
				{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":10,"output_tokens":40}}`}, stop()},
			deltas: []string{"ok"}, text: "ok", stop: "end_turn",
			usage: &agent.Usage{PromptTokens: 40, CompletionTokens: 40, CachedTokens: 10, Reported: true},
		},
		{
			name: "a server that sends no usage (a proxy)",
			events: []ev{{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-test"}}`},
				textStart(0), textDelta(0, "ok"), blockStop(0), {"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`}, stop()},
			deltas: []string{"ok"}, text: "ok", stop: "end_turn", usage: &agent.Usage{},
		},
		{
			name: "tool_use without an id, and two with the same",
			events: []ev{start(), toolStart(0, "", "now"), blockStop(0), toolStart(1, "toolu_x", "now"), blockStop(1),
				toolStart(2, "toolu_x", "now"), blockStop(2), messageDelta("tool_use"), stop()},
			stop:      "tool_use",
			toolCalls: []agent.ToolCall{{Name: "now", Arguments: `{}`}, {ProviderID: "toolu_x", Name: "now", Arguments: `{}`}, {Name: "now", Arguments: `{}`}},
			made:      []int{0, 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/messages", sse(tc.events...))
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
			want := agent.Usage{PromptTokens: 25, CompletionTokens: 89, Reported: true}
			if tc.usage != nil {
				want = *tc.usage
			}
			if resp.Usage != want {
				t.Errorf("usage %+v, want %+v", resp.Usage, want)
			}
			h := f.Header(0)
			if h.Get("X-Api-Key") != "sk-ant-test" || h.Get("Anthropic-Version") == "" {
				t.Errorf("headers x-api-key %q anthropic-version %q", h.Get("X-Api-Key"), h.Get("Anthropic-Version"))
			}
		})
	}
}

// fullRequest has every part a request body can have: the first call with
// the id the server gave it (sent back for the call and its result), the
// others as rows stored before provider ids were kept (sent as they are).
func fullRequest() agent.Request {
	return agent.Request{
		System: "You are buddy.",
		Messages: []agent.Message{
			{Role: agent.RoleUser, Text: "Copy notes.txt to out.txt"},
			{Role: agent.RoleAssistant, Text: "Reading it first.", ToolCalls: []agent.ToolCall{{ID: "c_1", ProviderID: "toolu_01A09q90qw90lq917835lq9", Name: "read_file", Arguments: `{"path":"notes.txt"}`}}},
			{Role: agent.RoleTool, ToolCallID: "c_1", ToolName: "read_file", Content: `{"content":"buy oat milk\n"}`},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{
				{ID: "toolu_2", Name: "write_file", Arguments: `{"path":"out.txt","content":"buy oat milk\n"}`},
				{ID: "toolu_3", Name: "read_file", Arguments: `{"path":`},
			}},
			{Role: agent.RoleTool, ToolCallID: "toolu_2", ToolName: "write_file", Content: "User denied execution of write_file", IsError: true},
			{Role: agent.RoleTool, ToolCallID: "toolu_3", ToolName: "read_file", Content: "Error (invalid_input): not a JSON object", IsError: true},
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
	ok := sse(start(), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn"), stop())
	temp := 0.2
	f := llmtest.NewFake(t, "/v1/messages", ok, ok)
	p := provider(t, f, func(o *anthropic.Options) { o.Temperature, o.MaxTokens = &temp, 512 })
	if _, err := p.Stream(t.Context(), fullRequest(), func(string) {}); err != nil {
		t.Fatal(err)
	}
	llmtest.Golden(t, "request_full.golden", f.Body(0), *update)
	// max_tokens is required by the API: the default is sent.
	if _, err := provider(t, f).Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}, func(string) {}); err != nil {
		t.Fatal(err)
	}
	llmtest.Golden(t, "request_minimal.golden", f.Body(1), *update)
}

// status answers with an HTTP error in the Anthropic error shape.
func status(code int, hdr map[string]string, typ, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
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
	begin := []ev{start(), textStart(0), textDelta(0, "Hel")}
	for _, tc := range []struct {
		name     string
		handlers []http.HandlerFunc
		baseURL  string
		timeout  time.Duration
		want     []string
		notWant  []string
		requests int
		deltas   string
	}{
		{name: "connection refused", baseURL: "http://" + refused, want: []string{"connection refused", "base_url"}},
		{name: "401", handlers: []http.HandlerFunc{status(401, nil, "authentication_error", "invalid x-api-key")}, want: []string{"HTTP 401", "api_key_env", "invalid x-api-key"}, notWant: []string{"sk-ant-test"}, requests: 1},
		{name: "429 retried then fails", handlers: []http.HandlerFunc{status(429, fast, "rate_limit_error", "slow down"), status(429, fast, "rate_limit_error", "slow down"), status(429, fast, "rate_limit_error", "slow down")}, want: []string{"HTTP 429", "rate limited", "slow down"}, requests: 3},
		{name: "529 overloaded retried then fails", handlers: []http.HandlerFunc{status(529, fast, "overloaded_error", "Overloaded"), status(529, fast, "overloaded_error", "Overloaded"), status(500, fast, "api_error", "Internal")}, want: []string{"HTTP 500", "server failed", "Internal"}, requests: 3},
		{name: "stream cut midway", handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			sse(begin...)(w, r)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		}}, want: []string{"broke off"}, requests: 1, deltas: "Hel"},
		{name: "stream ends without message_stop", handlers: []http.HandlerFunc{sse(begin...)}, want: []string{"ended before the answer was complete"}, requests: 1, deltas: "Hel"},
		{name: "malformed JSON in an event", handlers: []http.HandlerFunc{sse(append(begin, ev{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"`})...)}, want: []string{"not valid JSON"}, requests: 1, deltas: "Hel"},
		{name: "error event mid-stream", handlers: []http.HandlerFunc{sse(append(begin, ev{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`})...)}, want: []string{"overloaded_error", "Overloaded"}, notWant: []string{"HTTP 200"}, requests: 1, deltas: "Hel"},
		{name: "timeout", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			sse(begin...)(w, r)
			<-r.Context().Done()
		}}, want: []string{"[provider] timeout"}, requests: 1, deltas: "Hel"},
		{name: "a stream that sends nothing", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			sse()(w, r)
			<-r.Context().Done()
		}}, want: []string{"[provider] timeout"}, requests: 1},
		{name: "no answer at all", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}}, want: []string{"[provider] timeout"}, requests: 1},
		{name: "pings and nothing else", timeout: 300 * time.Millisecond, handlers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			sse(start())(w, r)
			for p := ping(); r.Context().Err() == nil; {
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", p.name, p.data)
				w.(http.Flusher).Flush()
			}
		}}, want: []string{"[provider] timeout"}, requests: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/messages", tc.handlers...)
			p := provider(t, f, func(o *anthropic.Options) {
				o.Timeout = tc.timeout
				if tc.baseURL != "" {
					o.BaseURL = tc.baseURL
				}
			})
			var deltas strings.Builder
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
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q says %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "the Anthropic Messages endpoint: ") {
				t.Errorf("error %q does not name the endpoint", err)
			}
			if n := f.Requests(); tc.baseURL == "" && n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if deltas.String() != tc.deltas {
				t.Errorf("deltas %q, want %q", deltas.String(), tc.deltas)
			}
		})
	}
}

func TestRetryAfterIsHonouredThenSucceeds(t *testing.T) {
	f := llmtest.NewFake(t, "/v1/messages", status(429, map[string]string{"Retry-After": "1"}, "rate_limit_error", "slow down"),
		sse(start(), textStart(0), textDelta(0, "ok"), blockStop(0), messageDelta("end_turn"), stop()))
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
	if !bytes.Equal(f.Body(0), f.Body(1)) {
		t.Errorf("retry body differs")
	}
}

func TestCanceledIsNotUnavailable(t *testing.T) {
	started := make(chan struct{})
	f := llmtest.NewFake(t, "/v1/messages", func(w http.ResponseWriter, r *http.Request) {
		sse(start(), textStart(0), textDelta(0, "Hel"))(w, r)
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

// TestCaps: an answer over a cap ends the turn with too_large, saying what
// was too big; what the client saw of it is kept, marked as cut; none of its
// tool calls is made; and the next message of the conversation works.
func TestCaps(t *testing.T) {
	const max = 1024
	a600, b600 := strings.Repeat("a", 600), strings.Repeat("b", 600)
	end := []ev{messageDelta("end_turn"), stop()}
	tiny := []ev{start(), textStart(0)}
	for range 2 * max {
		tiny = append(tiny, textDelta(0, "x"))
	}
	var empty []ev
	for i := range 2 * max {
		empty = append(empty, textStart(i), blockStop(i))
	}
	// A block counts whole: what starts it, then its deltas.
	textBlock := len(`{"type":"text","text":""}`)
	thinking := func(s string) ev {
		b, _ := json.Marshal(s)
		return ev{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":%s}}`, b)}
	}
	for _, tc := range []struct {
		name   string
		reply  http.HandlerFunc
		what   string   // the cap broken ("": none)
		says   []string // in the error
		deltas string   // what the client was shown, kept as cut
	}{
		{name: "text under the cap", reply: sse(append([]ev{start(), textStart(0), textDelta(0, a600), textDelta(0, b600[:max-600-textBlock])}, end...)...),
			deltas: a600 + b600[:max-600-textBlock]},
		{name: "text over the cap", reply: sse(append([]ev{start(), textStart(0), textDelta(0, a600), textDelta(0, b600)}, end...)...),
			what: llm.TooLargeAnswer, says: []string{"answer is over [provider] max_answer_bytes (1 KiB)", "raise max_answer_bytes"}, deltas: a600},
		{name: "many tiny chunks", reply: sse(append(tiny, end...)...),
			what: llm.TooLargeAnswer, deltas: strings.Repeat("x", max-textBlock)},
		{name: "many empty blocks", reply: sse(append(append([]ev{start()}, empty...), end...)...),
			what: llm.TooLargeAnswer},
		{name: "arguments over the cap", reply: sse(start(), textStart(0), textDelta(0, "Writing."), blockStop(0),
			toolStart(1, "toolu_1", "write_file"), jsonDelta(1, `{"content":"`), jsonDelta(1, a600), jsonDelta(1, b600), jsonDelta(1, `"}`),
			blockStop(1), messageDelta("tool_use"), stop()),
			what: llm.TooLargeArguments, says: []string{"call of write_file", "no call of that answer was made"}, deltas: "Writing."},
		{name: "input whole at block start", reply: sse(start(),
			ev{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write_file","input":{"content":%q}}}`, a600+b600)},
			blockStop(0), messageDelta("tool_use"), stop()),
			what: llm.TooLargeArguments},
		{name: "too many tool calls", reply: sse(start(), toolStart(0, "toolu_1", "now"), toolStart(1, "toolu_2", "now"),
			toolStart(2, "toolu_3", "now"), toolStart(3, "toolu_4", "now"), messageDelta("tool_use"), stop()),
			what: llm.TooLargeToolCalls, says: []string{"more than [provider] max_tool_calls (3)", "none was made"}},
		{name: "thinking over the cap", reply: sse(append([]ev{start(),
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`},
			thinking(a600), thinking(b600), blockStop(0), textStart(1), textDelta(1, "Hi.")}, end...)...),
			what: llm.TooLargeReasoning, says: []string{"reasoning is over [provider] max_answer_bytes"}},
		{name: "one event over the cap", reply: sse(append([]ev{start(), textStart(0), textDelta(0, strings.Repeat("c", 70<<10))}, end...)...),
			what: llm.TooLargeEvent, says: []string{"over 68 KiB"}},
		{name: "an event that never ends", reply: func(w http.ResponseWriter, r *http.Request) {
			sse(start(), textStart(0))(w, r)
			fmt.Fprint(w, "event: content_block_delta\n")
			for range 10_000 { // data lines and no empty line: one event, growing
				fmt.Fprintf(w, "data: %s\n", textDelta(0, "x").data)
			}
		}, what: llm.TooLargeEvent},
		{name: "error body over the cap", reply: status(400, nil, "invalid_request_error", strings.Repeat("e", 100<<10)),
			what: llm.TooLargeErrorBody, says: []string{"HTTP 400", "over 64 KiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/messages", tc.reply, sse(append([]ev{start(), textStart(0), textDelta(0, "Fine.")}, end...)...))
			// No retries: the SDK takes an error body it could not read for
			// a dropped connection, and would ask again (each time capped).
			c := llmtest.NewChat(t, provider(t, f, func(o *anthropic.Options) { o.MaxAnswerBytes, o.MaxToolCalls, o.MaxRetries = max, 3, -1 }))
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
					Role    string `json:"role"`
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(f.Body(1), &sent); err != nil {
				t.Fatal(err)
			}
			var roles []string
			for _, m := range sent.Messages {
				roles = append(roles, m.Role)
				for _, b := range m.Content {
					if b.Type != "text" {
						t.Errorf("the model was sent a %s block: %+v", b.Type, m)
					}
				}
			}
			want := []string{"user", "user"}
			if tc.deltas != "" {
				want = []string{"user", "assistant", "user"}
				if a := sent.Messages[1].Content[0].Text; !strings.HasPrefix(a, tc.deltas) || (tc.what != "") != strings.Contains(a, "[this answer was cut short (too_large)") {
					t.Errorf("the model was sent the answer %.80q…", a)
				}
			}
			if fmt.Sprint(roles) != fmt.Sprint(want) {
				t.Errorf("the model was sent %v, want %v", roles, want)
			}
		})
	}
}

// TestToolCallIDsRoundTrip: the tool_use id goes back exactly, for the call
// and its result, while buddy's own id stays the agent loop's.
func TestToolCallIDsRoundTrip(t *testing.T) {
	f := llmtest.NewFake(t, "/v1/messages",
		sse(start(), toolStart(0, "toolu_01A09q90qw90lq917835lq9", "read_file"), jsonDelta(0, `{"path":"a"}`), blockStop(0), messageDelta("tool_use"), stop()),
		sse(start(), textStart(0), textDelta(0, "Done."), blockStop(0), messageDelta("end_turn"), stop()))
	p := provider(t, f)
	resp, err := p.Stream(t.Context(), agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "read a"}}}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	call := resp.ToolCalls[0]
	if call.ProviderID != "toolu_01A09q90qw90lq917835lq9" || call.ID != "" {
		t.Fatalf("call %+v", call)
	}
	call.ID = "c_buddy1"
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
			Content []struct {
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(f.Body(1), &sent); err != nil {
		t.Fatal(err)
	}
	if got := sent.Messages[1].Content[0].ID + " " + sent.Messages[2].Content[0].ToolUseID; got != "toolu_01A09q90qw90lq917835lq9 toolu_01A09q90qw90lq917835lq9" {
		t.Errorf("sent back call and result ids %q, want the server's own", got)
	}
}

// TestContextExceeded: "prompt is too long", as an HTTP 400 or an error
// event inside the stream, is an error wrapping agent.ErrContextExceeded of
// kind too_large, sent once; its neighbours are not.
func TestContextExceeded(t *testing.T) {
	fast := map[string]string{"Retry-After-Ms": "5"}
	for _, tc := range []struct {
		name     string
		handlers []http.HandlerFunc
		match    bool
		says     string
	}{
		{name: "prompt is too long", handlers: []http.HandlerFunc{status(400, nil, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")},
			match: true, says: "HTTP 400: prompt is too long: 208310 tokens > 200000 maximum"},
		{name: "input and max_tokens", handlers: []http.HandlerFunc{status(400, nil, "invalid_request_error",
			"input length and `max_tokens` exceed context limit: 197626 + 21333 > 200000, decrease input length or `max_tokens` and try again")},
			match: true, says: "exceed context limit"},
		{name: "an error event after 200", handlers: []http.HandlerFunc{sse(start(),
			ev{"error", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`})},
			match: true, says: "(the server said: prompt is too long"},
		{name: "another 400", handlers: []http.HandlerFunc{status(400, nil, "invalid_request_error", "messages.1.content.0.tool_use.id: String should match pattern")},
			says: "HTTP 400: the request was refused: invalid_request_error: messages.1"},
		{name: "request_too_large, 413", handlers: []http.HandlerFunc{status(413, nil, "request_too_large", "Request exceeds the maximum allowed number of bytes.")},
			says: "HTTP 413"},
		{name: "overloaded, retried", handlers: []http.HandlerFunc{status(529, fast, "overloaded_error", "Overloaded"),
			status(529, fast, "overloaded_error", "Overloaded"), status(529, fast, "overloaded_error", "Overloaded")},
			says: "HTTP 529"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := llmtest.NewFake(t, "/v1/messages", tc.handlers...)
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
			if !strings.HasPrefix(err.Error(), "the Anthropic Messages endpoint: ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if f.Requests() != len(tc.handlers) {
				t.Errorf("%d requests, want %d", f.Requests(), len(tc.handlers))
			}
		})
	}
}

func TestDiscoverWindow(t *testing.T) {
	for _, tc := range []struct {
		model  string
		tokens int
	}{
		{"claude-sonnet-4-5", 200_000},
		{"claude-3-5-haiku-20241022", 200_000},
		{"claude-next-unknown", 200_000},
		{"my-proxy-model", 0},
	} {
		p, err := anthropic.New(anthropic.Options{BaseURL: "http://127.0.0.1:1", Model: tc.model, APIKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		w, err := p.DiscoverWindow(t.Context())
		switch {
		case tc.tokens == 0 && err == nil:
			t.Errorf("%s: window %+v, want an error", tc.model, w)
		case tc.tokens > 0 && (err != nil || w.Tokens != tc.tokens || w.Source != llm.KnownWindowSource):
			t.Errorf("%s: window %+v, %v; want %d", tc.model, w, err, tc.tokens)
		}
	}
}
