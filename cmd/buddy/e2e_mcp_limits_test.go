//go:build unix

package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/testkit/syncbuf"
)

// mcpLine is one JSON-RPC message read from `buddy mcp`'s stdout.
type mcpLine struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestMCPStdioKeepsServing: `buddy mcp` answers a line over [server]
// max_message_bytes (here 16 MiB and a byte, the size that used to end it
// with "error: internal") and a line that is not JSON with JSON-RPC errors,
// then serves tools/list and a call on the same stdin, and exits 0 when the
// client hangs up.
func TestMCPStdioKeepsServing(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg, files := serveConfig(t, s, "always")
	cmd := exec.CommandContext(t.Context(), buddyBin, "mcp", "--config", cfg)
	cmd.Env = s.env()
	cmd.Dir = s.work
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Lines go out from a goroutine of their own: a process that stopped
	// reading fails the test at the next answer rather than blocking it.
	lines := make(chan []byte, 8)
	go func() {
		defer stdin.Close()
		for l := range lines {
			if _, err := stdin.Write(l); err != nil {
				return
			}
		}
	}()
	send := func(line []byte) { lines <- append(line, '\n') }
	out := bufio.NewReader(stdout)
	recv := func() mcpLine {
		t.Helper()
		b, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading stdout: %v (%q); stderr:\n%s", err, b, clip(stderr.String()))
		}
		var m mcpLine
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("stdout line %q: %v", clip(string(b)), err)
		}
		return m
	}

	send([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
	if m := recv(); m.ID != 0.0 || m.Error != nil {
		t.Fatalf("initialize: %+v", m)
	}
	send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))

	huge := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"%s"}}}`, strings.Repeat("a", 16<<20))
	for _, tc := range []struct {
		name string
		line []byte
		code int
		id   any
	}{
		{"a line over 16 MiB", huge, -32600, 1.0},
		{"a line that is not JSON", []byte(`{"jsonrpc":"2.0","id":2,"method":`), -32700, nil},
		{"JSON that is not JSON-RPC", []byte(`{"id":3}`), -32600, 3.0},
	} {
		send(tc.line)
		if m := recv(); m.Error == nil || m.Error.Code != tc.code || m.ID != tc.id {
			t.Errorf("%s: answer %+v, want error %d with id %v", tc.name, m, tc.code, tc.id)
		}
	}

	send([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`))
	m := recv()
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(m.Result, &list); m.ID != 4.0 || err != nil || len(list.Tools) < 2 {
		t.Fatalf("tools/list: %+v (%v)", m, err)
	}
	send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":{"path":%q}}}`, files+"/hello.txt"))
	if m := recv(); m.ID != 5.0 || !bytes.Contains(m.Result, []byte("hello over the wire")) {
		t.Fatalf("tools/call: %+v %s", m, m.Result)
	}

	close(lines)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("buddy mcp: %v; stderr:\n%s", err, clip(stderr.String()))
	}
	logs := stderr.String()
	if strings.Contains(logs, "error:") || !strings.Contains(logs, "an MCP message over the limit was dropped") {
		t.Errorf("stderr:\n%s", clip(logs))
	}
}

// TestMCPHTTPKeepsServing: /mcp on buddy serve answers a body over [server]
// max_message_bytes with 413 and a body that is not JSON with 400, and the
// session goes on.
func TestMCPHTTPKeepsServing(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg, _ := serveConfig(t, s, "always")
	sv := startServe(t, s, "--config", cfg)
	session := ""
	post := func(body []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, sv.url("/mcp"), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+sv.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
		return resp.StatusCode, string(b)
	}
	if code, body := post([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)); code != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	if code, body := post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	for _, tc := range []struct {
		name string
		body []byte
		code int
	}{
		{"a body over max_message_bytes", fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"%s"}}}`, strings.Repeat("a", 1<<20)), http.StatusRequestEntityTooLarge},
		{"a body that is not JSON", []byte(`{"jsonrpc":"2.0","id":2,"method":`), http.StatusBadRequest},
	} {
		if code, body := post(tc.body); code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, code, clip(body), tc.code)
		}
	}
	if code, body := post([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)); code != http.StatusOK || !strings.Contains(body, `"name":"read_file"`) {
		t.Fatalf("tools/list after them: %d %s", code, clip(body))
	}
}
