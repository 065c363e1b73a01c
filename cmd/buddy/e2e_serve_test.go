//go:build unix

// End-to-end tests of `buddy serve` through the built binary: a real
// WebSocket client (gorilla/websocket) against a real server process, its
// token, its signals (SIGTERM, SIGHUP, SIGKILL) and the CLI changing skills
// while it runs. The server package's own tests cover the protocol in detail;
// these check what only a process can show.
package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/internal/testkit/syncbuf"
)

// served is one running `buddy serve`.
type served struct {
	cmd    *exec.Cmd
	addr   string // host:port it listens on
	token  string // from the printed page address, after '#token='
	stderr *syncbuf.Buffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startServe starts `buddy serve --listen 127.0.0.1:0 ARGS...` in the
// sandbox, reads the address and token it prints, and waits for /healthz.
func startServe(t *testing.T, s *sandbox, args ...string) *served {
	t.Helper()
	return startServeEnv(t, s, nil, args...)
}

// startServeEnv is startServe with extra environment (a provider's key).
// The server is stopped with SIGINT when the test ends (killed if it has not
// exited 15 s later), and its log is shown if the test failed.
func startServeEnv(t *testing.T, s *sandbox, extraEnv []string, args ...string) *served {
	t.Helper()
	if buddyBin == "" {
		t.Skip("-short: the end-to-end tests build and run the buddy binary")
	}
	cmd := exec.Command(buddyBin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = s.env(extraEnv...)
	cmd.Dir = s.work
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sv := &served{cmd: cmd, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = sv.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sv.err = cmd.Wait()
		close(sv.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-sv.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-sv.exited
		}
		if t.Failed() {
			t.Logf("buddy serve's log:\n%s", sv.stderr)
		}
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	deadline := time.After(30 * time.Second)
	for sv.token == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				<-sv.exited
				t.Fatalf("buddy serve exited before printing its address (%v): %s", sv.err, sv.stderr)
			}
			if a, ok := strings.CutPrefix(line, "buddy is serving on http://"); ok {
				sv.addr = strings.TrimSuffix(a, "/")
			}
			if _, frag, ok := strings.Cut(line, "/#token="); ok {
				if !strings.HasPrefix(line, "open the page: http://"+sv.addr+"/#token=") {
					t.Fatalf("page address line %q does not carry the token after '#'", line)
				}
				sv.token = frag
			}
		case <-deadline:
			t.Fatalf("buddy serve printed no address within 30s: %s", sv.stderr)
		}
	}
	sv.waitHealthy(t)
	return sv
}

// url is the server's address for path.
func (sv *served) url(path string) string { return "http://" + sv.addr + path }

// waitHealthy polls GET /healthz until it answers 200.
func (sv *served) waitHealthy(t *testing.T) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(sv.url("/healthz"))
		if err == nil {
			var body struct {
				OK       bool `json:"ok"`
				Protocol int  `json:"protocol"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK && body.OK && body.Protocol == 1 {
				return
			}
		}
	}
	t.Fatalf("/healthz never answered 200 {ok:true, protocol:1}: %s", sv.stderr)
}

// signal sends sig to the server.
func (sv *served) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := sv.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits until the server's log holds want, and returns the log.
func (sv *served) waitLog(t *testing.T, want string) string {
	t.Helper()
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
		if l := sv.stderr.String(); strings.Contains(l, want) {
			return l
		}
	}
	t.Fatalf("the server never logged %q:\n%s", want, sv.stderr)
	return ""
}

// wsConn is a WebSocket client of the server.
type wsConn struct {
	t  *testing.T
	ws *websocket.Conn
}

// dial opens GET /api/ws with the token.
func (sv *served) dial(t *testing.T, token string) (*wsConn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+sv.addr+"/api/ws", h)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { ws.Close() })
	return &wsConn{t: t, ws: ws}, resp, nil
}

func (sv *served) mustDial(t *testing.T) *wsConn {
	t.Helper()
	c, _, err := sv.dial(t, sv.token)
	if err != nil {
		t.Fatalf("dialing /api/ws with the token: %v", err)
	}
	return c
}

// frame is one server frame, decoded loosely.
type frame map[string]any

func (f frame) str(k string) string { s, _ := f[k].(string); return s }

func (c *wsConn) send(v any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(v); err != nil {
		c.t.Fatalf("sending %v: %v", v, err)
	}
}

// next reads one frame within d.
func (c *wsConn) next(d time.Duration) (frame, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(d))
	var f frame
	err := c.ws.ReadJSON(&f)
	return f, err
}

// until reads frames until one of type typ arrives, failing after 20s; it
// returns that frame and the frames before it.
func (c *wsConn) until(typ string) (frame, []frame) {
	c.t.Helper()
	var seen []frame
	for start := time.Now(); time.Since(start) < 20*time.Second; {
		f, err := c.next(20 * time.Second)
		if err != nil {
			c.t.Fatalf("waiting for a %s frame: %v (frames so far: %v)", typ, err, seen)
		}
		if f.str("type") == typ {
			return f, seen
		}
		seen = append(seen, f)
	}
	c.t.Fatalf("no %s frame within 20s (frames: %v)", typ, seen)
	return nil, nil
}

// invoke sends an invoke frame in a new conversation.
func (c *wsConn) invoke(skill string, args any) {
	c.t.Helper()
	c.send(map[string]any{"type": "invoke", "skill": skill, "arguments": args})
}

// types lists the types of frames.
func types(fs []frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.str("type")
	}
	return out
}

// openStore opens the sandbox's database (the server must have stopped).
func openStore(t *testing.T, s *sandbox) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(s.dataDir(), "buddy.db"), store.Options{})
	if err != nil {
		t.Fatalf("reopening the database: %v", err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// serveConfig writes a buddy.toml granting read_file and write_file a
// directory, with write_file's approval policy, and returns its path and
// the directory.
func serveConfig(t *testing.T, s *sandbox, writeApproval string) (cfg, files string) {
	t.Helper()
	files = filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "hello.txt"), "hello over the wire")
	cfg = write(t, filepath.Join(s.dir, "buddy.toml"), writeConfig(files, writeApproval))
	return cfg, files
}

func writeConfig(files, writeApproval string) string {
	return fmt.Sprintf(`[skills.read_file]
allowed_directories = [%s]

[skills.write_file]
allowed_directories = [%s]
approval = %s

[approval]
timeout = "30s"
`, q(files), q(files), q(writeApproval))
}

// TestServeToken: the token the server prints is the one `buddy token`
// prints, kept 0600 in the data directory; only it opens the WebSocket;
// `buddy token --rotate` replaces it.
func TestServeToken(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	sv := startServe(t, s)
	if len(sv.token) != 64 {
		t.Fatalf("token %q is not 256 bits in hex", sv.token)
	}
	if got := strings.TrimSpace(s.run(t, "token").ok(t)); got != sv.token {
		t.Fatalf("buddy token = %q, the server printed %q", got, sv.token)
	}
	tokenFile := filepath.Join(s.dataDir(), "token")
	info, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %04o, want 0600", info.Mode().Perm())
	}
	if strings.Contains(sv.stderr.String(), sv.token) {
		t.Fatalf("the server logged its token:\n%s", sv.stderr)
	}

	// The upgrade without the token, or with another one, is 401.
	for _, tok := range []string{"", strings.Repeat("0", 64)} {
		if _, resp, err := sv.dial(t, tok); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("upgrade with token %q: err %v, response %v; want 401", tok, err, resp)
		}
	}
	c := sv.mustDial(t)
	c.send(map[string]any{"type": "subscribe", "conversation_id": "c_nosuch"})
	if f, _ := c.until("error"); f.str("kind") != string(errs.KindNotFound) {
		t.Fatalf("subscribe to an unknown conversation: %v", f)
	}

	rotated := strings.TrimSpace(s.run(t, "token", "--rotate").ok(t))
	if rotated == sv.token || len(rotated) != 64 {
		t.Fatalf("--rotate printed %q (old %q)", rotated, sv.token)
	}
	if got := strings.TrimSpace(s.run(t, "token").ok(t)); got != rotated {
		t.Fatalf("after --rotate, buddy token = %q, want %q", got, rotated)
	}
	if info, err := os.Stat(tokenFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("rotated token file: %v, %v", info, err)
	}
}

// TestServeInvoke: read_file over a real WebSocket: conversation, tool_call
// and tool_result, stored with its audit row; an unknown skill is an error
// frame and the connection stays up.
func TestServeInvoke(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg, _ := serveConfig(t, s, "always")
	sv := startServe(t, s, "--config", cfg)
	c := sv.mustDial(t)

	c.invoke("nosuch", map[string]any{})
	if f, _ := c.until("error"); f.str("kind") != string(errs.KindNotFound) {
		t.Fatalf("unknown skill: %v", f)
	}
	c.invoke("read_file", map[string]any{"path": "hello.txt"})
	res, before := c.until("tool_result")
	if got := types(before); strings.Join(got, ",") != "conversation,tool_call" {
		t.Fatalf("frames before tool_result: %v", got)
	}
	conv := before[0].str("conversation_id")
	if before[1].str("call_id") != res.str("call_id") || res.str("conversation_id") != conv || conv == "" {
		t.Fatalf("tool_call %v and tool_result %v do not match", before[1], res)
	}
	result, _ := res["result"].(map[string]any)
	if res["ok"] != true || res.str("skill") != "read_file" || result["content"] != "hello over the wire" {
		t.Fatalf("tool_result = %v", res)
	}

	sv.signal(t, syscall.SIGTERM)
	<-sv.exited
	st := openStore(t, s)
	audit, err := st.Audit(t.Context(), conv, 0)
	if err != nil || len(audit) != 1 || audit[0].Skill != "read_file" || audit[0].Outcome != "ok" {
		t.Fatalf("audit of %s: %+v, %v", conv, audit, err)
	}
}

// TestServeGCPolicy: buddy serve applies its collector policy
// (internal/proc/gcpolicy) and says so, unless GOGC or GOMEMLIMIT is set in its
// environment, which it then leaves in force.
func TestServeGCPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, `msg="garbage collector" gc_percent=400 memory_limit_mib=180`},
		{[]string{"GOGC=150"}, `msg="garbage collector left as GOGC and GOMEMLIMIT set it" GOGC=150 GOMEMLIMIT=""`},
		{[]string{"GOMEMLIMIT=1GiB"}, `msg="garbage collector left as GOGC and GOMEMLIMIT set it" GOGC="" GOMEMLIMIT=1GiB`},
	} {
		s := newSandbox(t)
		sv := startServeEnv(t, s, c.env)
		if log := sv.stderr.String(); !strings.Contains(log, c.want) {
			t.Errorf("environment %q: the log lacks %s:\n%s", c.env, c.want, log)
		}
	}
}

// TestServeRemoteRefused: a non-loopback --listen without allow_remote is a
// config error that names the key.
func TestServeRemoteRefused(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	for _, addr := range []string{"0.0.0.0:0", "[::]:0"} {
		d := s.run(t, "serve", "--listen", addr).fails(t, errs.KindConfig)
		if !strings.Contains(d, "allow_remote") {
			t.Errorf("--listen %s: detail %q does not name allow_remote", addr, d)
		}
	}
}

// TestServeSIGTERM: SIGTERM with an approval waiting ends the process
// promptly with exit 0, the question resolved (not left pending) and the
// database whole.
func TestServeSIGTERM(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg, files := serveConfig(t, s, "always")
	sv := startServe(t, s, "--config", cfg)
	c := sv.mustDial(t)
	c.invoke("write_file", map[string]any{"path": "out.txt", "content": "never"})
	req, _ := c.until("approval_request")
	id := req.str("id")

	start := time.Now()
	sv.signal(t, syscall.SIGTERM)
	select {
	case <-sv.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after SIGTERM:\n%s", sv.stderr)
	}
	if sv.err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", sv.err, sv.stderr)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s to stop", el)
	}
	if _, err := os.Stat(filepath.Join(files, "out.txt")); !os.IsNotExist(err) {
		t.Errorf("the unapproved write happened: %v", err)
	}
	st := openStore(t, s)
	if err := st.IntegrityCheck(t.Context()); err != nil {
		t.Fatalf("integrity_check after SIGTERM: %v", err)
	}
	a, err := st.GetApproval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.ApprovalExpired && a.Status != store.ApprovalCanceled {
		t.Fatalf("approval after SIGTERM: status %q by %q, want expired or canceled", a.Status, a.DecidedBy)
	}
	if a.DecidedAt.IsZero() {
		t.Errorf("approval %s has no decision time", id)
	}
	t.Logf("approval after SIGTERM: %s by %s", a.Status, a.DecidedBy)
}

// TestServeSIGHUP: a broken buddy.toml is reported and the old
// configuration kept; a changed grant applies to the next call.
func TestServeSIGHUP(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg, files := serveConfig(t, s, "always")
	sv := startServe(t, s, "--config", cfg)
	c := sv.mustDial(t)

	// 1. Broken file: logged, still serving under the old policy.
	write(t, cfg, "[skills.write_file\nallowed_directories = \n")
	sv.signal(t, syscall.SIGHUP)
	sv.waitLog(t, "reload failed")
	sv.waitHealthy(t)
	c.invoke("write_file", map[string]any{"path": "a.txt", "content": "a"})
	req, _ := c.until("approval_request")
	if req.str("skill_name") != "write_file" || req.str("permission_level") != "mutating" {
		t.Fatalf("approval_request = %v", req)
	}
	c.send(map[string]any{"type": "approve", "approval_id": req.str("id"), "approved": true})
	if res, _ := c.until("tool_result"); res["ok"] != true {
		t.Fatalf("approved write: %v", res)
	}

	// 2. write_file now trusted: the next call runs without a question.
	write(t, cfg, writeConfig(files, "trust"))
	sv.signal(t, syscall.SIGHUP)
	sv.waitLog(t, "configuration reloaded")
	c.invoke("write_file", map[string]any{"path": "b.txt", "content": "b"})
	res, before := c.until("tool_result")
	if res["ok"] != true {
		t.Fatalf("trusted write: %v", res)
	}
	for _, f := range before {
		if f.str("type") == "approval_request" {
			t.Fatalf("a trusted call asked: %v", before)
		}
	}
	if b, err := os.ReadFile(filepath.Join(files, "b.txt")); err != nil || string(b) != "b" {
		t.Fatalf("b.txt = %q, %v", b, err)
	}
}

// TestServeLiveInstall: a skill installed from the CLI while the server
// runs is callable without a restart; once removed it is not_found.
func TestServeLiveInstall(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	sv := startServe(t, s)
	c := sv.mustDial(t)
	greet := map[string]any{"name": "Ada"}

	c.invoke("as_greet", greet)
	if f, _ := c.until("error"); f.str("kind") != string(errs.KindNotFound) {
		t.Fatalf("before install: %v", f)
	}
	s.run(t, "skill", "install", testdata(t, "as_plugin.wasm"), "--manifest", testdata(t, filepath.Join("assemblyscript", "skill.toml"))).ok(t)
	c.invoke("as_greet", greet)
	if res, _ := c.until("tool_result"); res["ok"] != true || res["result"] != "Hello, Ada!" {
		t.Fatalf("after install: %v", res)
	}
	s.run(t, "skill", "remove", "as_greet").ok(t)
	c.invoke("as_greet", greet)
	if f, _ := c.until("error"); f.str("kind") != string(errs.KindNotFound) {
		t.Fatalf("after remove: %v", f)
	}
}

// TestServeKill9: a burst of invocations on several connections while the
// server is SIGKILLed: every tool_result a client received has its tool
// message and its audit row in the database afterwards.
func TestServeKill9(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg, _ := serveConfig(t, s, "trust")
	sv := startServe(t, s, "--config", cfg)

	type ack struct{ conv, call string }
	var (
		mu   sync.Mutex
		acks []ack
	)
	const conns, inFlight = 4, 8
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	for i := range conns {
		c := sv.mustDial(t)
		wg.Go(func() {
			sent := 0
			next := func() error {
				sent++
				return c.ws.WriteJSON(map[string]any{"type": "invoke", "skill": "write_file",
					"arguments": map[string]any{"path": fmt.Sprintf("k%d-%d.txt", i, sent), "content": strings.Repeat("x", 100)}})
			}
			for range inFlight {
				if next() != nil {
					return
				}
			}
			for {
				f, err := c.next(20 * time.Second)
				if err != nil {
					return // the server is gone
				}
				if f.str("type") == "error" {
					t.Errorf("error frame during the burst: %v", f)
					return
				}
				if f.str("type") != "tool_result" {
					continue
				}
				if f["ok"] != true {
					t.Errorf("failed call during the burst: %v", f)
					return
				}
				mu.Lock()
				acks = append(acks, ack{f.str("conversation_id"), f.str("call_id")})
				mu.Unlock()
				if ctx.Err() == nil && next() != nil {
					return
				}
			}
		})
	}
	// Kill in the middle of the burst.
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 60 {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("only %d results in 60s:\n%s", n, sv.stderr)
		}
	}
	sv.signal(t, syscall.SIGKILL)
	<-sv.exited
	wg.Wait()
	stop()

	st := openStore(t, s)
	if err := st.IntegrityCheck(t.Context()); err != nil {
		t.Fatalf("integrity_check after kill -9: %v", err)
	}
	for _, a := range acks {
		msgs, err := st.Messages(t.Context(), a.conv)
		if err != nil {
			t.Fatalf("messages of %s: %v", a.conv, err)
		}
		found := false
		for _, m := range msgs {
			found = found || (m.Role == store.RoleTool && m.CallID == a.call && m.OK)
		}
		if !found {
			t.Errorf("acknowledged call %s in %s has no tool message", a.call, a.conv)
		}
		audit, err := st.Audit(t.Context(), a.conv, 0)
		if err != nil || len(audit) == 0 || audit[0].Outcome != "ok" || audit[0].Skill != "write_file" {
			t.Errorf("acknowledged call %s in %s: audit %+v, %v", a.call, a.conv, audit, err)
		}
	}
	t.Logf("%d acknowledged results, all stored", len(acks))
}
