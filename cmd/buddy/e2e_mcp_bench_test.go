//go:build unix

package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The cost of one read_file call through each front end of the built binary,
// sequential, one client: `buddy mcp` over stdio (the Go SDK client) and
// `buddy serve` over the WebSocket (invoke → tool_result in one
// conversation). Both go through the gate (read_file: trust, no question)
// and the audit log; the WebSocket path also stores the call's messages.
//
//	go test ./cmd/buddy -run '^$' -bench 'ReadFile(MCPStdio|WebSocket)' -benchtime 2000x
func benchSandbox(b *testing.B) (s *sandbox, cfg, path string) {
	b.Helper()
	s = newSandbox(b)
	files := filepath.Join(s.dir, "files")
	path = write(b, filepath.Join(files, "hello.txt"), strings.Repeat("hello, buddy\n", 80)) // 1 KiB
	cfg = write(b, filepath.Join(s.dir, "buddy.toml"), writeConfig(files, "always"))
	return s, cfg, path
}

func BenchmarkReadFileMCPStdio(b *testing.B) {
	s, cfg, path := benchSandbox(b)
	cmd := exec.Command(buddyBin, "mcp", "--config", cfg)
	cmd.Env = s.env()
	cmd.Dir = s.work
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(b.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": path}}
	call := func() {
		res, err := cs.CallTool(b.Context(), params)
		if err != nil || res.IsError {
			b.Fatalf("read_file: %v %+v", err, res)
		}
	}
	for range 20 { // warm: compiled module, prepared instances
		call()
	}
	b.ResetTimer()
	for b.Loop() {
		call()
	}
}

func BenchmarkReadFileWebSocket(b *testing.B) {
	s, cfg, path := benchSandbox(b)
	addr, token := startServeB(b, s, cfg)
	h := map[string][]string{"Authorization": {"Bearer " + token}}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/api/ws", h)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	var conv string
	call := func() {
		f := map[string]any{"type": "invoke", "skill": "read_file", "arguments": map[string]any{"path": path}}
		if conv != "" {
			f["conversation_id"] = conv
		}
		if err := ws.WriteJSON(f); err != nil {
			b.Fatal(err)
		}
		for {
			var got map[string]any
			if err := ws.ReadJSON(&got); err != nil {
				b.Fatal(err)
			}
			switch got["type"] {
			case "conversation":
				conv, _ = got["id"].(string)
				if conv == "" {
					conv, _ = got["conversation_id"].(string)
				}
			case "error":
				b.Fatalf("error frame %v", got)
			case "tool_result":
				if got["ok"] != true {
					b.Fatalf("tool_result %v", got)
				}
				return
			}
		}
	}
	for range 20 {
		call()
	}
	if conv == "" {
		b.Fatal("no conversation frame")
	}
	b.ResetTimer()
	for b.Loop() {
		call()
	}
}

// startServeB starts `buddy serve` for a benchmark and returns its address
// and token.
func startServeB(b *testing.B, s *sandbox, cfg string) (addr, token string) {
	b.Helper()
	cmd := exec.Command(buddyBin, "serve", "--listen", "127.0.0.1:0", "--config", cfg)
	cmd.Env = s.env()
	cmd.Dir = s.work
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	sc := bufio.NewScanner(out)
	for token == "" && sc.Scan() {
		line := sc.Text()
		if a, ok := strings.CutPrefix(line, "buddy is serving on http://"); ok {
			addr = strings.TrimSuffix(a, "/")
		}
		if _, frag, ok := strings.Cut(line, "/#token="); ok {
			token = frag
		}
	}
	if token == "" {
		b.Fatal("buddy serve printed no token")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return addr, token
}
