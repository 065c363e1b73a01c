package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// The page in a real browser: Debian's chromium (scripts/install-chromium.sh,
// run by `make tools`) driven by chromedp against the real server, gate,
// registry and store, with a scripted LLM provider in the real agent loop.
//
// BUDDY_SCREENSHOT=docs/screenshot.png writes the chat with an open approval
// dialog there; BUDDY_WEB_BENCH=1 prints the page figures of docs/BENCHMARKS.md.

// browserWait bounds each wait for the page: generous for -race on two
// shared cores, never reached by a passing test.
const browserWait = 60 * time.Second

// chromiumPath finds the browser, or skips with what to do.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BUDDY_CHROMIUM"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Skip("chromium is not installed: run scripts/install-chromium.sh (make tools does) to run the page tests")
	return ""
}

// newBrowser starts one headless chromium for a test and its subtests.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	// The profile is removed after the browser: chromium's helper processes
	// may still write to it for a moment after it is told to quit, which
	// t.TempDir's cleanup reports as an error.
	profile, err := os.MkdirTemp("", "buddy-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1200, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// Newer Chromium sends events this cdproto does not know: not errors of
	// the page.
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {}))
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		cancelAlloc()
		os.RemoveAll(profile)
		t.Skipf("chromium does not start (%v): run scripts/install-chromium.sh", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return ctx
}

// tab is one browser tab.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func newTab(t *testing.T, browser context.Context) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return &tab{t: t, ctx: ctx}
}

// run runs actions, failing the test on an error.
func (b *tab) run(actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) into out.
func (b *tab) eval(expr string, out any) {
	b.t.Helper()
	b.run(chromedp.Evaluate(expr, out, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
}

func (b *tab) str(expr string) string {
	b.t.Helper()
	var s string
	b.eval(expr, &s)
	return s
}

// wait polls a JavaScript expression until it is truthy.
func (b *tab) wait(expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		var page string
		_ = chromedp.Run(b.ctx, chromedp.Evaluate(`document.body.innerText.slice(-1500)`, &page))
		b.t.Fatalf("waiting for %s: %v\npage text ends with:\n%s", expr, err, page)
	}
}

// open loads the page at url (with its fragment) and waits until it is ready.
func (b *tab) open(url string) {
	b.t.Helper()
	b.run(chromedp.Navigate(url))
	b.wait(`document.body.dataset.ready === "1"`)
}

// send types a message and presses Enter.
func (b *tab) send(text string) {
	b.t.Helper()
	b.wait(`!document.getElementById("send").disabled`)
	b.run(chromedp.SetValue("#composer-text", text, chromedp.ByID), chromedp.SendKeys("#composer-text", kb.Enter, chromedp.ByID))
}

// lastAssistant waits for the turn to end (Send is enabled again) with a
// last assistant message containing want, and returns its text.
func (b *tab) lastAssistant(want string) string {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const m = [...document.querySelectorAll("li.msg.assistant:not(.streaming)")].pop();
		return !document.getElementById("send").disabled && m && m.textContent.includes(%q); })()`, want)
	b.wait(js)
	return b.str(`[...document.querySelectorAll("li.msg.assistant")].pop().textContent`)
}

// dialogOpen waits for the approval dialog, armed.
func (b *tab) dialogOpen() {
	b.t.Helper()
	b.wait(`document.getElementById("approval").open && !document.getElementById("ap-approve").disabled`)
}

// lazyHistory is the store, handed to the agent once the stack has one.
type lazyHistory struct {
	mu sync.Mutex
	st *store.Store
}

func (h *lazyHistory) get() *store.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}

func (h *lazyHistory) AppendMessage(ctx context.Context, m store.Message) (int64, error) {
	return h.get().AppendMessage(ctx, m)
}

func (h *lazyHistory) Messages(ctx context.Context, conv string) ([]store.Message, error) {
	return h.get().Messages(ctx, conv)
}

// MessagesAfter and LastSummary let the agent read the conversation
// incrementally, as it reads buddy serve's store.
func (h *lazyHistory) MessagesAfter(ctx context.Context, conv string, after int64) ([]store.Message, error) {
	return h.get().MessagesAfter(ctx, conv, after)
}

func (h *lazyHistory) LastSummary(ctx context.Context, conv string) (store.Message, bool, error) {
	return h.get().LastSummary(ctx, conv)
}

// AppendUsage records the usage of a model request, as buddy serve does.
func (h *lazyHistory) AppendUsage(ctx context.Context, u store.Usage) error {
	return h.get().AppendUsage(ctx, u)
}

// Hostile content: if any of it ran, window.__pwned would be set; if the
// renderer let HTML through, an <img> or <script> element would exist.
const hostileMarkdown = "<img src=x onerror=\"window.__pwned='img'\"> **bold**\n\n" +
	"<script>window.__pwned='script'</script>\n\n" +
	"[click me](javascript:window.__pwned='link') and [safe](https://example.com/a) and ![beacon](http://127.0.0.1:9/beacon.png)\n\n" +
	"<a href=\"javascript:window.__pwned='a'\">raw</a> [data](data:text/html,<script>alert(1)</script>) [rel](//evil.example/x)\n\n" +
	"`<b>code</b>` <svg onload=\"window.__pwned='svg'\"></svg> <iframe src=\"javascript:window.__pwned='frame'\"></iframe>"

// scriptedProvider answers by the last user message: "write PATH" and
// "read PATH" call a skill; "xss" streams hostile Markdown; "adversarial",
// "mixed" and "code" stream the 192 KB messages of web_markdown_test.go in
// 768-byte deltas; "xsscall" calls write_file with hostile arguments; "slow" streams
// until canceled; anything else is greeted. After a tool result it says what
// happened, quoting the result (hostile content included).
func scriptedProvider() agent.Provider {
	return agent.ProviderFunc(func(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		streamBy := func(text string, piece int, pause time.Duration) (*agent.Response, error) {
			for i := 0; i < len(text); i += piece {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(pause):
				}
				onText(text[i:min(i+piece, len(text))])
			}
			return &agent.Response{Text: text, StopReason: "stop"}, nil
		}
		stream := func(text string) (*agent.Response, error) { return streamBy(text, 12, 5*time.Millisecond) }
		call := func(skill string, args map[string]string) (*agent.Response, error) {
			b, _ := json.Marshal(args)
			return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "x", Name: skill, Arguments: string(b)}}, StopReason: "tool_calls"}, nil
		}
		msgs := req.Messages
		last := msgs[len(msgs)-1]
		if last.Role == agent.RoleTool {
			if last.IsError {
				return stream("I could not do it: " + last.Content + ".")
			}
			return stream("Done. The tool said:\n\n" + last.Content[:min(len(last.Content), 2000)])
		}
		cmd, arg, _ := strings.Cut(last.Text, " ")
		switch cmd {
		case "write":
			return call("write_file", map[string]string{"path": arg, "content": "written by the model\n"})
		case "read":
			return call("read_file", map[string]string{"path": arg})
		case "xss":
			return stream(hostileMarkdown)
		case "adversarial":
			return streamBy(adversarialMarkdown(), 768, 2*time.Millisecond)
		case "mixed":
			return streamBy(mixedMarkdown(), 768, 2*time.Millisecond)
		case "code":
			return streamBy(codeMarkdown(), 768, 2*time.Millisecond)
		case "xsscall":
			return call("write_file", map[string]string{
				"path":    "<img src=x onerror=\"window.__pwned='arg'\">.txt",
				"content": "<script>window.__pwned='content'</script>\n[x](javascript:window.__pwned='arglink')\n" + strings.Repeat("long line of content\n", 400),
			})
		case "slow":
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
				onText(fmt.Sprintf("word%d ", i))
			}
		}
		return stream("Hello! You said **" + last.Text + "**.\n\n- one\n- two\n\n```\ncode <b>here</b>\n```")
	})
}

// agentStack is a test stack whose server runs the real agent loop over the
// scripted provider.
func agentStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	h := &lazyHistory{}
	o.server = func(opts *server.Options) {
		opts.NewAgent = func(g server.Gate) server.Agent {
			return agent.New(agent.Options{Provider: scriptedProvider(), Skills: g, History: h, NewCallID: server.NewCallID})
		}
	}
	s := newStack(t, o)
	h.mu.Lock()
	h.st = s.st
	h.mu.Unlock()
	return s
}

// signedIn opens a tab on the stack's printed address.
func signedIn(t *testing.T, browser context.Context, s *stack) *tab {
	t.Helper()
	b := newTab(t, browser)
	b.open(s.url + "/#token=" + testToken)
	return b
}

// pwnedCheck fails if hostile content ran or became elements.
func (b *tab) pwnedCheck() {
	b.t.Helper()
	var res struct {
		Pwned   any      `json:"pwned"`
		Imgs    int      `json:"imgs"`
		Scripts []string `json:"scripts"`
		Bad     []string `json:"bad"`
		Frames  int      `json:"frames"`
	}
	b.eval(`({
		pwned: window.__pwned === undefined ? null : String(window.__pwned),
		imgs: document.querySelectorAll("img, svg, iframe, object, embed").length,
		scripts: [...document.scripts].map(s => s.src),
		bad: [...document.querySelectorAll("a[href]")].map(a => a.href).filter(h => !/^https?:\/\//.test(h)),
		frames: window.frames.length,
	})`, &res)
	if res.Pwned != nil {
		b.t.Errorf("hostile content ran: window.__pwned = %v", res.Pwned)
	}
	if res.Imgs != 0 || res.Frames != 0 {
		b.t.Errorf("hostile content became elements: %d img/svg/iframe/object/embed, %d frames", res.Imgs, res.Frames)
	}
	if len(res.Scripts) != 2 || !strings.HasSuffix(res.Scripts[0], "/markdown.js") || !strings.HasSuffix(res.Scripts[1], "/app.js") {
		b.t.Errorf("scripts on the page: %v, want only markdown.js and app.js", res.Scripts)
	}
	if len(res.Bad) != 0 {
		b.t.Errorf("links that are not http(s): %v", res.Bad)
	}
}

func TestWebPage(t *testing.T) {
	browser := newBrowser(t)
	s := agentStack(t, stackOpts{})
	evil := "<img src=x onerror=\"window.__pwned='result'\">\n<script>window.__pwned='result-script'</script>\n[x](javascript:window.__pwned='result-link')\n"
	if err := os.WriteFile(filepath.Join(s.docs, "evil.md"), []byte(evil), 0o644); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a line of a big file, 1 MiB in all, <b>not bold</b> [x](javascript:void 0)\n", (1<<20)/76)
	if err := os.WriteFile(filepath.Join(s.docs, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("sign in", func(t *testing.T) {
		b := newTab(t, browser)
		b.run(chromedp.Navigate(s.url + "/#token=" + strings.Repeat("0", 64)))
		b.wait(`!document.getElementById("signin").hidden && document.getElementById("signin-error").textContent.includes("not this server")`)
		if h := b.str(`location.href`); strings.Contains(h, "token") {
			t.Errorf("the token stays in the address: %s", h)
		}
		// The form takes the token (or the whole printed address).
		b.run(chromedp.SetValue("#signin-token", s.url+"/#token="+testToken, chromedp.ByID),
			chromedp.SendKeys("#signin-token", kb.Enter, chromedp.ByID))
		b.wait(`document.body.dataset.ready === "1" && !document.getElementById("app").hidden`)
		b2 := signedIn(t, browser, s)
		if h := b2.str(`location.href`); strings.Contains(h, testToken) || strings.Contains(h, "token") {
			t.Errorf("the token stays in the address: %s", h)
		}
		if c := b2.str(`document.cookie`); c != "" {
			t.Errorf("script can read cookies %q: the session cookie must be HttpOnly", c)
		}
		b2.wait(`document.getElementById("conn-status").textContent === "connected"`)
		b2.wait(`document.querySelectorAll("#skill-list > li").length >= 2`)
	})

	var convID string
	b := signedIn(t, browser, s)
	t.Run("streamed answer", func(t *testing.T) {
		b.eval(`new MutationObserver(() => { if (document.querySelector("li.msg.assistant.streaming")) window.__sawStream = true; })
			.observe(document.getElementById("messages"), {childList: true, subtree: true, attributes: true}), true`, nil)
		b.send("hello there")
		got := b.lastAssistant("You said")
		if !strings.Contains(got, "Hello! You said hello there.") {
			t.Errorf("answer %q", got)
		}
		if b.str(`String(window.__sawStream)`) != "true" {
			t.Error("the answer was never shown while streaming")
		}
		if got := b.str(`[...document.querySelectorAll("li.msg.assistant")].pop().querySelector("strong").textContent`); got != "hello there" {
			t.Errorf("bold rendered as %q", got)
		}
		if got := b.str(`[...document.querySelectorAll("li.msg.assistant")].pop().querySelector("pre code").textContent`); got != "code <b>here</b>" {
			t.Errorf("code block %q", got)
		}
		convID = b.str(`location.hash.replace("#c=", "")`)
		if !strings.HasPrefix(convID, "c_") {
			t.Fatalf("conversation id in the address: %q", convID)
		}
		b.wait(fmt.Sprintf(`document.querySelector("#conv-list li.current") && document.querySelector("#conv-list li.current").textContent.includes("hello there")`))
	})

	t.Run("approve", func(t *testing.T) {
		b.send("write approved.txt")
		b.dialogOpen()
		var d struct{ Skill, Level, Args, Touches, What, Countdown string }
		b.eval(`({skill: document.getElementById("ap-skill").textContent, level: document.getElementById("ap-level").textContent,
			args: document.getElementById("ap-args").textContent, touches: document.getElementById("ap-touches").textContent,
			what: document.getElementById("approval-what").textContent, countdown: document.getElementById("ap-countdown").textContent})`, &d)
		if d.Skill != "write_file" || d.Level != "mutating" || !strings.Contains(d.Args, "approved.txt") ||
			!strings.Contains(d.Args, "written by the model") || !strings.Contains(d.Touches, s.scratch) ||
			!strings.Contains(d.Touches, "approved.txt") || !strings.Contains(d.Countdown, "Expires in") {
			t.Errorf("dialog shows %+v", d)
		}
		// The resolved target: what the write will do, from the same resolver
		// the host function uses.
		if !strings.Contains(d.Touches, "create ") || !strings.Contains(d.Touches, "new file") {
			t.Errorf("dialog does not show the resolved target: %q", d.Touches)
		}
		// The module approved: its version and a short sha256, whole in
		// the title.
		var mod struct {
			Hidden              bool
			Version, Sha, Title string
		}
		b.eval(`({hidden: document.getElementById("ap-module").hidden, version: document.getElementById("ap-version").textContent,
			sha: document.getElementById("ap-sha").textContent, title: document.getElementById("ap-sha").title})`, &mod)
		var skills struct {
			Skills []struct{ Name, Version string }
		}
		s.getJSON(t, "/api/skills", &skills)
		version := ""
		for _, sk := range skills.Skills {
			if sk.Name == "write_file" {
				version = sk.Version
			}
		}
		if mod.Hidden || version == "" || mod.Version != version || !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(mod.Sha) ||
			!regexp.MustCompile(`^sha256 [0-9a-f]{64}$`).MatchString(mod.Title) || !strings.HasPrefix(mod.Title, "sha256 "+mod.Sha) {
			t.Errorf("the dialog shows the module as %+v, want version %q and a short sha256", mod, version)
		}
		if got := b.str(`document.title`); !strings.HasPrefix(got, "(1) Approval needed") {
			t.Errorf("title while an approval waits: %q", got)
		}
		if got := b.str(`document.getElementById("favicon").href`); !strings.HasSuffix(got, "favicon-alert.svg") {
			t.Errorf("favicon while an approval waits: %q", got)
		}
		if p := os.Getenv("BUDDY_SCREENSHOT"); p != "" {
			var png []byte
			b.run(chromedp.CaptureScreenshot(&png))
			if err := os.WriteFile(p, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s (%d bytes)", p, len(png))
		}
		b.run(chromedp.Click("#ap-approve", chromedp.ByID))
		b.wait(`!document.getElementById("approval").open`)
		b.lastAssistant("Done.")
		data, err := os.ReadFile(filepath.Join(s.scratch, "approved.txt"))
		if err != nil || string(data) != "written by the model\n" {
			t.Fatalf("approved.txt: %q, %v", data, err)
		}
		if aps := s.conversation(t, convID).Approvals; len(aps) == 0 || "sha256 "+aps[len(aps)-1].ModuleSHA256 != mod.Title {
			t.Errorf("the approval stored %+v, the dialog showed %s", aps, mod.Title)
		}
		card := b.str(`[...document.querySelectorAll("li.msg.tool")].pop().textContent`)
		for _, want := range []string{"write_file", "mutating", "done", "Approved by you", "approved.txt"} {
			if !strings.Contains(card, want) {
				t.Errorf("card %q lacks %q", card, want)
			}
		}
		if got := b.str(`document.title`); got != "buddy" {
			t.Errorf("title after the answer: %q", got)
		}
		// The conversation's audit trail shows the call and what it touched.
		b.run(chromedp.Click("#audit-toggle", chromedp.ByID))
		b.wait(`document.getElementById("audit-list").textContent.includes("approved.txt")`)
		if trail := b.str(`document.getElementById("audit-list").textContent`); !strings.Contains(trail, "write_file") || !strings.Contains(trail, "ok") {
			t.Errorf("audit trail %q lacks the write_file call", trail)
		}
		b.run(chromedp.Click("#audit-toggle", chromedp.ByID))
	})

	t.Run("deny with the keyboard", func(t *testing.T) {
		b.send("write denied.txt")
		b.dialogOpen()
		if got := b.str(`document.activeElement.id`); got != "ap-deny" {
			t.Errorf("focus in the dialog on %q, want the safe choice ap-deny", got)
		}
		b.run(chromedp.KeyEvent("d"))
		got := b.lastAssistant("could not")
		if !strings.Contains(got, "User denied execution of write_file") {
			t.Errorf("the model's next message %q does not reflect the denial", got)
		}
		if _, err := os.Stat(filepath.Join(s.scratch, "denied.txt")); !os.IsNotExist(err) {
			t.Errorf("denied.txt exists after a denial (%v)", err)
		}
		card := b.str(`[...document.querySelectorAll("li.msg.tool")].pop().textContent`)
		if !strings.Contains(card, "failed: denied") || !strings.Contains(card, "Denied by you") {
			t.Errorf("card %q", card)
		}
	})

	t.Run("approve with the keyboard is armed late", func(t *testing.T) {
		b.send("write keyed.txt")
		b.wait(`document.getElementById("approval").open`)
		// A keystroke meant for the message box, the instant the dialog opens,
		// does not approve.
		b.run(chromedp.KeyEvent("a"))
		b.dialogOpen()
		if _, err := os.Stat(filepath.Join(s.scratch, "keyed.txt")); !os.IsNotExist(err) {
			t.Fatalf("an early keystroke approved (%v)", err)
		}
		b.run(chromedp.KeyEvent("a"))
		b.lastAssistant("Done.")
		if _, err := os.Stat(filepath.Join(s.scratch, "keyed.txt")); err != nil {
			t.Errorf("keyed.txt after A: %v", err)
		}
	})

	t.Run("two tabs", func(t *testing.T) {
		b2 := newTab(t, browser)
		b2.open(s.url + "/#c=" + convID)
		b2.wait(`document.querySelectorAll("li.msg.tool").length >= 3`)
		b.send("write twotabs.txt")
		b.dialogOpen()
		b2.dialogOpen()
		if got := b2.str(`document.title`); !strings.HasPrefix(got, "(1) Approval needed") {
			t.Errorf("second tab title: %q", got)
		}
		b.run(chromedp.Click("#ap-approve", chromedp.ByID))
		b2.wait(`!document.getElementById("approval").open`)
		b2.wait(`document.title === "buddy"`)
		b2.wait(`[...document.querySelectorAll("li.msg.tool")].pop().textContent.includes("Approved in another tab")`)
		b.lastAssistant("Done.")
		if _, err := os.Stat(filepath.Join(s.scratch, "twotabs.txt")); err != nil {
			t.Errorf("twotabs.txt: %v", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		b.send("slow")
		b.wait(`!document.getElementById("cancel").hidden && document.querySelector("li.msg.assistant.streaming")`)
		b.run(chromedp.Click("#cancel", chromedp.ByID))
		b.wait(`document.getElementById("cancel").hidden && !document.getElementById("send").disabled`)
		b.wait(`[...document.querySelectorAll("li.msg.note")].some(n => n.textContent === "Stopped.")`)
	})

	t.Run("hostile content", func(t *testing.T) {
		b.send("xss")
		got := b.lastAssistant("bold")
		for _, want := range []string{"<img src=x onerror=", "<script>window.__pwned='script'</script>", "[click me](javascript:", "![beacon](http://127.0.0.1:9/beacon.png)"} {
			if !strings.Contains(got, want) {
				t.Errorf("hostile text not shown as text: %q lacks %q", got, want)
			}
		}
		var links []struct{ Href, Rel, Text string }
		b.eval(`[...[...document.querySelectorAll("li.msg.assistant")].pop().querySelectorAll("a")].map(a => ({href: a.href, rel: a.rel, text: a.textContent}))`, &links)
		if len(links) != 1 || links[0].Href != "https://example.com/a" || links[0].Rel != "noopener noreferrer nofollow" || links[0].Text != "safe" {
			t.Errorf("links in hostile output: %+v, want only the https one", links)
		}
		// A tool result (a file's content) and the model quoting it.
		b.send("read evil.md")
		b.lastAssistant("Done.")
		if card := b.str(`[...document.querySelectorAll("li.msg.tool")].pop().textContent`); !strings.Contains(card, "<script>window.__pwned='result-script'</script>") {
			t.Errorf("result card %q", card)
		}
		// Tool arguments, in the card and in the dialog.
		b.send("xsscall")
		b.dialogOpen()
		args := b.str(`document.getElementById("ap-args").textContent + document.getElementById("ap-touches").textContent`)
		if !strings.Contains(args, "<img src=x onerror=") || !strings.Contains(args, "<script>window.__pwned='content'</script>") {
			t.Errorf("dialog arguments %q", args)
		}
		// Long content is folded, and fully viewable.
		var fold struct{ Shown, Full int }
		b.eval(`(() => { const d = document.querySelector("#ap-args details"); const before = document.getElementById("ap-args").textContent.length;
			d.open = true; return new Promise(r => setTimeout(() => r({shown: before, full: document.getElementById("ap-args").textContent.length}), 50)); })()`, &fold)
		if fold.Shown > 3000 || fold.Full < 8400 {
			t.Errorf("folding: %d characters shown before opening, %d after (content is %d)", fold.Shown, fold.Full, 8400)
		}
		b.pwnedCheck()
		b.run(chromedp.Click("#ap-deny", chromedp.ByID))
		b.lastAssistant("could not")
		b.pwnedCheck()
	})

	t.Run("1 MiB result", func(t *testing.T) {
		b.send("read big.txt")
		b.lastAssistant("Done.")
		// The result is folded: the card holds a short preview until opened.
		n := b.str(`String([...document.querySelectorAll("li.msg.tool")].pop().textContent.length)`)
		if len(n) > 4 {
			t.Errorf("the card shows %s characters before it is opened", n)
		}
		var took float64
		b.eval(`(async () => { const t0 = performance.now();
			const d = [...document.querySelectorAll("li.msg.tool")].pop().querySelector(".result details");
			d.open = true; await new Promise(r => setTimeout(r, 0));
			d.querySelector("details").open = true;
			await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
			return performance.now() - t0; })()`, &took)
		t.Logf("BENCH 1 MiB result: opened in full in %.0f ms", took)
		start := time.Now()
		b.str(`document.title`)
		if rt := time.Since(start); took > 2000 || rt > time.Second {
			t.Errorf("opening the 1 MiB result took %.0f ms, the next round trip %s", took, rt)
		}
		if got := b.str(`String([...document.querySelectorAll("li.msg.tool")].pop().textContent.length)`); len(got) < 7 {
			t.Errorf("opened result holds %s characters, want all of 1 MiB", got)
		}
		b.send("hello again")
		b.lastAssistant("hello again")
		b.pwnedCheck()
	})

	t.Run("reload keeps the history", func(t *testing.T) {
		before := b.str(`String(document.querySelectorAll("#messages > li:not(.note)").length)`)
		b.run(chromedp.Reload())
		b.wait(`document.body.dataset.ready === "1"`)
		after := b.str(`String(document.querySelectorAll("#messages > li").length)`)
		if before != after || before == "0" {
			t.Errorf("messages before the reload %s, after %s", before, after)
		}
		if got := b.str(`document.getElementById("messages").textContent`); !strings.Contains(got, "Hello! You said hello there.") ||
			!strings.Contains(got, "User denied execution of write_file") {
			t.Errorf("history after the reload lacks the first answer or the denial")
		}
		b.pwnedCheck()
	})

	t.Run("delete", func(t *testing.T) {
		b.run(chromedp.Click("#conv-list li.current .delete", chromedp.ByQuery))
		b.wait(`document.querySelector("#conv-list li.current .delete").textContent === "Delete?"`)
		b.run(chromedp.Click("#conv-list li.current .delete", chromedp.ByQuery))
		b.wait(`document.getElementById("chat-title").textContent === "New conversation" && !document.querySelector("#conv-list li.current")`)
		var v conversationView
		s.getJSON(t, "/api/conversations/"+convID, &v)
		if v.Conversation.EndedAt == nil {
			t.Error("the conversation did not end")
		}
	})

	t.Run("360 px", func(t *testing.T) {
		m := signedIn(t, browser, s)
		m.run(chromedp.EmulateViewport(360, 740))
		m.send("write narrow.txt")
		m.dialogOpen()
		var w struct{ Doc, Dialog, Approve int }
		m.eval(`({doc: document.documentElement.scrollWidth, dialog: Math.ceil(document.getElementById("approval").getBoundingClientRect().right),
			approve: Math.ceil(document.getElementById("ap-approve").getBoundingClientRect().right)})`, &w)
		if w.Doc > 360 || w.Dialog > 360 || w.Approve > 360 {
			t.Errorf("at 360 px: page %d, dialog %d, approve button %d px wide", w.Doc, w.Dialog, w.Approve)
		}
		m.run(chromedp.Click("#ap-deny", chromedp.ByID))
		m.lastAssistant("could not")
		// The conversation list opens from the menu button.
		m.run(chromedp.Click("#menu-toggle", chromedp.ByID))
		m.wait(`getComputedStyle(document.getElementById("sidebar")).display !== "none" && document.activeElement.id === "new-conv"`)
	})
}

// TestWebApprovalTimeout: nobody answers; the dialog says it expired.
func TestWebApprovalTimeout(t *testing.T) {
	browser := newBrowser(t)
	s := agentStack(t, stackOpts{timeout: 3 * time.Second})
	b := signedIn(t, browser, s)
	b.send("write late.txt")
	b.dialogOpen()
	b.wait(`document.getElementById("ap-state").textContent.includes("Expired") && !document.getElementById("ap-close").hidden`)
	b.lastAssistant("could not")
	if _, err := os.Stat(filepath.Join(s.scratch, "late.txt")); !os.IsNotExist(err) {
		t.Errorf("late.txt exists after a timeout (%v)", err)
	}
	if card := b.str(`[...document.querySelectorAll("li.msg.tool")].pop().textContent`); !strings.Contains(card, "expired") {
		t.Errorf("card after the timeout: %q", card)
	}
	b.run(chromedp.KeyEvent(kb.Escape))
	b.wait(`!document.getElementById("approval").open`)
}

// TestWebNoProvider: without a provider, send says so and skills still run
// from the page.
func TestWebNoProvider(t *testing.T) {
	browser := newBrowser(t)
	s := newStack(t, stackOpts{})
	b := signedIn(t, browser, s)
	b.send("hi")
	b.wait(`!document.getElementById("banner").hidden && document.getElementById("banner").textContent.includes("No LLM provider") && !document.getElementById("invoke-panel").hidden`)
	if b.str(`String(document.getElementById("meter").hidden)`) != "true" {
		t.Error("the token meter shows without a provider")
	}
	b.run(chromedp.SetValue("#invoke-skill", "read_file", chromedp.ByID))
	b.run(chromedp.SetValue("#invoke-args", `{"path": "notes.txt"}`, chromedp.ByID))
	b.run(chromedp.Click("#invoke-panel button[type=submit]", chromedp.ByQuery))
	b.wait(`[...document.querySelectorAll("li.msg.tool")].some(c => c.textContent.includes("buy oat milk") && c.textContent.includes("read_file"))`)
	// A write from the page goes through the same approval dialog.
	b.run(chromedp.SetValue("#invoke-skill", "write_file", chromedp.ByID))
	b.run(chromedp.SetValue("#invoke-args", `{"path": "direct.txt", "content": "from the page"}`, chromedp.ByID))
	b.run(chromedp.Click("#invoke-panel button[type=submit]", chromedp.ByQuery))
	b.dialogOpen()
	b.run(chromedp.Click("#ap-approve", chromedp.ByID))
	b.wait(`[...document.querySelectorAll("li.msg.tool")].some(c => c.textContent.includes("direct.txt") && c.textContent.includes("done"))`)
	if data, err := os.ReadFile(filepath.Join(s.scratch, "direct.txt")); err != nil || string(data) != "from the page" {
		t.Errorf("direct.txt: %q, %v", data, err)
	}
}

// TestWebCredentials: the skills panel and the approval dialog say which
// credentials buddy sends for a skill, and where (names and hosts only),
// and what its network grant lets its requests be.
func TestWebCredentials(t *testing.T) {
	browser := newBrowser(t)
	s := newStack(t, stackOpts{
		config: "\n[skills.gh]\nallowed_domains = ['api.github.com']\ncredentials = ['github']\n",
		register: func(reg *skills.Registry) {
			m, err := runtime.ParseManifest([]byte("[skill]\nname = \"gh\"\nversion = \"1.0.0\"\ndescription = \"GitHub issues\"\n" +
				"permission = \"network\"\n[capabilities]\nnetwork = [\"api.github.com\"]\n[credentials.github]\nhosts = [\"api.github.com\"]\n"))
			if err != nil {
				t.Fatal(err)
			}
			wasm, err := os.ReadFile(filepath.Join("..", "..", "..", "runtime", "testdata", "echo.wasm"))
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.AddModule(t.Context(), m, wasm); err != nil {
				t.Fatal(err)
			}
		},
	})
	b := signedIn(t, browser, s)
	b.wait(`[...document.querySelectorAll("#skill-list > li")].some(li => li.textContent.includes("Credentials: github (api.github.com)"))`)
	b.send("hi") // no provider: the form to run a skill opens
	b.wait(`!document.getElementById("invoke-panel").hidden`)
	b.run(chromedp.SetValue("#invoke-skill", "gh", chromedp.ByID))
	b.run(chromedp.SetValue("#invoke-args", `{}`, chromedp.ByID))
	b.run(chromedp.Click("#invoke-panel button[type=submit]", chromedp.ByQuery))
	b.dialogOpen()
	touches := b.str(`document.getElementById("ap-touches").textContent`)
	for _, want := range []string{"buddy adds the credentials github (api.github.com) (the skill never sees them)",
		"send HTTP requests to api.github.com", "GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, with a body of up to 1 MiB"} {
		if !strings.Contains(touches, want) {
			t.Errorf("the dialog shows %q, not %q", touches, want)
		}
	}
	b.run(chromedp.Click("#ap-deny", chromedp.ByID))
	b.wait(`[...document.querySelectorAll("li.msg.tool")].some(c => c.textContent.includes("gh") && c.textContent.includes("denied"))`)
}

// TestWebHeaders: the page's files carry the CSP and framing headers, hold
// no inline script or style, and weigh what docs/BENCHMARKS.md says.
func TestWebHeaders(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOpts{})
	total := 0
	for _, path := range []string{"/", "/app.js", "/markdown.js", "/app.css", "/favicon.svg", "/favicon-alert.svg"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("Content-Security-Policy") != server.PageCSP ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, headers %v", path, resp.StatusCode, h)
		}
		if path == "/app.js" || path == "/markdown.js" || path == "/app.css" {
			total += len(body)
		}
		if path == "/" {
			for _, bad := range []*regexp.Regexp{regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`), regexp.MustCompile(`<script>`),
				regexp.MustCompile(`\son[a-z]+\s*=`), regexp.MustCompile(`\sstyle\s*=`), regexp.MustCompile(`<style`)} {
				if bad.Match(body) {
					t.Errorf("index.html has inline code matching %s", bad)
				}
			}
		}
		if strings.HasSuffix(path, ".js") && (strings.Contains(string(body), "innerHTML") || strings.Contains(string(body), "eval(")) {
			t.Errorf("%s uses innerHTML or eval", path)
		}
	}
	const want = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	if server.PageCSP != want {
		t.Errorf("CSP %q", server.PageCSP)
	}
	if total > 150<<10 {
		t.Errorf("app.js + markdown.js + app.css weigh %d bytes, over the 150 KB budget", total)
	}
	if os.Getenv("BUDDY_WEB_BENCH") != "" {
		t.Logf("BENCH page weight: app.js + markdown.js + app.css = %d bytes", total)
	}
	// The files need no token (they hold no data) but the API still does.
	if status, _ := s.request(t, http.MethodGet, "/api/skills", nil, http.Header{}); status != http.StatusUnauthorized {
		t.Errorf("GET /api/skills without a token: %d", status)
	}
}

// TestWebPerformance: time to interactive, and a 500-message conversation
// rendered and scrolled without stalls (figures in docs/BENCHMARKS.md).
func TestWebPerformance(t *testing.T) {
	browser := newBrowser(t)
	s := newStack(t, stackOpts{})
	ctx := t.Context()
	conv := "c_00000000000000aa"
	now := time.Now().UTC()
	if err := s.st.CreateConversation(ctx, store.Conversation{ID: conv, Title: "500 messages", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	// Ten writers share the store's group commits; the order of the pairs
	// does not matter here.
	var wg sync.WaitGroup
	errc := make(chan error, 10)
	for w := range 10 {
		wg.Go(func() {
			for i := w; i < 250; i += 10 {
				if _, err := s.st.AppendMessage(ctx, store.Message{Conversation: conv, Role: "user", Text: fmt.Sprintf("Question %d: what is in notes/%d.txt?", i, i)}); err != nil {
					errc <- err
					return
				}
				text := fmt.Sprintf("Answer %d. It says **buy oat milk** and a list:\n\n- item one\n- item `two`\n- [a link](https://example.com/%d)\n\n```\nline 1\nline 2\n```\n\nThat is all.", i, i)
				if _, err := s.st.AppendMessage(ctx, store.Message{Conversation: conv, Role: "assistant", Text: text}); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	b := newTab(t, browser)
	b.open(s.url + "/#token=" + testToken)
	// Time to interactive: a fresh load, signed in by the cookie.
	b.open(s.url + "/?tti")
	var tti struct{ Ready, DCL float64 }
	b.eval(`({ready: Number(document.body.dataset.readyMs), dcl: performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd})`, &tti)
	// The 500 messages, loaded with the page.
	b.open(s.url + "/?big#c=" + conv)
	b.wait(`document.querySelectorAll("#messages > li").length === 500`)
	var open struct{ Open, Render, Ready float64 }
	b.eval(`({open: Number(document.body.dataset.openMs), render: Number(document.body.dataset.renderMs), ready: Number(document.body.dataset.readyMs)})`, &open)
	var scroll struct {
		Frames, Median, P95, Max, Long float64
	}
	b.eval(`(async () => {
		const long = []; new PerformanceObserver(l => { for (const e of l.getEntries()) long.push(e.duration); }).observe({type: "longtask"});
		const box = document.getElementById("messages"); box.scrollTop = 0;
		await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
		const gaps = []; let last = performance.now();
		for (let y = 0; y <= box.scrollHeight; y += 400) {
			box.scrollTop = y;
			await new Promise(r => requestAnimationFrame(r));
			const t = performance.now(); gaps.push(t - last); last = t;
		}
		await new Promise(r => setTimeout(r, 100));
		gaps.sort((a, b) => a - b);
		const q = (p) => gaps[Math.min(gaps.length - 1, Math.floor(p * gaps.length))];
		return {frames: gaps.length, median: q(0.5), p95: q(0.95), max: gaps[gaps.length - 1], long: long.length ? Math.max(...long) : 0};
	})()`, &scroll)
	var load string
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(data))[:1], "")
	}
	t.Logf("BENCH time to interactive: ready at %.0f ms after navigation start (DOMContentLoaded %.0f ms)", tti.Ready, tti.DCL)
	t.Logf("BENCH 500 messages: page ready at %.0f ms; opening took %.0f ms (fetch + render), rendering alone %.0f ms", open.Ready, open.Open, open.Render)
	t.Logf("BENCH 500 messages scrolled top to bottom, 400 px a frame: %.0f frames, frame gap median %.1f ms, p95 %.1f ms, max %.1f ms; longest task %.0f ms (load average %s)",
		scroll.Frames, scroll.Median, scroll.P95, scroll.Max, scroll.Long, load)
	if tti.Ready <= 0 || tti.Ready > 5000 {
		t.Errorf("time to interactive %.0f ms", tti.Ready)
	}
	if open.Render <= 0 || open.Render > 3000 {
		t.Errorf("rendering 500 messages took %.0f ms", open.Render)
	}
	// A stall is a frame that keeps the page still for a quarter second; the
	// machine is shared, so single frames may be late, but not one in twenty.
	if scroll.Frames < 50 || scroll.P95 > 250 {
		t.Errorf("scrolling: %.0f frames, p95 frame gap %.1f ms", scroll.Frames, scroll.P95)
	}
}
