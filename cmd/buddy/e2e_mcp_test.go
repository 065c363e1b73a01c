//go:build unix

package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The official MCP TypeScript SDK client, installed once per test binary by
// scripts/install-mcp-client.sh (outside the repository).
var (
	mcpClientOnce sync.Once
	mcpClientDir  string
	mcpClientErr  error
)

// mcpClient returns the directory holding @modelcontextprotocol/sdk, or
// skips the test when node or npm cannot provide it.
func mcpClient(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not found: the MCP client tests need Node.js and npm (@modelcontextprotocol/sdk)")
	}
	mcpClientOnce.Do(func() {
		script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "install-mcp-client.sh"))
		if err != nil {
			mcpClientErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", script)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			mcpClientErr = errors.New(err.Error() + ": " + stderr.String())
			return
		}
		mcpClientDir = strings.TrimSpace(string(out))
	})
	if mcpClientErr != nil {
		t.Skipf("npm cannot install @modelcontextprotocol/sdk (scripts/install-mcp-client.sh): %v", mcpClientErr)
	}
	return mcpClientDir
}

// mcpCase is one tools/call as cases.mjs saw it.
type mcpCase struct {
	IsError       bool           `json:"isError"`
	Text          string         `json:"text"`
	Structured    map[string]any `json:"structured"`
	ProtocolError string         `json:"protocolError"`
}

type mcpRun struct {
	SDK   string `json:"sdk"`
	Tools []struct {
		Name        string         `json:"name"`
		Annotations map[string]any `json:"annotations"`
		InputSchema map[string]any `json:"inputSchema"`
	} `json:"tools"`
	Cases map[string]mcpCase `json:"cases"`
	Forms []string           `json:"forms"`
}

// mcpSandbox is a sandbox with read_file and write_file on files/, a secret
// outside it, and spin (a loop with 10,000 fuel) installed.
func mcpSandbox(t *testing.T) (s *sandbox, cfg, files, outside string) {
	t.Helper()
	s = newSandbox(t)
	files = filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "hello.txt"), "hello over MCP")
	outside = write(t, filepath.Join(s.dir, "secret.txt"), "the secret")
	cfg = write(t, filepath.Join(s.dir, "buddy.toml"), writeConfig(files, "always"))
	spin := fixtureDir(t, filepath.Join(s.dir, "spin"), "spin.wasm",
		manifest("spin", "1.0.0", "read_only", "", "[resources]\nfuel = 10_000\ntimeout = \"5s\"\n"))
	s.run(t, "skill", "install", spin, "--config", cfg, "--yes").ok(t)
	return s, cfg, files, outside
}

// runCases runs scripts/mcp-client/cases.mjs with args and decodes its report.
func runCases(t *testing.T, s *sandbox, sdk, files, outside string, args ...string) mcpRun {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "mcp-client", "cases.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Env = s.env("MCP_SDK_DIR="+sdk, "MCP_FILES="+files, "MCP_OUTSIDE="+outside)
	cmd.Dir = s.work
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cases.mjs %v: %v\nstderr:\n%s", args, err, clip(stderr.String()))
	}
	var run mcpRun
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("cases.mjs printed %q: %v", clip(string(out)), err)
	}
	return run
}

// checkRun asserts the cases every transport must get right.
func checkRun(t *testing.T, run mcpRun, files, outside string) {
	t.Helper()
	if run.SDK != "1.32.2" {
		t.Errorf("client SDK %q, want the pinned 1.32.2", run.SDK)
	}
	tools := map[string]map[string]any{}
	for _, tool := range run.Tools {
		tools[tool.Name] = tool.Annotations
		if tool.InputSchema["type"] != "object" {
			t.Errorf("%s inputSchema %v", tool.Name, tool.InputSchema)
		}
	}
	for name, want := range map[string][2]any{
		"read_file":  {true, false}, // readOnlyHint, destructiveHint
		"write_file": {false, true},
		"spin":       {true, false},
	} {
		a, ok := tools[name]
		if !ok {
			t.Errorf("tools/list lacks %s: %v", name, tools)
			continue
		}
		if a["readOnlyHint"] != want[0] || a["destructiveHint"] != want[1] || a["openWorldHint"] != false {
			t.Errorf("%s annotations %v", name, a)
		}
	}
	for _, tc := range []struct {
		name    string
		isError bool
		prefix  string
		kind    string
	}{
		{"read_inside", false, `{"content":"hello over MCP"}`, ""},
		{"read_outside", true, "forbidden: ", "forbidden"},
		{"write_accept", false, `{"bytes_written":17}`, ""},
		{"write_decline", true, "denied: User denied execution of write_file", "denied"},
		{"write_cancel", true, "denied: User denied execution of write_file", "denied"},
		{"spin", true, "fuel_exhausted: ", "fuel_exhausted"},
		{"write_noelicit", true, "denied: User denied execution of write_file", "denied"},
	} {
		c, ok := run.Cases[tc.name]
		switch {
		case !ok:
			t.Errorf("%s: no result", tc.name)
		case c.ProtocolError != "":
			t.Errorf("%s: protocol error %q, want a tool result", tc.name, c.ProtocolError)
		case c.IsError != tc.isError || !strings.HasPrefix(c.Text, tc.prefix):
			t.Errorf("%s: isError %v text %q, want isError %v and prefix %q", tc.name, c.IsError, c.Text, tc.isError, tc.prefix)
		case tc.kind != "":
			if e, _ := c.Structured["error"].(map[string]any); e == nil || e["kind"] != tc.kind {
				t.Errorf("%s: structuredContent %v, want error kind %s", tc.name, c.Structured, tc.kind)
			}
		}
		if strings.Contains(c.Text, "the secret") {
			t.Errorf("%s: the secret leaked: %q", tc.name, c.Text)
		}
	}
	if got, err := os.ReadFile(filepath.Join(files, "accepted.txt")); err != nil || string(got) != "accepted over MCP" {
		t.Errorf("accepted.txt: %q, %v", got, err)
	}
	for _, f := range []string{"declined.txt", "canceled.txt", "noelicit.txt"} {
		if _, err := os.Stat(filepath.Join(files, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s written without approval: %v", f, err)
		}
	}
	// One form per write_file from the eliciting client: the skill, its
	// target and what it may touch.
	if len(run.Forms) != 3 {
		t.Fatalf("forms shown: %d (%q), want 3", len(run.Forms), run.Forms)
	}
	for _, w := range []string{"write_file (mutating)", `path: "` + filepath.Join(files, "accepted.txt") + `"`, "content: ", "write files in"} {
		if !strings.Contains(run.Forms[0], w) {
			t.Errorf("form %q lacks %q", run.Forms[0], w)
		}
	}
}

// TestMCPStdioOfficialClient: the official TypeScript SDK client spawns
// `buddy mcp` and runs every case over stdio.
func TestMCPStdioOfficialClient(t *testing.T) {
	t.Parallel()
	s, cfg, files, outside := mcpSandbox(t)
	sdk := mcpClient(t)
	run := runCases(t, s, sdk, files, outside, "stdio", buddyBin, "mcp", "--config", cfg)
	checkRun(t, run, files, outside)
}

// TestMCPHTTPOfficialClient: the same cases over Streamable HTTP at /mcp on
// buddy serve, with the token; without it, or from another site, refused.
func TestMCPHTTPOfficialClient(t *testing.T) {
	t.Parallel()
	s, cfg, files, outside := mcpSandbox(t)
	sdk := mcpClient(t)
	sv := startServe(t, s, "--config", cfg)
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"wrong token", map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64)}, http.StatusUnauthorized},
		{"other origin", map[string]string{"Authorization": "Bearer " + sv.token, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"rebound host", map[string]string{"Authorization": "Bearer " + sv.token, "Host": "evil.example"}, http.StatusForbidden},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, sv.url("/mcp"), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range tc.header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	run := runCases(t, s, sdk, files, outside, "http", sv.url("/mcp"), sv.token)
	checkRun(t, run, files, outside)
}
