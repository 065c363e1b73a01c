package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/internal/testkit/syncbuf"
	"github.com/buddy-run/buddy/runtime"
)

const chatTestToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// chatWait bounds a chat session in a test: generous for -race on two
// shared cores, never reached by a passing test.
const chatWait = 60 * time.Second

// fakeLLM is a scripted model: "read…" calls read_file, "write…" calls
// write_file, "hang" streams nothing until canceled; after a tool result it
// streams an answer quoting the result, with bytes a terminal would obey.
type fakeLLM struct {
	mu       sync.Mutex
	requests []agent.Request
	// hanging is closed when a "hang" turn has reached the model.
	hanging chan struct{}
	// canceled gets the error a hanging call saw.
	canceled chan error
}

// hostileAnswer holds an ESC sequence (clear the screen), a BEL and a bidi
// override: the chat must show them escaped.
const hostileAnswer = "\x1b[2J\a\u202egnp.exe"

func (f *fakeLLM) Stream(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == agent.RoleTool:
		onText("Result: ")
		onText(last.Content + " ")
		onText(hostileAnswer)
		return &agent.Response{Text: "Result: " + last.Content + " " + hostileAnswer, StopReason: "stop"}, nil
	case strings.HasPrefix(last.Text, "read"):
		return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "t1", Name: "read_file", Arguments: `{"path":"notes.txt"}`}}, StopReason: "tool_calls"}, nil
	case strings.HasPrefix(last.Text, "write"):
		return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "t2", Name: "write_file", Arguments: `{"content":"hello","path":"out.txt"}`}}, StopReason: "tool_calls"}, nil
	case last.Text == "hang":
		close(f.hanging)
		<-ctx.Done()
		f.canceled <- ctx.Err()
		return nil, ctx.Err()
	}
	onText("plain answer")
	return &agent.Response{Text: "plain answer", StopReason: "stop"}, nil
}

func (f *fakeLLM) lastRequest() agent.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

// chatStack is an in-process buddy serve: the real runtime, read_file and
// write_file, the store, the approval gate and the agent loop over fakeLLM.
type chatStack struct {
	url           string
	llm           *fakeLLM
	docs, scratch string
}

func newChatStack(t *testing.T, withAgent bool) *chatStack {
	t.Helper()
	cs := &chatStack{llm: &fakeLLM{hanging: make(chan struct{}), canceled: make(chan error, 1)}, docs: t.TempDir(), scratch: t.TempDir()}
	if err := os.WriteFile(filepath.Join(cs.docs, "notes.txt"), []byte("buy oat milk"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, "[skills.read_file]\nallowed_directories = [%q]\n\n[skills.write_file]\nallowed_directories = [%q]\n", cs.docs, cs.scratch))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := os.Chmod(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(t.Context(), runtime.Options{CacheDir: cache, Prepared: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "buddy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	reg, err := skills.New(t.Context(), skills.Options{Runtime: rt, Config: cfg, Store: st, Deps: hostfns.Deps{KV: st, Memories: st}})
	if err != nil {
		t.Fatal(err)
	}
	live := skills.NewLive(reg)
	t.Cleanup(func() { _ = live.Close(context.Background()) })
	opts := server.Options{
		Token: chatTestToken,
		Store: st,
		NewGate: func(a approval.Asker) server.Gate {
			return approval.New(live, approval.Options{Asker: a, Settings: approval.Fixed(approval.Settings{Timeout: chatWait})})
		},
	}
	if withAgent {
		opts.NewAgent = func(g server.Gate) server.Agent {
			return agent.New(agent.Options{Provider: cs.llm, Skills: g, History: st, NewCallID: server.NewCallID})
		}
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Close()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("closing the server: %v", err)
		}
	})
	cs.url = hs.URL
	return cs
}

// chatRun is one finished chat session.
type chatRun struct {
	out, errOut string
	err         error
}

// chat runs buddy chat against the stack with stdin, until it exits.
func (cs *chatStack) chat(t *testing.T, stdin io.Reader, conversation string, intr <-chan os.Signal) chatRun {
	t.Helper()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), Options{
			URL: cs.url, Token: chatTestToken, Conversation: conversation,
			In: stdin, Out: &out, Err: &errOut, Interrupts: intr,
		})
	}()
	select {
	case err := <-done:
		return chatRun{out: out.String(), errOut: errOut.String(), err: err}
	case <-time.After(chatWait):
		t.Fatalf("buddy chat did not exit within %v; output so far:\n%s\nstderr:\n%s", chatWait, out.String(), errOut.String())
	}
	return chatRun{}
}

// assertShown fails unless every want appears in out, in order.
func assertChatShows(t *testing.T, out string, want ...string) {
	t.Helper()
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output lacks %q (in order); output:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}

// assertTerminalSafe fails if out holds a byte or rune a terminal would
// obey: every control character but \n, and the bidi overrides.
func assertTerminalSafe(t *testing.T, out string) {
	t.Helper()
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
			t.Fatalf("output holds %U at byte %d: %q", r, i, out)
		}
	}
}

func TestChat(t *testing.T) {
	cs := newChatStack(t, true)
	var readConv string
	tests := []struct {
		name  string
		stdin string
		// conversation continues the read test's conversation.
		conversation bool
		want         []string
		check        func(t *testing.T, r chatRun)
	}{
		{
			name:  "read_file runs without approval and the streamed answer is escaped",
			stdin: "read my notes\n",
			want: []string{
				"buddy chat: connected to " + cs.url,
				"you> read my notes\n",
				"conversation c_",
				`  → read_file {"path":"notes.txt"}` + "\n",
				`  ← read_file ok (`, `{"content":"buy oat milk"}` + "\n",
				`buddy> Result: {"content":"buy oat milk"} \x1b[2J\x07\u202egnp.exe` + "\n",
			},
			check: func(t *testing.T, r chatRun) {
				if strings.Contains(r.out, "approval needed") {
					t.Errorf("read_file asked for approval:\n%s", r.out)
				}
				_, after, _ := strings.Cut(r.out, "conversation ")
				readConv, _, _ = strings.Cut(after, " ")
			},
		},
		{
			name:         "--conversation continues it: the model sees the history",
			stdin:        "hello again\n",
			conversation: true,
			want:         []string{"continuing conversation c_", "you> hello again\n", "buddy> plain answer\n"},
			check: func(t *testing.T, r chatRun) {
				req := cs.llm.lastRequest()
				if n := len(req.Messages); n < 4 {
					t.Errorf("the model saw %d messages, want the earlier turn's 4 and the new one: %+v", n, req.Messages)
				}
				if strings.Contains(r.out, "conversation c_") && !strings.Contains(r.out, "continuing conversation "+readConv) {
					t.Errorf("chat did not continue %s:\n%s", readConv, r.out)
				}
			},
		},
		{
			name:  "write_file asks, y approves: the file is written",
			stdin: "write a file\ny\n",
			want: []string{
				`  → write_file {"content":"hello","path":"out.txt"}`,
				"approval needed: write_file (mutating) asks to run with:\n  path: \"out.txt\"\n  content: \"hello\"\n",
				"  may touch: ", cs.scratch,
				"approve? [y/N] ",
				"  approved (user)\n",
				"  ← write_file ok (",
				"buddy> Result: ",
			},
			check: func(t *testing.T, r chatRun) {
				data, err := os.ReadFile(filepath.Join(cs.scratch, "out.txt"))
				if err != nil || string(data) != "hello" {
					t.Errorf("out.txt = %q, %v; want hello", data, err)
				}
			},
		},
		{
			name:  "n denies: nothing is written and the model is told",
			stdin: "write again\nmaybe\nn\n",
			want: []string{
				"approval needed: write_file (mutating)",
				"approve? [y/N] answer y or n: ",
				"  denied (user)\n",
				"  ← write_file failed: denied: User denied execution of write_file\n",
				"buddy> Result: User denied execution of write_file",
			},
			check: func(t *testing.T, r chatRun) {
				last := cs.llm.lastRequest().Messages
				tool := last[len(last)-1]
				if !tool.IsError || tool.Content != "User denied execution of write_file" {
					t.Errorf("the model got %+v, want the denial", tool)
				}
			},
		},
		{
			name:  "end of input at an approval denies it",
			stdin: "write once more\n",
			want:  []string{"approve? [y/N] n (end of input)\n", "  ← write_file failed: denied: "},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "n denies: nothing is written and the model is told" {
				if err := os.Remove(filepath.Join(cs.scratch, "out.txt")); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if _, err := os.Stat(filepath.Join(cs.scratch, "out.txt")); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("out.txt exists after a denial: %v", err)
					}
				}()
			}
			conv := ""
			if tc.conversation {
				if readConv == "" {
					t.Skip("the read case did not run")
				}
				conv = readConv
			}
			r := cs.chat(t, strings.NewReader(tc.stdin), conv, nil)
			if r.err != nil {
				t.Fatalf("chat: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.out, r.errOut)
			}
			assertChatShows(t, r.out, tc.want...)
			assertTerminalSafe(t, r.out)
			if r.errOut != "" {
				t.Errorf("stderr: %s", r.errOut)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// TestChatCancel: Ctrl-C during a turn sends cancel; the model call is
// canceled, the turn ends with done canceled, and chat goes on (here: ends
// with its input).
func TestChatCancel(t *testing.T) {
	cs := newChatStack(t, true)
	intr := make(chan os.Signal, 1)
	go func() {
		select {
		case <-cs.llm.hanging:
			intr <- os.Interrupt
		case <-time.After(chatWait):
		}
	}()
	r := cs.chat(t, strings.NewReader("hang\n"), "", intr)
	if r.err != nil {
		t.Fatalf("chat: %v\n%s%s", r.err, r.out, r.errOut)
	}
	assertChatShows(t, r.out, "you> hang\n", "canceling the turn…\n", "(canceled)\n")
	select {
	case err := <-cs.llm.canceled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the model call ended with %v, want canceled", err)
		}
	default:
		t.Error("the model call was not canceled")
	}
}

// TestChatInterruptAtPrompt: Ctrl-C with no turn running exits at once,
// whatever stdin still holds.
func TestChatInterruptAtPrompt(t *testing.T) {
	cs := newChatStack(t, true)
	intr := make(chan os.Signal, 1)
	intr <- os.Interrupt
	pr, pw := io.Pipe() // stdin that never ends
	t.Cleanup(func() { pw.Close() })
	r := cs.chat(t, pr, "", intr)
	if r.err != nil {
		t.Fatalf("chat: %v", r.err)
	}
	cs.llm.mu.Lock()
	sent := len(cs.llm.requests)
	cs.llm.mu.Unlock()
	if strings.Contains(r.out, "you>") || sent != 0 {
		t.Errorf("a message was sent after Ctrl-C:\n%s", r.out)
	}
}

func TestChatFailures(t *testing.T) {
	cs := newChatStack(t, false) // no provider
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	tests := []struct {
		name       string
		url, token string
		kind       errs.Kind
		detail     string
	}{
		{"wrong token", cs.url, strings.Repeat("f", 64), errs.KindForbidden, "refused the token (HTTP 401)"},
		{"nothing listening", refusedURL, chatTestToken, errs.KindUnavailable, "cannot reach buddy serve at " + refusedURL},
		{"not a URL", "127.0.0.1:7700", chatTestToken, errs.KindInvalidInput, "want the server's address"},
		{"ftp", "ftp://127.0.0.1:7700", chatTestToken, errs.KindInvalidInput, "http or https"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := Run(t.Context(), Options{URL: tc.url, Token: tc.token, In: strings.NewReader("hi\n"), Out: &out, Err: &out})
			if errs.KindOf(err) != tc.kind || err == nil || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("err = %v (kind %s), want kind %s with %q", err, errs.KindOf(err), tc.kind, tc.detail)
			}
		})
	}
	t.Run("no provider: the send is refused and chat goes on", func(t *testing.T) {
		r := cs.chat(t, strings.NewReader("hello\nstill there?\n"), "", nil)
		if r.err != nil {
			t.Fatalf("chat: %v", r.err)
		}
		assertChatShows(t, r.errOut, "error: config: no LLM provider is configured", "error: config: no LLM provider is configured")
		assertChatShows(t, r.out, "you> hello\n", "you> still there?\n")
	})
	t.Run("unknown conversation", func(t *testing.T) {
		var out strings.Builder
		err := Run(t.Context(), Options{URL: cs.url, Token: chatTestToken, Conversation: "c_0000000000000000", In: strings.NewReader("hi\n"), Out: &out, Err: &out})
		if errs.KindOf(err) != errs.KindNotFound || !strings.Contains(err.Error(), "no conversation c_0000000000000000") {
			t.Fatalf("err = %v, want not_found naming the conversation", err)
		}
		if strings.Contains(out.String(), "you>") {
			t.Errorf("a message was sent to an unknown conversation:\n%s", out.String())
		}
	})
}
