package channels_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/channels"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/internal/testkit/syncbuf"
	"github.com/buddy-run/buddy/runtime"
)

const pageToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// waitFor bounds every wait for something to happen: generous for -race on
// two shared cores, never reached by a passing test.
const waitFor = 60 * time.Second

// adapter is the real Telegram adapter (the built-in's wasm), loaded once
// for the package's tests.
var adapter = sync.OnceValues(func() (*skills.Adapter, error) {
	dir, err := os.MkdirTemp("", "buddy-channels-test-")
	if err != nil {
		return nil, err
	}
	rt, err := runtime.New(context.Background(), runtime.Options{CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		return nil, err
	}
	return skills.LoadBuiltinAdapter(context.Background(), rt, "telegram")
})

// recording wraps the adapter and keeps every input it was given, to show
// that none carries the credential.
type recording struct {
	a      channels.Adapter
	mu     sync.Mutex
	inputs []string
}

func (r *recording) Parse(ctx context.Context, in []byte) ([]byte, error) {
	r.mu.Lock()
	r.inputs = append(r.inputs, string(in))
	r.mu.Unlock()
	return r.a.Parse(ctx, in)
}

func (r *recording) Render(ctx context.Context, in []byte) ([]byte, error) {
	r.mu.Lock()
	r.inputs = append(r.inputs, string(in))
	r.mu.Unlock()
	return r.a.Render(ctx, in)
}

// fakeClock is a Clock that moves only when a test says so.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	asked  []time.Duration // every timer's duration, in order
}

type fakeTimer struct {
	at   time.Time
	d    time.Duration
	ch   chan time.Time
	done bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Timer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), d: d, ch: make(chan time.Time, 1)}
	c.asked = append(c.asked, d)
	if d <= 0 {
		t.done = true
		t.ch <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	return t.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.done
		t.done = true
		return was
	}
}

// Advance moves the clock and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.done:
		case !t.at.After(c.now):
			t.done = true
			t.ch <- c.now
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

// pending reports the durations of the timers running now.
func (c *fakeClock) pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, t := range c.timers {
		if !t.done {
			out = append(out, t.d)
		}
	}
	return out
}

// echoAgent answers "echo: TEXT" in a few deltas; it may ask for approval
// first (ask), and may wait before answering (gate).
type echoAgent struct {
	mu     sync.Mutex
	turns  map[string][]string // conversation → texts, in order
	ask    func(ctx context.Context, conversation, text string) (bool, error)
	gate   chan struct{} // when set, a turn waits for a value (or its context)
	early  string        // streamed before waiting at the gate
	deltas int           // the answer's deltas (default 3)
	pace   time.Duration // between two deltas (a model streams)
	reply  func(text string) string
	calls  int
}

func newEchoAgent() *echoAgent { return &echoAgent{turns: map[string][]string{}} }

func (a *echoAgent) Turn(ctx context.Context, conversation, text string, sink agent.Sink) agent.Outcome {
	a.mu.Lock()
	a.turns[conversation] = append(a.turns[conversation], text)
	a.calls++
	ask, gate, reply, early, deltas, pace := a.ask, a.gate, a.reply, a.early, a.deltas, a.pace
	a.mu.Unlock()
	if early != "" {
		sink.Delta(early)
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return agent.Outcome{Reason: agent.ReasonCanceled}
		}
	}
	answer := "echo: " + text
	if reply != nil {
		answer = reply(text)
	}
	if ask != nil {
		ok, err := ask(ctx, conversation, text)
		switch {
		case err != nil:
			answer = "not run: " + err.Error()
		case ok:
			answer = "approved: " + text
		default:
			answer = "denied: " + text
		}
	}
	if ctx.Err() != nil {
		return agent.Outcome{Reason: agent.ReasonCanceled}
	}
	// A few deltas, then the message.
	if deltas == 0 {
		deltas = 3
	}
	n := max(1, len(answer)/deltas)
	for i := 0; i < len(answer); i += n {
		j := min(i+n, len(answer))
		for j < len(answer) && !utf8.RuneStart(answer[j]) {
			j++
		}
		sink.Delta(answer[i:j])
		n = max(n, j-i)
		time.Sleep(pace)
	}
	sink.Message(string(agent.RoleAssistant), answer)
	return agent.Outcome{Text: answer, Reason: agent.ReasonFinal}
}

func (a *echoAgent) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// rig is a channel host polling the fake Bot API, with buddy serve's real
// page (server) in front of it and a fake agent.
type rig struct {
	t      testing.TB
	bot    *fakeBot
	st     *store.Store
	db     string
	host   *channels.Host
	agent  *echoAgent
	srv    *server.Server
	hs     *httptest.Server
	clock  channels.Clock
	rec    *recording
	logs   *syncbuf.Buffer
	cfg    channels.Config
	opts   channels.Options
	stop   context.CancelFunc
	done   chan struct{}
	closed bool
}

type rigOpts struct {
	policy      string
	allowFrom   []int64
	clock       channels.Clock
	dbPath      string
	bot         *fakeBot
	agent       *echoAgent
	maxResponse int64
	edit        time.Duration
	pollTimeout time.Duration
	noStart     bool
	jitter      float64 // the back-off's random number (default 0.5)
	credential  string  // default botToken
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	a, err := adapter()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, bot: o.bot, agent: o.agent, clock: o.clock, logs: &syncbuf.Buffer{}, rec: &recording{a: a}}
	if r.bot == nil {
		r.bot = newFakeBot(t)
	}
	if r.agent == nil {
		r.agent = newEchoAgent()
	}
	r.db = o.dbPath
	if r.db == "" {
		r.db = filepath.Join(t.TempDir(), "buddy.db")
	}
	r.st, err = store.Open(t.Context(), r.db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o.policy == "" {
		o.policy = config.DMPolicyPairing
	}
	if o.pollTimeout == 0 {
		o.pollTimeout = 5 * time.Second
	}
	edit := o.edit
	if edit == 0 {
		edit = time.Millisecond
	}
	r.opts = channels.Options{Store: r.st, Clock: o.clock, Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		SendRate: -1, EditInterval: edit, MaxResponseBytes: o.maxResponse, Rand: func() float64 { return 0.5 }}
	if o.jitter != 0 {
		r.opts.Rand = func() float64 { return o.jitter }
	}
	r.host = channels.New(r.opts)
	r.cfg = channels.Config{Name: "telegram", APIBase: r.bot.url(), DMPolicy: o.policy, AllowFrom: o.allowFrom,
		PollTimeout: o.pollTimeout, Credential: []byte(botToken), Adapter: r.rec}
	if o.credential != "" {
		r.cfg.Credential = []byte(o.credential)
	}
	if err := r.host.Add(t.Context(), r.cfg); err != nil {
		t.Fatal(err)
	}
	r.srv, err = server.New(server.Options{Token: pageToken, Store: r.st,
		NewGate: func(a approval.Asker) server.Gate { return approval.NewGate(a) },
		NewChannels: func(host server.ChannelHost) http.Handler {
			r.host.Attach(host, r.agent)
			return r.host.Handler()
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.hs = httptest.NewServer(r.srv.Handler())
	t.Cleanup(func() {
		r.shutdown()
		if t.Failed() || os.Getenv("BUDDY_TEST_LOG") != "" {
			t.Logf("channel log:\n%s", r.logs)
		}
	})
	if !o.noStart {
		r.start()
	}
	return r
}

func (r *rig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		r.host.Run(ctx)
	}()
}

// shutdown stops everything (once): the host, the page, the store.
func (r *rig) shutdown() {
	if r.closed {
		return
	}
	r.closed = true
	r.close()
	r.hs.Close()
	r.srv.Close(context.Background())
	r.st.Close(context.Background())
}

// close stops the host as buddy serve does.
func (r *rig) close() {
	if r.stop == nil {
		return
	}
	r.stop()
	<-r.done
	if err := r.host.Close(context.Background()); err != nil {
		r.t.Error(err)
	}
	r.stop = nil
}

// advanceUntil moves the fake clock a second at a time until cond holds.
func (r *rig) advanceUntil(clk *fakeClock, what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		clk.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
}

// eventually waits for cond (real time).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitTexts waits until chat shows want (the messages' texts, in order).
func (r *rig) waitTexts(chat int64, want ...string) {
	r.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		got := r.bot.texts(chat)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("chat %d shows %q, want %q", chat, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pair pairs a user directly in the store (as `buddy pair approve` does).
func (r *rig) pair(user int64) {
	r.t.Helper()
	now := time.Now()
	code := channels.NewCode()
	if _, _, err := r.st.RequestPairing(r.t.Context(), store.Pairing{Channel: "telegram", User: fmt.Sprint(user), Chat: fmt.Sprint(user),
		Name: fmt.Sprintf("U%d", user), Code: code, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, 1000); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.st.ApprovePairing(r.t.Context(), code, now); err != nil {
		r.t.Fatal(err)
	}
}

// api calls buddy serve's API with the token.
func (r *rig) api(method, path string, body any, out any) int {
	r.t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, r.hs.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+pageToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// status is the channel's GET /api/channels entry.
func (r *rig) status() map[string]any {
	var out struct{ Channels []map[string]any }
	if code := r.api("GET", "/api/channels", nil, &out); code != 200 || len(out.Channels) != 1 {
		r.t.Fatalf("GET /api/channels: %d %+v", code, out)
	}
	return out.Channels[0]
}

// inboxStates counts the channel's stored updates by state.
func (r *rig) inboxStates() map[string]int {
	items, err := r.st.Inbox(r.t.Context(), "telegram", 100000)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]int{}
	for _, it := range items {
		out[it.State]++
	}
	return out
}

// noToken checks that the credential reached nothing but the URL path: not
// the adapter, not a body, not the log.
func (r *rig) noToken() {
	r.t.Helper()
	r.rec.mu.Lock()
	for _, in := range r.rec.inputs {
		if strings.Contains(in, botToken) || strings.Contains(in, "AAHfakeTOKEN") {
			r.t.Errorf("the adapter was given the token: %s", clip(in))
		}
	}
	r.rec.mu.Unlock()
	if strings.Contains(r.logs.String(), "AAHfakeTOKEN") {
		r.t.Errorf("the log holds the token")
	}
	r.bot.mu.Lock()
	defer r.bot.mu.Unlock()
	for _, h := range r.bot.tokenHit {
		r.t.Errorf("the token was sent outside the path: %s", clip(h))
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// askingAgent's ask raises an approval question through the host's Asker,
// as the channels' gate does: a write_file call whose arguments are args.
func askVia(h *channels.Host, timeout time.Duration) func(ctx context.Context, conversation, text string) (bool, error) {
	return func(ctx context.Context, conversation, text string) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		args := json.RawMessage(fmt.Sprintf(`{"path":"notes/<%s>.txt","content":"*bold* & more"}`, text))
		req := approval.Request{Conversation: conversation, CallID: "call_1", Skill: "write_file", Permission: catalog.Mutating,
			Arguments: args, ArgumentsHash: catalog.ArgumentsHash(args), Expires: time.Now().Add(timeout),
			Touches: []string{"write files in /tmp/notes"}}
		return h.Ask(ctx, req)
	}
}

func sortedKeys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
