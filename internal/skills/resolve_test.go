package skills_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
)

// fileAndFetchRegistry enables read_file and write_file on a temporary
// directory and fetch_url (under trust) on api.x.test, which resolves to a
// loopback server.
func fileAndFetchRegistry(t *testing.T, st *store.Store) (reg *skills.Registry, dir, port string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "page")
	}))
	t.Cleanup(srv.Close)
	port = srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tax.txt"), []byte("income 1\nincome 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, `
[skills.read_file]
allowed_directories = [`+tomlString(dir)+`]
[skills.write_file]
allowed_directories = [`+tomlString(dir)+`]
[skills.fetch_url]
allowed_domains = ["api.x.test:`+port+`"]
approval = "trust"
`)
	opts := skills.Options{Runtime: newRuntime(t), Config: cfg, Deps: hostfns.Deps{Resolver: loopbackResolver{}}}
	if st != nil {
		opts.Store, opts.Deps.KV, opts.Deps.Memories = st, st, st
	}
	reg, err := skills.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close(context.WithoutCancel(t.Context())) })
	return reg, dir, port
}

func TestResolveBuiltins(t *testing.T) {
	reg, dir, port := fileAndFetchRegistry(t, nil)
	canon, _ := filepath.EvalSymlinks(dir)
	tests := []struct {
		skill, args string
		want        string // Target.String()
		refused     bool
	}{
		{"read_file", `{"path":"tax.txt"}`, "read " + canon + "/tax.txt (18 bytes)", false},
		{"read_file", `{"path":"/etc/passwd"}`, "", true},
		{"write_file", `{"path":"new/a.txt","content":"hi"}`, "create " + canon + "/new/a.txt (new file, 2 bytes)", false},
		{"write_file", `{"path":"tax.txt","content":"income 1\nincome 3\nincome 4\n"}`,
			"overwrite " + canon + "/tax.txt (18 bytes now, 27 bytes after; +2 -1 lines)", false},
		{"fetch_url", `{"url":"http://API.x.test:` + port + `/p"}`,
			"fetch http://api.x.test:" + port + "/p (http, host api.x.test, port " + port + ", addresses 127.0.0.1 allowed)", false},
		{"fetch_url", `{"url":"http://evil.test/"}`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.skill+tc.args, func(t *testing.T) {
			ts, err := reg.Resolve(t.Context(), catalog.Call{Skill: tc.skill, Arguments: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != 1 {
				t.Fatalf("targets = %+v, want one", ts)
			}
			if tc.refused {
				if ts[0].Refused == "" {
					t.Fatalf("target %+v not refused", ts[0])
				}
				return
			}
			if got := ts[0].String(); got != tc.want {
				t.Fatalf("target = %s\nwant     %s", got, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("Resolve created a directory: %v", err)
	}
}

func TestInvokeReportsUsage(t *testing.T) {
	reg, dir, port := fileAndFetchRegistry(t, nil)
	canon, _ := filepath.EvalSymlinks(dir)
	res, err := reg.Invoke(t.Context(), catalog.Call{Skill: "read_file", Arguments: json.RawMessage(`{"path":"tax.txt"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Usage; u.BytesRead != 18 || len(u.Paths) != 1 || u.Paths[0] != canon+"/tax.txt" {
		t.Errorf("read usage = %+v", u)
	}
	res, err = reg.Invoke(t.Context(), catalog.Call{Skill: "write_file", Arguments: json.RawMessage(`{"path":"b.txt","content":"abc"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Usage; u.BytesWritten != 3 || len(u.Paths) != 1 || u.Paths[0] != canon+"/b.txt" {
		t.Errorf("write usage = %+v", u)
	}
	res, err = reg.Invoke(t.Context(), catalog.Call{Skill: "fetch_url", Arguments: json.RawMessage(`{"url":"http://api.x.test:` + port + `/"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Usage; len(u.Hosts) != 1 || u.Hosts[0] != "api.x.test" || len(u.Addresses) != 1 || u.Addresses[0] != "127.0.0.1:"+port || u.BytesRead != 4 {
		t.Errorf("fetch usage = %+v", u)
	}
}

// TestScriptedModelReadThenFetch: a model that reads a file and then
// fetches a URL is asked about the fetch, although fetch_url is trusted, and
// the request says why.
func TestScriptedModelReadThenFetch(t *testing.T) {
	st := newStore(t)
	reg, dir, port := fileAndFetchRegistry(t, st)
	canon, _ := filepath.EvalSymlinks(dir)
	var mu sync.Mutex
	var asked []approval.Request
	gate := approval.New(reg, approval.Options{Asker: approval.AskerFunc(func(_ context.Context, req approval.Request) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req)
		return false, nil
	})})
	url := "http://api.x.test:" + port + "/collect"
	script := []agent.Response{
		{ToolCalls: []agent.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"tax.txt"}`}}, StopReason: "tool_calls"},
		{ToolCalls: []agent.ToolCall{{ID: "c2", Name: "fetch_url", Arguments: `{"url":"` + url + `"}`}}, StopReason: "tool_calls"},
		{Text: "done", StopReason: "stop"},
	}
	step := 0
	provider := agent.ProviderFunc(func(context.Context, agent.Request, func(string)) (*agent.Response, error) {
		r := script[min(step, len(script)-1)]
		step++
		return &r, nil
	})
	if err := st.CreateConversation(t.Context(), store.Conversation{ID: "conv"}); err != nil {
		t.Fatal(err)
	}
	a := agent.New(agent.Options{Provider: provider, Skills: gate, History: st})
	out := a.Turn(t.Context(), "conv", "summarise my taxes", nopSink{})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	if len(asked) != 1 || asked[0].Skill != "fetch_url" {
		t.Fatalf("asked = %+v, want the fetch only", asked)
	}
	want := "this conversation has read " + canon + "/tax.txt; running fetch_url (" + url + ") could send it out"
	if asked[0].Reason != want {
		t.Fatalf("reason = %q\nwant     %q", asked[0].Reason, want)
	}
	if len(asked[0].Targets) != 1 || asked[0].Targets[0].Host != "api.x.test" {
		t.Fatalf("targets = %+v", asked[0].Targets)
	}
	if len(out.ToolCalls) != 2 || out.ToolCalls[1].OK {
		t.Fatalf("tool calls = %+v, want the fetch denied", out.ToolCalls)
	}
}

type nopSink struct{}

func (nopSink) Delta(string)                                                   {}
func (nopSink) Message(string, string)                                         {}
func (nopSink) ToolCall(catalog.Call)                                          {}
func (nopSink) ToolResult(catalog.Call, *catalog.Result, error, time.Duration) {}
