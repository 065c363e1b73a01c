package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/front/mcpserver"
)

// echoGate is a gate with one skill, echo, that answers its arguments.
type echoGate struct{}

var echoInfo = catalog.Info{Name: "echo", Description: "Echoes its arguments.", Permission: catalog.ReadOnly, Policy: catalog.Trust, Status: "ready"}

func (echoGate) List(context.Context) ([]catalog.Info, error) { return []catalog.Info{echoInfo}, nil }
func (echoGate) Lookup(_ context.Context, name string) (catalog.Info, error) {
	if name != "echo" {
		return catalog.Info{}, errs.New(errs.ErrNotFound, "no skill "+name)
	}
	return echoInfo, nil
}
func (g echoGate) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	return g.Lookup(ctx, c.Skill)
}
func (g echoGate) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	if _, err := g.Lookup(ctx, c.Skill); err != nil {
		return nil, err
	}
	return &catalog.Result{Skill: c.Skill, Output: c.Arguments}, nil
}
func (echoGate) EndConversation(string) {}

// stdioSession is `buddy mcp`'s transport over pipes: what a client writes
// on the server's stdin and reads on its stdout.
type stdioSession struct {
	t     *testing.T
	lines chan<- string // to stdin, in order, by a goroutine of their own
	out   *bufio.Reader
}

func startStdio(t *testing.T, maxBytes int64, version string) *stdioSession {
	t.Helper()
	srv, err := mcpserver.New(t.Context(), mcpserver.Options{
		NewGate:         func(approval.Asker) mcpserver.Gate { return echoGate{} },
		MaxMessageBytes: maxBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(t.Context(), srv.Stdio(inR, outW))
		outW.Close()
	}()
	// Lines are written by a goroutine of their own: a server that stops
	// reading fails the test at the next answer instead of blocking it.
	lines := make(chan string, 64)
	go func() {
		for l := range lines {
			if _, err := io.WriteString(inW, l); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(lines)
		inW.Close()
		go io.Copy(io.Discard, outR)
		<-done
		srv.Close()
	})
	s := &stdioSession{t: t, lines: lines, out: bufio.NewReader(outR)}
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, version))
	if r := s.recv(); r["id"] != 0.0 || r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *stdioSession) send(line string) { s.lines <- line + "\n" }

// recv reads one line: an answer, or a batch of them ({"batch": [...]}).
func (s *stdioSession) recv() map[string]any {
	s.t.Helper()
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		s.t.Fatalf("reading an answer: %v (%q)", err, line)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		var batch []any
		if err := json.Unmarshal(line, &batch); err != nil {
			s.t.Fatalf("answer %q: %v", line, err)
		}
		return map[string]any{"batch": batch}
	}
	return m
}

// toolsList asks for the tools and fails unless echo is listed.
func (s *stdioSession) toolsList(id int) {
	s.t.Helper()
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id))
	r := s.recv()
	res, _ := r["result"].(map[string]any)
	tools, _ := res["tools"].([]any)
	if r["id"] != float64(id) || len(tools) != 1 || tools[0].(map[string]any)["name"] != "echo" {
		s.t.Fatalf("tools/list after it: %v", r)
	}
}

// TestStdioKeepsServing: a line over the limit, a line that is not JSON and
// a message that is not JSON-RPC each get a JSON-RPC error, and the session
// answers the next line; a line within the limit is served.
func TestStdioKeepsServing(t *testing.T) {
	const max = 1024
	call := func(id, text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, text)
	}
	callLen := len(call("1", ""))
	for _, tc := range []struct {
		name string
		line string
		code float64 // of the error; 0: none
		id   any     // of the answer
	}{
		{name: "at the limit", line: call("1", strings.Repeat("a", max-callLen)), id: 1.0},
		{name: "at the limit, with CRLF", line: call("1", strings.Repeat("a", max-callLen)) + "\r", id: 1.0},
		{name: "over the limit by one byte", line: call("2", strings.Repeat("a", max-callLen+1)), code: -32600, id: 2.0},
		{name: "over the limit, id first", line: call("3", strings.Repeat("a", 3000)), code: -32600, id: 3.0},
		{name: "over the limit, id last (as the TypeScript SDK writes)",
			line: fmt.Sprintf(`{"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}},"jsonrpc":"2.0","id":"req-4"}`, strings.Repeat("a", 3000)),
			code: -32600, id: "req-4"},
		{name: "far over the limit", line: call("5", strings.Repeat("a", 5<<20)), code: -32600, id: 5.0},
		{name: "over the limit, no id to read", line: strings.Repeat("x", 3000), code: -32600},
		{name: "over the limit, an id only inside", line: fmt.Sprintf(`{"jsonrpc":"2.0","method":"x","params":{"t":%q,"id":6}}`, strings.Repeat("a", 3000)), code: -32600},
		{name: "not JSON", line: `{"jsonrpc":"2.0","id":7,`, code: -32700},
		{name: "two messages on one line", line: `{"jsonrpc":"2.0","id":8,"method":"ping"} {"jsonrpc":"2.0","id":9,"method":"ping"}`, code: -32700},
		{name: "invalid UTF-8 (the SDK's to answer)", line: "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"pi\xffng\"}", code: -32601, id: 10.0},
		{name: "JSON, not JSON-RPC", line: `{"hello":"world"}`, code: -32600},
		{name: "another version tag", line: `{"jsonrpc":"1.0","id":11,"method":"ping"}`, code: -32600, id: 11.0},
		{name: "a number", line: `42`, code: -32600},
		{name: "an id that is an object", line: `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, code: -32600},
		{name: "an empty batch", line: `[]`, code: -32600},
		{name: "a batch on 2025-06-18", line: `[{"jsonrpc":"2.0","id":12,"method":"ping"}]`, code: -32600},
		{name: "a blank line", line: "  \t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startStdio(t, max, "2025-06-18")
			s.send(tc.line)
			if tc.line != "  \t" {
				r := s.recv()
				e, _ := r["error"].(map[string]any)
				switch {
				case r["id"] != tc.id:
					t.Errorf("answer %.200v, want id %v", r, tc.id)
				case tc.code == 0 && (e != nil || r["result"] == nil):
					t.Errorf("answer %.200v, want a result", r)
				case tc.code != 0 && (e == nil || e["code"] != tc.code || e["message"] == ""):
					t.Errorf("answer %.200v, want error %v", r, tc.code)
				}
			}
			s.toolsList(100)
		})
	}
	t.Run("longer than the read buffer, within the limit", func(t *testing.T) {
		s := startStdio(t, 1<<20, "2025-06-18")
		s.send(call("1", strings.Repeat("a", 200<<10)))
		if r := s.recv(); r["id"] != 1.0 || r["result"] == nil {
			t.Fatalf("answer %.200v", r)
		}
		s.toolsList(2)
	})
	t.Run("the error says the limit", func(t *testing.T) {
		s := startStdio(t, max, "2025-06-18")
		s.send(call("1", strings.Repeat("a", 3000)))
		msg := s.recv()["error"].(map[string]any)["message"].(string)
		if want := fmt.Sprintf("is %d bytes, over the limit of 1024 ([server] max_message_bytes)", len(call("1", strings.Repeat("a", 3000)))); !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	})
}

// TestStdioBatchesBefore20250618: a session on an older protocol still has
// its batches answered, as the SDK does; a batch that reuses an id is
// refused without ending the session.
func TestStdioBatchesBefore20250618(t *testing.T) {
	s := startStdio(t, 1024, "2025-03-26")
	s.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
	if b, _ := s.recv()["batch"].([]any); len(b) != 2 {
		t.Fatalf("batch answer %v", b)
	}
	s.send(`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	if e, _ := s.recv()["error"].(map[string]any); e == nil || e["code"] != -32600.0 {
		t.Fatalf("a batch with an id twice: %v", e)
	}
	s.toolsList(4)
}
