package server_test

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/audit"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// frameWait bounds every wait for a frame: generous for -race on two
// shared cores, never reached by a passing test.
const frameWait = 45 * time.Second

// cacheDir is one runtime cache shared by the package's tests, so each
// stack does not recompile the built-ins.
var cacheDir = sync.OnceValue(func() string {
	d, err := os.MkdirTemp("", "buddy-server-test-cache-")
	if err != nil {
		panic(err)
	}
	if err := os.Chmod(d, 0o700); err != nil {
		panic(err)
	}
	return d
})

func TestMain(m *testing.M) {
	code := m.Run()
	os.RemoveAll(cacheDir())
	os.Exit(code)
}

// stackOpts shape a test stack.
type stackOpts struct {
	writeApproval string        // write_file's approval line value, "" = default
	timeout       time.Duration // the gate's approval timeout, 0 = frameWait*2
	fetchDomains  []string      // fetch_url's allowed_domains; nil = not granted
	dbPath        string        // "" = a new database
	server        func(*server.Options)
	config        string                 // more of buddy.toml, after the built-ins' sections
	register      func(*skills.Registry) // adds skills to the registry before it is served
}

// stack is the real server: runtime, registry with read_file/write_file
// (and fetch_url when granted), SQLite store, approval gate, served on
// loopback.
type stack struct {
	t             *testing.T
	srv           *server.Server
	hs            *httptest.Server
	st            *store.Store
	docs, scratch string
	live          *skills.Live // the catalog the gate wraps
	url           string       // http://127.0.0.1:port
	host          string       // 127.0.0.1:port
}

func tomlList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = "'" + s + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func newStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	s := &stack{t: t, docs: t.TempDir(), scratch: t.TempDir()}
	if err := os.WriteFile(filepath.Join(s.docs, "notes.txt"), []byte("buy oat milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("[skills.read_file]\nallowed_directories = %s\n\n[skills.write_file]\nallowed_directories = %s\n",
		tomlList([]string{s.docs}), tomlList([]string{s.scratch}))
	if o.writeApproval != "" {
		text += fmt.Sprintf("approval = %q\n", o.writeApproval)
	}
	if o.fetchDomains != nil {
		text += fmt.Sprintf("\n[skills.fetch_url]\nallowed_domains = %s\n", tomlList(o.fetchDomains))
	}
	text += o.config
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", text, err)
	}
	rt, err := runtime.New(t.Context(), runtime.Options{CacheDir: cacheDir(), Prepared: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	dbPath := o.dbPath
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "buddy.db")
	}
	st, err := store.Open(t.Context(), dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.st = st
	t.Cleanup(func() { st.Close(context.Background()) })
	// A server killed with pending approvals left them in the database; cmd
	// serve expires them before it serves, and so does the test stack.
	if _, err := st.ExpirePendingApprovals(t.Context(), time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	reg, err := skills.New(t.Context(), skills.Options{Runtime: rt, Config: cfg, Store: st, Deps: hostfns.Deps{KV: st, Memories: st}})
	if err != nil {
		t.Fatal(err)
	}
	if o.register != nil {
		o.register(reg)
	}
	live := skills.NewLive(reg)
	s.live = live
	t.Cleanup(func() { _ = live.Close(context.Background()) })
	timeout := o.timeout
	if timeout == 0 {
		timeout = 2 * frameWait
	}
	opts := server.Options{
		Token: testToken,
		Store: st,
		NewGate: func(a approval.Asker) server.Gate {
			return approval.New(live, approval.Options{Asker: a, Settings: approval.Fixed(approval.Settings{Timeout: timeout}), Record: audit.Recorder(st, nil)})
		},
	}
	if o.server != nil {
		o.server(&opts)
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = srv
	s.hs = httptest.NewServer(srv.Handler())
	s.url = s.hs.URL
	s.host = strings.TrimPrefix(s.url, "http://")
	// Cleanups run last-in first-out: the server closes (calls canceled,
	// questions expired) before the registry, runtime and store.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.hs.Close()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("closing the server: %v", err)
		}
	})
	return s
}

// wsURL is the WebSocket address of the stack.
func (s *stack) wsURL() string { return "ws://" + s.host + "/api/ws" }

func authHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + testToken}}
}

// client is a WebSocket client whose frames are read in the background.
type client struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan frame
	closed chan struct{} // closed when the reader stops
	err    error         // the reader's last error, set before closed
}

// frame is one server frame, decoded loosely.
type frame map[string]any

func (f frame) str(k string) string {
	s, _ := f[k].(string)
	return s
}

func (f frame) typ() string { return f.str("type") }

// dial connects with the token.
func (s *stack) dial(t *testing.T) *client {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.DialContext(t.Context(), s.wsURL(), authHeader())
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	return newClient(t, ws)
}

func newClient(t *testing.T, ws *websocket.Conn) *client {
	c := &client{t: t, ws: ws, frames: make(chan frame, 1024), closed: make(chan struct{})}
	go func() {
		defer close(c.closed)
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				c.err = err
				return
			}
			var f frame
			if err := json.Unmarshal(data, &f); err != nil {
				c.err = fmt.Errorf("server frame %q is not a JSON object: %w", data, err)
				return
			}
			c.frames <- f
		}
	}()
	t.Cleanup(func() { ws.Close() })
	return c
}

// send writes a frame: a string or []byte as is, anything else as JSON.
func (c *client) send(v any) {
	c.t.Helper()
	var data []byte
	switch v := v.(type) {
	case string:
		data = []byte(v)
	case []byte:
		data = v
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		c.t.Fatalf("writing a frame: %v", err)
	}
}

// next returns the next frame.
func (c *client) next() frame {
	c.t.Helper()
	return c.nextWithin(frameWait)
}

// expect returns the next frame, failing unless it has type typ.
func (c *client) expect(typ string) frame {
	c.t.Helper()
	f := c.next()
	if f.typ() != typ {
		c.t.Fatalf("got frame %v, want type %q", f, typ)
	}
	return f
}

// quiet fails if a frame arrives within d.
func (c *client) quiet(d time.Duration) {
	c.t.Helper()
	select {
	case f := <-c.frames:
		c.t.Fatalf("unexpected frame %v", f)
	case <-time.After(d):
	}
}

// invoke sends an invoke frame; conv "" creates a conversation.
func (c *client) invoke(conv, skill, args string) {
	c.t.Helper()
	f := map[string]any{"type": "invoke", "skill": skill, "arguments": json.RawMessage(args)}
	if conv != "" {
		f["conversation_id"] = conv
	}
	c.send(f)
}

// invokeNew invokes in a new conversation and returns its id and the
// tool_call frame.
func (c *client) invokeNew(skill, args string) (string, frame) {
	c.t.Helper()
	c.invoke("", skill, args)
	conv := c.expect("conversation").str("conversation_id")
	if conv == "" {
		c.t.Fatal("conversation frame without conversation_id")
	}
	tc := c.expect("tool_call")
	if tc.str("conversation_id") != conv || tc.str("skill") != skill {
		c.t.Fatalf("tool_call %v, want conversation %s skill %s", tc, conv, skill)
	}
	return conv, tc
}

// request does an HTTP request against the stack with the token and
// returns the status and the body.
func (s *stack) request(t *testing.T, method, path string, body any, hdr http.Header) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if hdr == nil {
		hdr = authHeader()
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if host := hdr.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// getJSON does an authenticated GET and decodes a 200 answer.
func (s *stack) getJSON(t *testing.T, path string, out any) {
	t.Helper()
	status, data := s.request(t, http.MethodGet, path, nil, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, data)
	}
}

// apiError decodes {"error":{"kind","detail"}}, failing on any other shape.
func apiError(t *testing.T, data []byte) (kind, detail string) {
	t.Helper()
	var body struct {
		Error *struct {
			Kind   *string `json:"kind"`
			Detail *string `json:"detail"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error == nil || body.Error.Kind == nil || body.Error.Detail == nil {
		t.Fatalf("error body %s is not {\"error\":{\"kind\",\"detail\"}} (%v)", data, err)
	}
	return *body.Error.Kind, *body.Error.Detail
}

// conversationView is GET /api/conversations/{id}.
type conversationView struct {
	Conversation struct {
		ID      string     `json:"id"`
		EndedAt *time.Time `json:"ended_at"`
	} `json:"conversation"`
	Messages []struct {
		Role      string          `json:"role"`
		CallID    string          `json:"call_id"`
		Skill     string          `json:"skill"`
		Arguments json.RawMessage `json:"arguments"`
		OK        *bool           `json:"ok"`
		Result    json.RawMessage `json:"result"`
		Error     *struct{ Kind, Detail string }
	} `json:"messages"`
	Approvals []struct {
		ID              string          `json:"id"`
		SkillName       string          `json:"skill_name"`
		PermissionLevel string          `json:"permission_level"`
		Arguments       json.RawMessage `json:"arguments"`
		Status          string          `json:"status"`
		DecidedBy       string          `json:"decided_by"`
		ModuleSHA256    string          `json:"module_sha256"`
	} `json:"approvals"`
}

func (s *stack) conversation(t *testing.T, id string) conversationView {
	t.Helper()
	var v conversationView
	s.getJSON(t, "/api/conversations/"+id, &v)
	return v
}

// approveHTTP posts an answer and returns the status and body.
func (s *stack) approveHTTP(t *testing.T, conv, id string, approved bool) (int, []byte) {
	t.Helper()
	return s.request(t, http.MethodPost, "/api/chat/"+conv+"/approve",
		map[string]any{"approval_id": id, "approved": approved}, nil)
}
