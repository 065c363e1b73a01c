//go:build unix

package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// stop ends a served buddy with SIGINT and waits for it.
func (sv *served) stop(t *testing.T) {
	t.Helper()
	sv.signal(t, os.Interrupt)
	select {
	case <-sv.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("buddy serve did not stop: %s", sv.stderr)
	}
}

// invokeIn sends an invoke frame in a conversation ("" = a new one).
func (c *wsConn) invokeIn(conv, skill string, args any) {
	c.t.Helper()
	f := map[string]any{"type": "invoke", "skill": skill, "arguments": args}
	if conv != "" {
		f["conversation_id"] = conv
	}
	c.send(f)
}

// answer answers an approval request.
func (c *wsConn) answer(req frame, approved bool) {
	c.t.Helper()
	c.send(map[string]any{"type": "approve", "approval_id": req.str("id"), "approved": approved})
}

// errorKind is the error kind of a tool_result ("" when it is ok).
func errorKind(res frame) string {
	e, _ := res["error"].(map[string]any)
	k, _ := e["kind"].(string)
	return k
}

// TestServeUpgradeWhileAsked: the red team's case. While the question about
// a mutating skill v1.0.1 is open, `buddy skill install --upgrade --yes`
// commits v1.0.2 (another module); the user approves the question they saw.
// v1.0.2 does not run under that answer: a second approval_request names the
// new module and says why; denied, nothing runs, and the audit rows carry
// the sha256 of each module asked about.
func TestServeUpgradeWhileAsked(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	man := func(version string) string {
		return write(t, filepath.Join(s.dir, "mut-"+version, "skill.toml"), `[skill]
name = "mut"
version = "`+version+`"
description = "A mutating skill."
author = "tests"
permission = "mutating"
`)
	}
	s.run(t, "skill", "install", testdata(t, "echo.wasm"), "--manifest", man("1.0.1")).ok(t)
	sv := startServe(t, s)
	c := sv.mustDial(t)
	c.invoke("mut", map[string]any{"x": "in"})
	first, _ := c.until("approval_request")
	if first.str("version") != "1.0.1" || len(first.str("module_sha256")) != 64 {
		t.Fatalf("the question does not name the module: %v", first)
	}
	s.run(t, "skill", "install", testdata(t, "counter.wasm"), "--manifest", man("1.0.2"), "--upgrade", "--yes").ok(t)
	c.answer(first, true)
	second, between := c.until("approval_request")
	for _, f := range between {
		if f.str("type") == "tool_result" {
			t.Fatalf("the upgraded skill ran under the old answer: %v", f)
		}
	}
	if second.str("version") != "1.0.2" || second.str("module_sha256") == first.str("module_sha256") ||
		!strings.Contains(second.str("reason"), "module of mut changed") {
		t.Fatalf("second question = %v", second)
	}
	c.answer(second, false)
	res, _ := c.until("tool_result")
	if errorKind(res) != string(errs.KindDenied) {
		t.Fatalf("tool_result = %v, want denied", res)
	}
	sv.stop(t)
	st := openStore(t, s)
	rows, err := st.Audit(t.Context(), first.str("conversation_id"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, r := range rows {
		sums = append(sums, r.Kind+":"+r.ModuleSHA256)
	}
	if len(rows) != 2 || rows[0].ModuleSHA256 != second.str("module_sha256") || rows[1].Outcome != string(errs.KindDenied) {
		t.Fatalf("audit rows = %v; want the approval and the invocation, with the module last asked about", sums)
	}
	appr, err := st.GetApproval(t.Context(), first.str("id"))
	if err != nil || appr.ModuleSHA256 != first.str("module_sha256") {
		t.Fatalf("stored approval %+v, %v: want the first module's sha256", appr, err)
	}
}

// TestServeStateAfterRestart: what a conversation did survives a restart
// of buddy serve: a trusted fetch_url after a private read is asked (and
// denied, nothing fetched), a "once" approval still holds, and a SKILL.md
// skill loaded before the restart still binds its conversation.
func TestServeStateAfterRestart(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	files := filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "secret.txt"), "the private data")
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), `[skills.read_file]
allowed_directories = [`+q(files)+`]

[skills.write_file]
allowed_directories = [`+q(files)+`]
approval = "once"

[skills.fetch_url]
allowed_domains = ["example.com"]
approval = "trust"

[approval]
timeout = "30s"
`)
	guide := filepath.Join(s.dir, "md-notes")
	write(t, filepath.Join(guide, "SKILL.md"), "---\nname: md-notes\ndescription: Notes in Markdown.\npermissions:\n  fs:\n    read: [\"**/*.md\"]\n---\nRead only Markdown.\n")
	s.run(t, "skill", "add", guide, "--config", cfg).ok(t)

	sv := startServe(t, s, "--config", cfg)
	c := sv.mustDial(t)
	c.invoke("read_file", map[string]any{"path": "secret.txt"})
	conv, _ := c.until("conversation")
	a := conv.str("conversation_id")
	if res, _ := c.until("tool_result"); res["ok"] != true {
		t.Fatalf("read: %v", res)
	}
	c.invokeIn(a, "write_file", map[string]any{"path": "out.txt", "content": "1"})
	req, _ := c.until("approval_request")
	c.answer(req, true)
	if res, _ := c.until("tool_result"); res["ok"] != true {
		t.Fatalf("write: %v", res)
	}
	c.invoke("md-notes", map[string]any{})
	conv, _ = c.until("conversation")
	b := conv.str("conversation_id")
	if res, _ := c.until("tool_result"); res["ok"] != true {
		t.Fatalf("loading md-notes: %v", res)
	}
	sv.stop(t)

	sv = startServe(t, s, "--config", cfg)
	c = sv.mustDial(t)
	c.invokeIn(a, "fetch_url", map[string]any{"url": "https://example.com/"})
	req, _ = c.until("approval_request")
	if !strings.Contains(req.str("reason"), "has read") || !strings.Contains(req.str("reason"), "secret.txt") {
		t.Fatalf("after a restart the trusted fetch was asked without the read as reason: %v", req)
	}
	c.answer(req, false)
	if res, _ := c.until("tool_result"); errorKind(res) != string(errs.KindDenied) {
		t.Fatalf("denied fetch: %v", res)
	}
	c.invokeIn(a, "write_file", map[string]any{"path": "out.txt", "content": "2"})
	res, before := c.until("tool_result")
	if res["ok"] != true || strings.Contains(strings.Join(types(before), ","), "approval_request") {
		t.Fatalf("a once approval was asked again after a restart: %v after %v", res, types(before))
	}
	c.invokeIn(b, "read_file", map[string]any{"path": "secret.txt"})
	if res, _ := c.until("tool_result"); errorKind(res) != string(errs.KindForbidden) {
		t.Fatalf("after a restart md-notes no longer binds its conversation: %v", res)
	}
}

// TestServeReloadApproval: SIGHUP applies [approval] to the next call (the
// question's expiry follows the new timeout; after_private_read = "ask"
// asks a trusted fetch after a read) and names the keys only a restart
// applies.
func TestServeReloadApproval(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	files := filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "a.txt"), "a")
	conf := func(timeout, after, listen string) string {
		return `[server]
listen = ` + q(listen) + `

[skills.read_file]
allowed_directories = [` + q(files) + `]

[skills.write_file]
allowed_directories = [` + q(files) + `]

[skills.fetch_url]
allowed_domains = ["example.com"]
approval = "trust"

[approval]
timeout = ` + q(timeout) + `
after_private_read = ` + q(after) + `
`
	}
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), conf("30s", "allow", "127.0.0.1:7700"))
	sv := startServe(t, s, "--config", cfg)
	c := sv.mustDial(t)
	expiresIn := func() time.Duration {
		t.Helper()
		c.invoke("write_file", map[string]any{"path": "w.txt", "content": "w"})
		req, _ := c.until("approval_request")
		at, err := time.Parse(time.RFC3339Nano, req.str("expires_at"))
		if err != nil {
			t.Fatal(err)
		}
		c.answer(req, false)
		c.until("tool_result")
		return time.Until(at)
	}
	if d := expiresIn(); d < 20*time.Second {
		t.Fatalf("before the reload the question expires in %s, want about 30s", d)
	}
	write(t, cfg, conf("300s", "ask", "127.0.0.1:7799"))
	sv.signal(t, syscall.SIGHUP)
	log := sv.waitLog(t, "configuration reloaded")
	if !strings.Contains(log, "restart_needed_for=server.listen") {
		t.Errorf("the reload did not name server.listen as needing a restart:\n%s", log)
	}
	if d := expiresIn(); d < 200*time.Second {
		t.Fatalf("after the reload the question expires in %s, want about 300s", d)
	}
	c.invoke("read_file", map[string]any{"path": "a.txt"})
	conv, _ := c.until("conversation")
	c.until("tool_result")
	c.invokeIn(conv.str("conversation_id"), "fetch_url", map[string]any{"url": "https://example.com/"})
	req, _ := c.until("approval_request")
	if !strings.Contains(req.str("reason"), "has read") {
		t.Fatalf("after_private_read = ask did not apply after the reload: %v", req)
	}
	c.answer(req, false)
	c.until("tool_result")
}

// TestServeSeesSkillMDAdded: a SKILL.md folder added while buddy serve runs
// is callable without a restart or a SIGHUP; once removed it is not_found.
func TestServeSeesSkillMDAdded(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	sv := startServe(t, s)
	c := sv.mustDial(t)
	dir := filepath.Join(s.dir, "greet")
	write(t, filepath.Join(dir, "SKILL.md"), "---\nname: greet\ntype: template\nparameters:\n  who: the name\n---\n```template\nHello {{.who}}!\n```\n")
	// call invokes greet until the answer is what want says (the folder is
	// compared at most every 250 ms): "ok" or an error kind.
	call := func(want string) frame {
		t.Helper()
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			c.invoke("greet", map[string]any{"who": "Ann"})
			var f frame
			for {
				var err error
				if f, err = c.next(20 * time.Second); err != nil {
					t.Fatal(err)
				}
				if typ := f.str("type"); typ == "tool_result" || typ == "error" {
					break
				}
			}
			got := f.str("kind")
			if f.str("type") == "tool_result" {
				got = "ok"
				if f["ok"] != true {
					got = errorKind(f)
				}
			}
			if got == want {
				return f
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("greet never answered %s: last %v", want, f)
			}
		}
	}
	call(string(errs.KindNotFound))
	s.run(t, "skill", "add", dir).ok(t)
	if res := call("ok"); res["result"] != "Hello Ann!\n" {
		t.Fatalf("after skill add: %v", res)
	}
	s.run(t, "skill", "remove", "greet").ok(t)
	call(string(errs.KindNotFound))
}

// TestMCPTaintAcrossSessions: an MCP client's model keeps what it read
// across sessions, so buddy does too: a private read in one `buddy mcp`
// process makes a trusted fetch_url in the next one ask (and, with no form
// to ask in, be denied) until `buddy mcp forget`.
func TestMCPTaintAcrossSessions(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	files := filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "secret.txt"), "the private data")
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), `[skills.read_file]
allowed_directories = [`+q(files)+`]

[skills.fetch_url]
allowed_domains = ["buddy-test.invalid"]
approval = "trust"
`)
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		cmd := exec.Command(buddyBin, "mcp", "--config", cfg)
		cmd.Env, cmd.Dir = s.env(), s.work
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "taint-test", Version: "1"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(r *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	fetch := map[string]any{"url": "https://buddy-test.invalid/"}
	if r := call("fetch_url", fetch); strings.HasPrefix(text(r), "denied") {
		t.Fatalf("a trusted fetch before any read was denied: %s", text(r))
	}
	if r := call("read_file", map[string]any{"path": "secret.txt"}); r.IsError {
		t.Fatalf("read: %s", text(r))
	}
	if r := call("fetch_url", fetch); !r.IsError || !strings.HasPrefix(text(r), "denied") {
		t.Fatalf("a trusted fetch in a new session after a read = %s, want denied (asked, no form)", text(r))
	}
	if out := s.run(t, "mcp", "forget", "--config", cfg).ok(t); !strings.Contains(out, "1 private reads") {
		t.Fatalf("buddy mcp forget: %s", out)
	}
	if r := call("fetch_url", fetch); strings.HasPrefix(text(r), "denied") {
		t.Fatalf("after buddy mcp forget the fetch is still asked: %s", text(r))
	}
}

// TestEveryFrontEndThroughOneGate: every way into a skill — the CLI, the
// WebSocket, the agent's tool calls, a SKILL.md template skill, MCP on
// stdio and MCP over HTTP on buddy serve — goes through the one gate: each
// call is audited with the module that ran, and a private read through any
// of them taints what that front end's conversation (or MCP's shared scope)
// may send out next: a trusted fetch_url is asked.
func TestEveryFrontEndThroughOneGate(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	files := filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "secret.txt"), "the private data")
	var turns atomic.Int32
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			fr := "null"
			if finish != "" {
				fr = `"` + finish + `"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fr)
		}
		if turns.Add(1)%2 == 1 {
			chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"secret.txt\"}"}}]}`, "")
			chunk(`{}`, "tool_calls")
		} else {
			chunk(`{"role":"assistant","content":"OK"}`, "")
			chunk(`{}`, "stop")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(llm.Close)
	greet := filepath.Join(s.dir, "greet")
	write(t, filepath.Join(greet, "SKILL.md"), "---\nname: greet\ntype: template\nparameters:\n  who: the name\n---\n```template\nHello {{.who}}!\n```\n")
	s.run(t, "skill", "add", greet).ok(t)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), `[skills.read_file]
allowed_directories = [`+q(files)+`]

[skills.fetch_url]
allowed_domains = ["buddy-test.invalid"]
approval = "trust"

[provider]
kind = "openai"
base_url = `+q(llm.URL+"/v1")+`
model = "m"

[mcp]
approval = "web"
`)
	secret := map[string]any{"path": "secret.txt"}
	fetch := map[string]any{"url": "https://buddy-test.invalid/"}

	// The CLI: a one-shot call (its own conversation, no taint to keep).
	s.run(t, "skill", "run", "read_file", "--input", `{"path":"secret.txt"}`, "--config", cfg).ok(t)
	s.run(t, "skill", "run", "greet", "--input", `{"who":"cli"}`, "--config", cfg).ok(t)

	sv := startServe(t, s, "--config", cfg)
	c := sv.mustDial(t)
	asked := func(conv string) {
		t.Helper()
		c.invokeIn(conv, "fetch_url", fetch)
		req, _ := c.until("approval_request")
		if !strings.Contains(req.str("reason"), "has read") {
			t.Fatalf("the trusted fetch in %s was asked without the read: %v", conv, req)
		}
		c.answer(req, false)
		c.until("tool_result")
	}
	// The WebSocket.
	c.invoke("read_file", secret)
	conv, _ := c.until("conversation")
	ws := conv.str("conversation_id")
	c.until("tool_result")
	asked(ws)
	// A SKILL.md template skill over the WebSocket.
	c.invoke("greet", map[string]any{"who": "ws"})
	c.until("tool_result")
	// The agent: a turn whose model calls read_file.
	post := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, sv.url(path), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+sv.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return out
	}
	agentConv := post("/api/conversations", `{"title":"agent"}`)["conversation_id"].(string)
	if out := post("/api/chat/"+agentConv+"/messages", `{"text":"read my secret"}`); out["reason"] != "final" {
		t.Fatalf("agent turn: %v", out)
	}
	asked(agentConv)
	// MCP over HTTP on buddy serve, then MCP on stdio: one shared scope.
	httpMCP, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: sv.url("/mcp"), HTTPClient: &http.Client{Transport: bearer{sv.token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := httpMCP.CallTool(t.Context(), &mcp.CallToolParams{Name: "read_file", Arguments: secret}); err != nil || r.IsError {
		t.Fatalf("read over /mcp: %v %v", r, err)
	}
	httpMCP.Close()
	sv.stop(t)
	cmd := exec.Command(buddyBin, "mcp", "--config", cfg)
	cmd.Env, cmd.Dir = s.env(), s.work
	stdio, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := stdio.CallTool(t.Context(), &mcp.CallToolParams{Name: "fetch_url", Arguments: fetch})
	stdio.Close()
	if err != nil || !r.IsError {
		t.Fatalf("a trusted fetch over stdio after a read over /mcp ran: %v %v", r, err)
	}

	// Every call was audited by the same gate, with the module that ran.
	st := openStore(t, s)
	rows, err := st.Audit(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	reads, sums := 0, map[string]string{}
	for _, row := range rows {
		if row.Kind != "invocation" {
			continue
		}
		if len(row.ModuleSHA256) != 64 {
			t.Errorf("audit row %d (%s) has no module sha256", row.ID, row.Skill)
		}
		if prev, ok := sums[row.Skill]; ok && prev != row.ModuleSHA256 {
			t.Errorf("%s ran as two modules: %s and %s", row.Skill, prev, row.ModuleSHA256)
		}
		sums[row.Skill] = row.ModuleSHA256
		if row.Skill == "read_file" && row.Outcome == "ok" {
			reads++
		}
	}
	if reads != 4 { // CLI, WebSocket, agent, /mcp
		t.Fatalf("%d audited reads, want 4 (one per front end): %+v", reads, rows)
	}
	if _, ok := sums["greet"]; !ok {
		t.Fatalf("the template skill was not audited: %v", sums)
	}
}

// bearer adds the token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeMCPOriginEveryMethod: /mcp checks the Origin on every method, its
// event stream (GET) included; a client without an Origin (not a browser)
// is served.
func TestServeMCPOriginEveryMethod(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	sv := startServe(t, s)
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		for _, origin := range []string{"https://evil.example", ""} {
			req, _ := http.NewRequestWithContext(t.Context(), method, sv.url("/mcp"), strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+sv.token)
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Content-Type", "application/json")
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.StatusCode == http.StatusForbidden; got != (origin != "") {
				t.Errorf("%s /mcp with Origin %q: %d", method, origin, resp.StatusCode)
			}
		}
	}
}

// TestNewUserPaths: what a new user hits first. Every command's --help
// prints its usage and flags and exits 0; a registered plugin written for
// raw text runs with --input-raw; a buddy.toml that is not UTF-8 is a config
// error with its line; JSON output ends its line.
func TestNewUserPaths(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	for _, cmd := range [][]string{
		{"serve"}, {"mcp"}, {"mcp", "forget"}, {"chat"}, {"token"}, {"audit", "list"}, {"audit", "verify"},
		{"skill", "list"}, {"skill", "info"}, {"skill", "run"}, {"skill", "install"}, {"skill", "add"},
		{"skill", "remove"}, {"skill", "init"},
	} {
		for _, flag := range []string{"--help", "-h"} {
			r := s.run(t, append(cmd, flag)...)
			name := strings.Join(cmd, " ")
			if r.code != 0 || !strings.Contains(r.stdout, "usage: buddy "+name) && !(name == "skill init" && strings.Contains(r.stdout, "buddy skill init NAME")) ||
				!strings.Contains(r.stdout, "flags:") {
				t.Errorf("buddy %s %s: exit %d\n%s", name, flag, r.code, r)
			}
		}
	}
	// count_vowels of Extism's demo, installed: raw text by name.
	man := write(t, filepath.Join(s.dir, "cv", "skill.toml"), "[skill]\nname = \"count_vowels\"\nversion = \"1.0.0\"\ndescription = \"Counts vowels.\"\nauthor = \"tests\"\npermission = \"read_only\"\nentrypoint = \"count_vowels\"\n")
	s.run(t, "skill", "install", testdata(t, "as_plugin.wasm"), "--manifest", man).ok(t)
	if r := s.run(t, "skill", "run", "count_vowels", "--input-raw", "hello world"); r.code != 0 || r.stdout != "{\"count\": 3}\n" {
		t.Errorf("count_vowels --input-raw = %q, want {\"count\": 3} and a newline", r)
	}
	if r := s.run(t, "skill", "run", "read_file", "--input-raw", "x"); r.code == 0 || !strings.Contains(r.stderr, "declares an input schema") {
		t.Errorf("--input-raw for a skill with a schema: %s", r)
	}
	bad := write(t, filepath.Join(s.dir, "bad.toml"), "[skills.read_file]\nallowed_directories = [\"/tmp/\xff\"]\n")
	if err := os.Chmod(bad, 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, "skill", "list", "--config", bad)
	if r.code != errs.ExitCode(errs.KindConfig) || !strings.Contains(r.stderr, "error: config:") || !strings.Contains(r.stderr, "line 2, column 30: not valid UTF-8") {
		t.Errorf("a buddy.toml not UTF-8: %s", r)
	}
}

// TestReservedNamesOneRule: a built-in's name and the memory built-ins'
// section are refused the same way (forbidden, builtins.Reserved's words)
// by every way a skill gets a name: install, skill run FILE.wasm, skill init.
func TestReservedNamesOneRule(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	for _, name := range []string{"read_file", "recall", "memory"} {
		man := write(t, filepath.Join(s.dir, name, "skill.toml"), "[skill]\nname = \""+name+"\"\nversion = \"1.0.0\"\ndescription = \"x\"\nauthor = \"t\"\npermission = \"read_only\"\n")
		for _, args := range [][]string{
			{"skill", "install", testdata(t, "echo.wasm"), "--manifest", man},
			{"skill", "run", testdata(t, "echo.wasm"), "--manifest", man, "--input", "{}"},
			{"skill", "init", name, "--lang", "tinygo", "--dir", filepath.Join(s.dir, "init-"+name)},
		} {
			r := s.run(t, args...)
			want := "is the name of a built-in skill, which no other skill may shadow"
			if name == "memory" {
				want = "is reserved for the memory built-ins' section"
			}
			if r.code != errs.ExitCode(errs.KindForbidden) || !strings.HasPrefix(r.stderr, "error: forbidden:") || !strings.Contains(r.stderr, want) {
				t.Errorf("buddy %s: %s", strings.Join(args[:2], " "), r)
			}
		}
	}
}
