package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/mcpserver"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// env is a real registry behind a real gate: read_file and write_file on
// one directory, and spin (an endless loop with 10,000 fuel) installed.
type env struct {
	dir, outside string
	live         *skills.Live
	st           *store.Store
	srv          *mcpserver.Server
	outcomes     chan approval.Outcome
}

const spinManifest = `[skill]
name = "spin"
version = "1.0.0"
description = "Loops forever."
permission = "read_only"

[resources]
fuel = 10_000
timeout = "5s"
`

func newEnv(t *testing.T, fallback approval.Asker) *env {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: filepath.Join(root, "files"), outside: filepath.Join(root, "secret.txt"), outcomes: make(chan approval.Outcome, 64)}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(e.dir, "hello.txt"), "hello from inside")
	write(t, e.outside, "the secret")

	rt, err := runtime.New(t.Context(), runtime.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.WithoutCancel(t.Context())) })
	e.st, err = store.Open(t.Context(), filepath.Join(root, "buddy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close(context.Background()) })
	install(t, e.st, root, "spin", "spin.wasm", spinManifest)
	cfg, err := config.Parse(fmt.Appendf(nil, "[skills.read_file]\nallowed_directories = [%q]\n[skills.write_file]\nallowed_directories = [%q]\n", e.dir, e.dir))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := skills.New(t.Context(), skills.Options{Runtime: rt, Config: cfg, Store: e.st, Deps: hostfns.Deps{KV: e.st, Memories: e.st}})
	if err != nil {
		t.Fatal(err)
	}
	live := skills.NewLive(reg)
	e.live = live
	t.Cleanup(func() { live.Close(context.WithoutCancel(t.Context())) })
	e.srv, err = mcpserver.New(t.Context(), mcpserver.Options{
		NewGate: func(a approval.Asker) mcpserver.Gate {
			return approval.New(live, approval.Options{Asker: a, Settings: approval.Fixed(approval.Settings{Timeout: 10 * time.Second}), Record: func(_ context.Context, o approval.Outcome) {
				e.outcomes <- o
			}})
		},
		Fallback: fallback,
		Poll:     50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) gateCatalog(*testing.T) *skills.Live { return e.live }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// install copies a runtime fixture into dir and records it as installed.
func install(t *testing.T, st *store.Store, dir, name, fixture, manifest string) {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "..", "..", "runtime", "testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".wasm")
	write(t, path, string(wasm))
	sum := sha256.Sum256(wasm)
	if err := st.InsertSkill(t.Context(), store.InstalledSkill{
		Name: name, Version: "1.0.0", Description: "test skill", WasmPath: path, SHA256: hex.EncodeToString(sum[:]),
		Manifest: manifest, Status: store.StatusVerified,
	}); err != nil {
		t.Fatal(err)
	}
}

// connect is an SDK client on the in-memory transport; elicit, if set, is its
// elicitation handler (the client then declares the capability).
func (e *env) connect(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ct, stt := mcp.NewInMemoryTransports()
	if _, err := e.srv.MCP().Connect(t.Context(), stt, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (text string, isError bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: protocol error %v (a skill's failure must be a tool result)", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestListTools(t *testing.T) {
	e := newEnv(t, nil)
	cs := e.connect(t, nil)
	if v := cs.InitializeResult().ProtocolVersion; v >= "2026-07-28" {
		t.Errorf("negotiated %s: elicitation inside tools/call needs an earlier version", v)
	}
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	for _, want := range []string{"read_file", "write_file", "spin"} {
		if byName[want] == nil {
			t.Fatalf("tools %v lack %s", slices.Collect(func(yield func(string) bool) {
				for n := range byName {
					if !yield(n) {
						return
					}
				}
			}), want)
		}
	}
	rf, wf := byName["read_file"], byName["write_file"]
	if a := rf.Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("read_file annotations %+v, want readOnlyHint and not destructive", a)
	}
	if a := wf.Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("write_file annotations %+v, want destructiveHint, closed world", a)
	}
	schema, _ := json.Marshal(wf.InputSchema)
	if !strings.Contains(string(schema), `"type":"object"`) || !strings.Contains(string(schema), `"path"`) || !strings.Contains(string(schema), `"content"`) {
		t.Errorf("write_file inputSchema %s", schema)
	}
	if !strings.Contains(wf.Description, "asks the user for approval") {
		t.Errorf("write_file description %q does not say it asks", wf.Description)
	}
}

func TestReadFile(t *testing.T) {
	e := newEnv(t, nil)
	cs := e.connect(t, nil)
	for _, tc := range []struct {
		name, path string
		isError    bool
		want       string
	}{
		{"inside", filepath.Join(e.dir, "hello.txt"), false, "hello from inside"},
		{"relative inside", "hello.txt", false, "hello from inside"},
		{"outside", e.outside, true, "forbidden: "},
		{"escape", filepath.Join(e.dir, "..", "secret.txt"), true, "forbidden: "},
		{"missing", filepath.Join(e.dir, "nope.txt"), true, "not_found: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, isErr := callTool(t, cs, "read_file", map[string]any{"path": tc.path})
			if isErr != tc.isError || !strings.Contains(text, tc.want) {
				t.Errorf("isError %v text %q; want isError %v containing %q", isErr, text, tc.isError, tc.want)
			}
			if strings.Contains(text, "the secret") {
				t.Errorf("the secret leaked: %q", text)
			}
		})
	}
	t.Run("arguments that fail the schema", func(t *testing.T) {
		text, isErr := callTool(t, cs, "read_file", map[string]any{"path": 7})
		if !isErr || !strings.HasPrefix(text, "invalid_input: ") {
			t.Errorf("isError %v text %q, want invalid_input", isErr, text)
		}
	})
}

func TestWriteFileElicitation(t *testing.T) {
	for _, tc := range []struct {
		action  string
		written bool
		want    string
	}{
		{"accept", true, ""},
		{"decline", false, "denied: User denied execution of write_file"},
		{"cancel", false, "denied: User denied execution of write_file"},
	} {
		t.Run(tc.action, func(t *testing.T) {
			e := newEnv(t, nil)
			var mu sync.Mutex
			var asked []string
			cs := e.connect(t, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, req.Params.Message)
				mu.Unlock()
				return &mcp.ElicitResult{Action: tc.action, Content: map[string]any{}}, nil
			}})
			target := filepath.Join(e.dir, "out.txt")
			text, isErr := callTool(t, cs, "write_file", map[string]any{"path": target, "content": "written \x1b[31m over MCP"})
			if isErr == tc.written || !strings.HasPrefix(text, tc.want) {
				t.Errorf("isError %v text %q, want prefix %q", isErr, text, tc.want)
			}
			got, err := os.ReadFile(target)
			if tc.written != (err == nil) || (tc.written && string(got) != "written \x1b[31m over MCP") {
				t.Errorf("file: %q, %v; want written %v", got, err, tc.written)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 {
				t.Fatalf("asked %d times, want once", len(asked))
			}
			for _, w := range []string{"write_file (mutating)", `path: "` + target + `"`, "content:", "write files in"} {
				if !strings.Contains(asked[0], w) {
					t.Errorf("form %q lacks %q", asked[0], w)
				}
			}
			if strings.Contains(asked[0], "\x1b") {
				t.Errorf("form carries a raw escape: %q", asked[0])
			}
		})
	}
}

// TestNoElicitation: a client without the capability is never sent a form;
// with no fallback the call is denied, with one the fallback decides.
func TestNoElicitation(t *testing.T) {
	t.Run("no fallback", func(t *testing.T) {
		e := newEnv(t, nil)
		cs := e.connect(t, nil)
		target := filepath.Join(e.dir, "no.txt")
		text, isErr := callTool(t, cs, "write_file", map[string]any{"path": target, "content": "x"})
		if !isErr || !strings.HasPrefix(text, "denied: User denied execution of write_file") {
			t.Errorf("isError %v text %q", isErr, text)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("file written without approval: %v", err)
		}
	})
	for _, approve := range []bool{true, false} {
		t.Run(fmt.Sprintf("fallback approves %v", approve), func(t *testing.T) {
			var got []approval.Request
			e := newEnv(t, approval.AskerFunc(func(_ context.Context, req approval.Request) (bool, error) {
				got = append(got, req)
				return approve, nil
			}))
			cs := e.connect(t, nil)
			target := filepath.Join(e.dir, "fb.txt")
			_, isErr := callTool(t, cs, "write_file", map[string]any{"path": target, "content": "x"})
			if isErr == approve || len(got) != 1 || got[0].Skill != "write_file" || got[0].Conversation == "" {
				t.Errorf("isError %v, asked %+v", isErr, got)
			}
			if _, err := os.Stat(target); (err == nil) != approve {
				t.Errorf("file exists %v, want %v", err == nil, approve)
			}
		})
	}
}

func TestFuelExhausted(t *testing.T) {
	e := newEnv(t, nil)
	cs := e.connect(t, nil)
	start := time.Now()
	text, isErr := callTool(t, cs, "spin", map[string]any{})
	if !isErr || !strings.HasPrefix(text, "fuel_exhausted: ") {
		t.Errorf("isError %v text %q, want fuel_exhausted", isErr, text)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	// The server is still serving.
	if text, isErr := callTool(t, cs, "read_file", map[string]any{"path": "hello.txt"}); isErr || !strings.Contains(text, "hello from inside") {
		t.Errorf("after spin: %v %q", isErr, text)
	}
}

// TestListChanged: installing and removing a skill changes tools/list and
// sends notifications/tools/list_changed.
func TestListChanged(t *testing.T) {
	e := newEnv(t, nil)
	changed := make(chan struct{}, 16)
	cs := e.connect(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go e.srv.Watch(ctx)
	has := func(name string) bool {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(res.Tools, func(tool *mcp.Tool) bool { return tool.Name == name })
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("no tools/list_changed after %s", what)
		}
	}
	if has("echo") {
		t.Fatal("echo listed before it was installed")
	}
	install(t, e.st, t.TempDir(), "echo", "echo.wasm", "[skill]\nname = \"echo\"\nversion = \"1.0.0\"\ndescription = \"Echoes.\"\npermission = \"read_only\"\n")
	wait("install")
	if !has("echo") {
		t.Fatal("echo not listed after install")
	}
	if text, isErr := callTool(t, cs, "echo", map[string]any{"hi": "there"}); isErr || text != `{"hi":"there"}` {
		t.Errorf("echo: %v %q", isErr, text)
	}
	if err := e.st.DeleteSkill(t.Context(), "echo"); err != nil {
		t.Fatal(err)
	}
	wait("remove")
	if has("echo") {
		t.Fatal("echo still listed after remove")
	}
}

// TestWebFallbackConversation: with NewConversation (buddy serve's "web"
// asker) a session's calls and questions belong to one stored conversation,
// made at its first call; "once" then holds for the session.
func TestWebFallbackConversation(t *testing.T) {
	var mu sync.Mutex
	var made, asked []string
	e := newEnv(t, nil)
	// A server with NewConversation on the same catalog.
	srv, err := mcpserver.New(t.Context(), mcpserver.Options{
		NewGate: func(a approval.Asker) mcpserver.Gate {
			return approval.New(e.gateCatalog(t), approval.Options{Asker: a})
		},
		Fallback: approval.AskerFunc(func(_ context.Context, req approval.Request) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Conversation)
			return true, nil
		}),
		NewConversation: func(_ context.Context, title string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			made = append(made, title)
			return fmt.Sprintf("c_%d", len(made)), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e.srv = srv
	cs := e.connect(t, nil)
	for i := range 2 {
		if text, isErr := callTool(t, cs, "write_file", map[string]any{"path": fmt.Sprintf("w%d.txt", i), "content": "x"}); isErr {
			t.Fatalf("write %d: %q", i, text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(made, []string{"MCP: test-client"}) {
		t.Errorf("conversations made %q, want one titled after the client", made)
	}
	if !slices.Equal(asked, []string{"c_1", "c_1"}) {
		t.Errorf("asked in %q, want c_1 twice (write_file is always)", asked)
	}
}
