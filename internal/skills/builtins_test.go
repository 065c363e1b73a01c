package skills_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/runtime"
)

// call runs a registered skill and decodes its JSON output into out.
func call(t *testing.T, reg *skills.Registry, name, input string, out any) error {
	t.Helper()
	res, err := reg.Call(t.Context(), name, []byte(input))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(res.Output, out); err != nil {
		t.Fatalf("%s output %q: %v", name, res.Output, err)
	}
	return nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sandbox is a registry with read_file and write_file enabled on two
// directories, and a secret beside them that neither may touch.
type sandbox struct {
	reg                     *skills.Registry
	docs, scratch, outside  string
	secret                  string // a file outside both directories
	secretContent, noteBody string
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	root := t.TempDir()
	s := &sandbox{
		docs:          filepath.Join(root, "docs"),
		scratch:       filepath.Join(root, "scratch"),
		outside:       filepath.Join(root, "outside"),
		secretContent: "the launch codes",
		noteBody:      "buy oat milk\n",
	}
	for _, d := range []string{s.docs, s.scratch, s.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.secret = filepath.Join(s.outside, "secret.txt")
	writeFile(t, s.secret, s.secretContent)
	writeFile(t, filepath.Join(s.docs, "notes.txt"), s.noteBody)
	cfg := parseConfig(t, fmt.Sprintf(`
[skills.read_file]
allowed_directories = [%s]

[skills.write_file]
allowed_directories = [%s]
`, tomlString(s.docs), tomlString(s.scratch)))
	s.reg = newRegistry(t, newRuntime(t), cfg, nil)
	return s
}

// TestReadFile: read_file's cases (allowed, outside, .., symlinks, sizes) through the real built-in.
func TestReadFile(t *testing.T) {
	s := newSandbox(t)
	writeFile(t, filepath.Join(s.docs, "sub", "deep.txt"), "deep")
	// A symlink whose target is outside the sandbox, one that points at a
	// directory outside it, and a relative one climbing out.
	if err := os.Symlink(s.secret, filepath.Join(s.docs, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.outside, filepath.Join(s.docs, "outdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/secret.txt", filepath.Join(s.docs, "relative.txt")); err != nil {
		t.Fatal(err)
	}
	// A sibling whose name has the sandbox's as a prefix.
	evil := s.docs + "-evil"
	writeFile(t, filepath.Join(evil, "x.txt"), s.secretContent)

	ok := []struct {
		name, path, want string
	}{
		{"relative path", "notes.txt", s.noteBody},
		{"absolute path inside", filepath.Join(s.docs, "notes.txt"), s.noteBody},
		{"subdirectory", "sub/deep.txt", "deep"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			var out struct{ Content string }
			if err := call(t, s.reg, "read_file", fmt.Sprintf(`{"path":%q}`, tt.path), &out); err != nil {
				t.Fatal(err)
			}
			if out.Content != tt.want {
				t.Errorf("content = %q, want %q", out.Content, tt.want)
			}
		})
	}
	forbidden := []struct{ name, path string }{
		{"../../etc/passwd", "../../etc/passwd"},
		{"any .. element, even one that stays inside", "sub/../notes.txt"},
		{"../ to a sibling", "../outside/secret.txt"},
		{"absolute path outside", s.secret},
		{"/etc/passwd", "/etc/passwd"},
		{"symlink escaping the sandbox", "escape.txt"},
		{"relative symlink escaping the sandbox", "relative.txt"},
		{"intermediate symlink escaping the sandbox", "outdir/secret.txt"},
		{"sibling-prefix directory", filepath.Join(evil, "x.txt")},
	}
	for _, tt := range forbidden {
		t.Run(tt.name, func(t *testing.T) {
			var out struct{ Content string }
			err := call(t, s.reg, "read_file", fmt.Sprintf(`{"path":%q}`, tt.path), &out)
			wantKind(t, err, errs.ErrForbidden)
			if strings.Contains(err.Error(), s.secretContent) || out.Content != "" {
				t.Errorf("the secret leaked: %v %q", err, out.Content)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		var out struct{ Content string }
		wantKind(t, call(t, s.reg, "read_file", `{"path":"nope.txt"}`, &out), errs.ErrNotFound)
	})
	t.Run("read_file cannot write", func(t *testing.T) {
		// write_file's directory is not readable by read_file.
		writeFile(t, filepath.Join(s.scratch, "w.txt"), "w")
		var out struct{ Content string }
		wantKind(t, call(t, s.reg, "read_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(s.scratch, "w.txt")), &out), errs.ErrForbidden)
	})
}

// TestWriteFile: write_file's cases through the real built-in.
func TestWriteFile(t *testing.T) {
	s := newSandbox(t)
	ok := []struct {
		name, path, content, file string
	}{
		{"a file", "hello.txt", "hello, world", "hello.txt"},
		{"creating parent directories", "a/b/c/note.md", "# deep\n", "a/b/c/note.md"},
		{"absolute path inside", filepath.Join(s.scratch, "abs.txt"), "abs", "abs.txt"},
		{"an empty file", "empty.txt", "", "empty.txt"},
		{"unicode", "ü.txt", "grüß dich ✓", "ü.txt"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			in, _ := json.Marshal(map[string]string{"path": tt.path, "content": tt.content})
			var out struct {
				BytesWritten int `json:"bytes_written"`
			}
			if err := call(t, s.reg, "write_file", string(in), &out); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(s.scratch, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.content {
				t.Errorf("file holds %q, want %q", got, tt.content)
			}
			if out.BytesWritten != len(tt.content) {
				t.Errorf("bytes_written = %d, want %d", out.BytesWritten, len(tt.content))
			}
		})
	}
	t.Run("replacing a file", func(t *testing.T) {
		var out struct{}
		for _, c := range []string{"first version, long", "second"} {
			if err := call(t, s.reg, "write_file", fmt.Sprintf(`{"path":"r.txt","content":%q}`, c), &out); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := os.ReadFile(filepath.Join(s.scratch, "r.txt")); string(got) != "second" {
			t.Errorf("file holds %q, want %q", got, "second")
		}
	})
	if err := os.Symlink(s.outside, filepath.Join(s.scratch, "outdir")); err != nil {
		t.Fatal(err)
	}
	forbidden := []struct{ name, path, lands string }{
		{"../ outside", "../outside/pwned.txt", filepath.Join(s.outside, "pwned.txt")},
		{"absolute path outside", filepath.Join(s.outside, "pwned2.txt"), filepath.Join(s.outside, "pwned2.txt")},
		{"through a symlinked directory", "outdir/pwned3.txt", filepath.Join(s.outside, "pwned3.txt")},
		{"into read_file's directory", filepath.Join(s.docs, "pwned4.txt"), filepath.Join(s.docs, "pwned4.txt")},
		{"over the secret", s.secret, ""},
	}
	for _, tt := range forbidden {
		t.Run(tt.name, func(t *testing.T) {
			var out struct{}
			err := call(t, s.reg, "write_file", fmt.Sprintf(`{"path":%q,"content":"pwned"}`, tt.path), &out)
			wantKind(t, err, errs.ErrForbidden)
			if tt.lands != "" {
				if _, err := os.Lstat(tt.lands); !os.IsNotExist(err) {
					t.Errorf("%s exists after a refused write (%v)", tt.lands, err)
				}
			}
			if got, _ := os.ReadFile(s.secret); string(got) != s.secretContent {
				t.Errorf("the secret was changed to %q", got)
			}
		})
	}
}

// TestFetchURL: fetch_url through the real built-in against a local server
// whose address, 127.0.0.1, is listed exactly.
func TestFetchURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("method %s, want GET", r.Method)
		}
		switch r.URL.Path {
		case "/redirect-out":
			http.Redirect(w, r, "http://blocked.invalid/", http.StatusFound)
		default:
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "hello from %s", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server at %s, want 127.0.0.1", srv.URL)
	}
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	cfg := parseConfig(t, `
[skills.fetch_url]
allowed_domains = ["127.0.0.1", "example.com"]
`)
	reg := newRegistry(t, newRuntime(t), cfg, nil)
	sk, err := reg.Get("fetch_url")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1", "example.com"}; !slices.Equal(allow.Strings(sk.Grants.Domains), want) {
		t.Errorf("grants %v, want %v", sk.Grants.Domains, want)
	}
	if sk.Approval != config.ApprovalAlways || sk.Manifest.Permission != runtime.Network {
		t.Errorf("fetch_url: permission %s, approval %s; want network, always", sk.Manifest.Permission, sk.Approval)
	}

	t.Run("allowlisted host", func(t *testing.T) {
		var out struct {
			Status int
			Body   string
		}
		if err := call(t, reg, "fetch_url", fmt.Sprintf(`{"url":%q}`, srv.URL+"/page"), &out); err != nil {
			t.Fatal(err)
		}
		if out.Status != 200 || out.Body == "" {
			t.Fatalf("status %d, body %q; want 200 and a body", out.Status, out.Body)
		}
		if out.Body != "hello from /page" {
			t.Errorf("body = %q", out.Body)
		}
	})
	forbidden := []struct{ name, url string }{
		{"non-allowlisted domain", "http://blocked.invalid/"},
		{"non-allowlisted subdomain of an allowed one", "http://www.example.com/"},
		{"loopback by another name", "http://localhost:" + port + "/"},
		{"another loopback address", "http://127.0.0.2:" + port + "/"},
		{"userinfo", "http://user:pw@127.0.0.1:" + port + "/"},
		{"a redirect to a non-allowlisted host", srv.URL + "/redirect-out"},
		{"a scheme other than http(s)", "file:///etc/passwd"},
	}
	for _, tt := range forbidden {
		t.Run(tt.name, func(t *testing.T) {
			var out struct{}
			wantKind(t, call(t, reg, "fetch_url", fmt.Sprintf(`{"url":%q}`, tt.url), &out), errs.ErrForbidden)
		})
	}
}

// TestFetchURLNotAllowlisted: with only public domains listed, the local
// server cannot be reached.
func TestFetchURLNotAllowlisted(t *testing.T) {
	reached := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	t.Cleanup(srv.Close)
	cfg := parseConfig(t, `
[skills.fetch_url]
allowed_domains = ["example.com", "api.github.com"]
`)
	reg := newRegistry(t, newRuntime(t), cfg, nil)
	var out struct{}
	wantKind(t, call(t, reg, "fetch_url", fmt.Sprintf(`{"url":%q}`, srv.URL), &out), errs.ErrForbidden, "127.0.0.1")
	if reached {
		t.Error("the server was reached")
	}
}

// TestRegistration: which built-ins a buddy.toml registers.
func TestRegistration(t *testing.T) {
	dir := t.TempDir()
	rt := newRuntime(t)
	tests := []struct {
		name string
		toml string
		want []string
	}{
		{"no [skills] section", `
[server]
listen = "127.0.0.1:7788"
max_message_bytes = 4096

[provider]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "llama3.1"
max_iterations = 3
`, nil},
		{"an empty document", ``, nil},
		{"[skills.read_file] only", `
[skills.read_file]
allowed_directories = [` + tomlString(dir) + `]
`, []string{"read_file"}},
		{"[skills.memory]", `
[skills.memory]
`, []string{"memory_read", "memory_write", "recall", "remember"}},
		{"[skills.remember] only", `
[skills.remember]
`, []string{"remember"}},
		{"every built-in", `
[skills.read_file]
allowed_directories = [` + tomlString(dir) + `]
[skills.write_file]
allowed_directories = [` + tomlString(dir) + `]
[skills.fetch_url]
allowed_domains = ["example.com"]
[skills.memory]
`, []string{"fetch_url", "memory_read", "memory_write", "read_file", "recall", "remember", "write_file"}},
		{"a section for something not installed", `
[skills.word_count]
allowed_directories = [` + tomlString(dir) + `]
`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parseConfig(t, tt.toml)
			reg := newRegistry(t, rt, cfg, newStore(t))
			if got := names(reg); !slices.Equal(got, tt.want) {
				t.Errorf("registered %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("server and provider still parse", func(t *testing.T) {
		cfg := parseConfig(t, tests[0].toml)
		if cfg.Server.Listen != "127.0.0.1:7788" || cfg.Server.MaxMessageBytes != 4096 {
			t.Errorf("server = %+v", cfg.Server)
		}
		if cfg.Provider.Kind != "openai" || cfg.Provider.Model != "llama3.1" ||
			cfg.Provider.BaseURL != "http://127.0.0.1:11434/v1" || cfg.Provider.MaxIterations != 3 {
			t.Errorf("provider = %+v", cfg.Provider)
		}
		if len(cfg.Skills) != 0 {
			t.Errorf("skills = %v", cfg.Skills)
		}
	})
}

// TestNotEnabled: calling a built-in without its section is not_found with
// the section to add.
func TestNotEnabled(t *testing.T) {
	dir := t.TempDir()
	cfg := parseConfig(t, `
[skills.read_file]
allowed_directories = [`+tomlString(dir)+`]
`)
	reg := newRegistry(t, newRuntime(t), cfg, nil)
	tests := []struct{ skill, want string }{
		{"write_file", "add a [skills.write_file] section"},
		{"fetch_url", "add a [skills.fetch_url] section"},
		{"memory_read", "add a [skills.memory] section"},
		{"remember", "add a [skills.memory] section"},
		{"word_count", "registered: read_file"},
	}
	for _, tt := range tests {
		t.Run(tt.skill, func(t *testing.T) {
			_, err := reg.Call(t.Context(), tt.skill, []byte(`{}`))
			wantKind(t, err, errs.ErrNotFound, tt.skill, tt.want)
			_, err = reg.Get(tt.skill)
			wantKind(t, err, errs.ErrNotFound, tt.want)
		})
	}
	t.Run("nothing registered", func(t *testing.T) {
		reg := newRegistry(t, newRuntime(t), parseConfig(t, ``), nil)
		_, err := reg.Get("word_count")
		wantKind(t, err, errs.ErrNotFound, "none are registered")
	})
}

// TestBuiltinGrantedNothing: a built-in's section that grants it nothing it
// could use is a configuration error at skills.New naming the key.
func TestBuiltinGrantedNothing(t *testing.T) {
	dir := t.TempDir()
	rt := newRuntime(t)
	tests := []struct {
		name, toml string
		want       []string
	}{
		{"read_file without allowed_directories", `
[skills.read_file]
approval = "trust"
`, []string{"skills.read_file", "allowed_directories"}},
		{"read_file with only write_directories", `
[skills.read_file]
write_directories = [` + tomlString(dir) + `]
`, []string{"skills.read_file", "allowed_directories"}},
		{"write_file without allowed_directories", `
[skills.write_file]
`, []string{"skills.write_file", "allowed_directories"}},
		{"write_file with only read_directories", `
[skills.write_file]
read_directories = [` + tomlString(dir) + `]
`, []string{"skills.write_file", "allowed_directories"}},
		{"fetch_url without allowed_domains", `
[skills.fetch_url]
`, []string{"skills.fetch_url", "allowed_domains"}},
		{"both reported", `
[skills.read_file]
[skills.fetch_url]
`, []string{"skills.read_file", "skills.fetch_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := skills.New(t.Context(), skills.Options{Runtime: rt, Config: parseConfig(t, tt.toml)})
			wantKind(t, err, errs.ErrConfig, tt.want...)
		})
	}
	t.Run("read_directories suffice for read_file", func(t *testing.T) {
		reg := newRegistry(t, rt, parseConfig(t, `
[skills.read_file]
read_directories = [`+tomlString(dir)+`]
`), nil)
		if got := names(reg); !slices.Equal(got, []string{"read_file"}) {
			t.Errorf("registered %v", got)
		}
	})
	t.Run("no runtime or no config", func(t *testing.T) {
		_, err := skills.New(t.Context(), skills.Options{Config: parseConfig(t, ``)})
		wantKind(t, err, errs.ErrInternal)
		_, err = skills.New(t.Context(), skills.Options{Runtime: rt})
		wantKind(t, err, errs.ErrInternal)
	})
}

// TestMemoryBuiltins: [skills.memory] registers the four memory skills, which
// share the "memory" namespace of the real store.
func TestMemoryBuiltins(t *testing.T) {
	st := newStore(t)
	cfg := parseConfig(t, `
[skills.memory]
approval = "always"

[skills.recall]
timeout = "2s"
`)
	reg := newRegistry(t, newRuntime(t), cfg, st)
	want := map[string]struct {
		perm     runtime.Permission
		approval string
	}{
		// [skills.memory]'s approval is for the mutating two.
		"memory_read":  {runtime.ReadOnly, config.ApprovalTrust},
		"memory_write": {runtime.Mutating, config.ApprovalAlways},
		"remember":     {runtime.Mutating, config.ApprovalAlways},
		"recall":       {runtime.ReadOnly, config.ApprovalTrust},
	}
	for _, s := range reg.Skills() {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected skill %s", s.Name)
			continue
		}
		if s.Status != skills.StatusReady || s.Grants.Namespace != "memory" || !s.Builtin {
			t.Errorf("%s: status %s, namespace %q, builtin %v", s.Name, s.Status, s.Grants.Namespace, s.Builtin)
		}
		if s.Manifest.Permission != w.perm || string(s.Approval) != w.approval {
			t.Errorf("%s: permission %s, approval %s; want %s, %s", s.Name, s.Manifest.Permission, s.Approval, w.perm, w.approval)
		}
	}
	if sk, _ := reg.Get("recall"); sk.Manifest.Resources.Timeout != 2*time.Second {
		t.Errorf("recall timeout %s, want its own section's 2s", sk.Manifest.Resources.Timeout)
	}

	t.Run("remember and recall", func(t *testing.T) {
		var id struct{ ID int64 }
		if err := call(t, reg, "remember", `{"text":"the dentist is on Tuesday at 3pm","tags":["health"]}`, &id); err != nil {
			t.Fatal(err)
		}
		if err := call(t, reg, "remember", `{"text":"buy oat milk"}`, &struct{}{}); err != nil {
			t.Fatal(err)
		}
		if id.ID == 0 {
			t.Errorf("remember returned id 0")
		}
		var out struct {
			Memories []struct {
				ID   int64
				Text string
				Tags []string
			}
		}
		if err := call(t, reg, "recall", `{"query":"when is the dentist?","limit":5}`, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Memories) == 0 || out.Memories[0].Text != "the dentist is on Tuesday at 3pm" ||
			out.Memories[0].ID != id.ID || !slices.Equal(out.Memories[0].Tags, []string{"health"}) {
			t.Fatalf("recall = %+v", out.Memories)
		}
		// It is in the store, under the shared namespace.
		mems, err := st.Recall(t.Context(), skills.MemoryNamespace, "dentist", 5)
		if err != nil || len(mems) != 1 || mems[0].ID != id.ID {
			t.Errorf("store.Recall = %+v, %v", mems, err)
		}
	})
	t.Run("memory_write and memory_read", func(t *testing.T) {
		if err := call(t, reg, "memory_write", `{"key":"user.timezone","value":"Europe/Paris"}`, &struct{}{}); err != nil {
			t.Fatal(err)
		}
		var out struct {
			Found bool
			Value string
		}
		if err := call(t, reg, "memory_read", `{"key":"user.timezone"}`, &out); err != nil {
			t.Fatal(err)
		}
		if !out.Found || out.Value != "Europe/Paris" {
			t.Errorf("memory_read = %+v", out)
		}
		if v, err := st.KVGet(t.Context(), skills.MemoryNamespace, "user.timezone"); err != nil || string(v) != "Europe/Paris" {
			t.Errorf("store.KVGet = %q, %v", v, err)
		}
		out.Found = true
		if err := call(t, reg, "memory_read", `{"key":"never.written"}`, &out); err != nil {
			t.Fatal(err)
		}
		if out.Found {
			t.Errorf("memory_read of a key never written: %+v", out)
		}
	})
}

// TestMemoryBuiltinsWithoutStore: enabled but with no store to use, the
// memory skills are listed as unavailable and refuse calls.
func TestMemoryBuiltinsWithoutStore(t *testing.T) {
	reg := newRegistry(t, newRuntime(t), parseConfig(t, "[skills.memory]\n"), nil)
	for _, s := range reg.Skills() {
		if s.Status != skills.StatusUnavailable {
			t.Errorf("%s: status %s, want unavailable", s.Name, s.Status)
		}
	}
	_, err := reg.Call(t.Context(), "recall", []byte(`{}`))
	wantKind(t, err, errs.ErrConfig, "store")
}

// TestCallValidatesInput: Call refuses a bad input before running anything.
func TestCallValidatesInput(t *testing.T) {
	s := newSandbox(t)
	for _, in := range []string{`{"path":`, `["notes.txt"]`, `{}`, `{"path":1}`, `{"path":"notes.txt","extra":1}`} {
		_, err := s.reg.Call(t.Context(), "read_file", []byte(in))
		wantKind(t, err, errs.ErrInvalidInput)
	}
}

// TestConcurrentCalls: 8 goroutines call read_file at once, each reading its
// own file, several times.
func TestConcurrentCalls(t *testing.T) {
	s := newSandbox(t)
	const n = 8
	for i := range n {
		writeFile(t, filepath.Join(s.docs, fmt.Sprintf("f%d.txt", i)), strings.Repeat(fmt.Sprint(i), 1000+i))
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := strings.Repeat(fmt.Sprint(i), 1000+i)
			for range 3 {
				res, err := s.reg.Call(t.Context(), "read_file", []byte(fmt.Sprintf(`{"path":"f%d.txt"}`, i)))
				if err != nil {
					t.Error(err)
					return
				}
				var out struct{ Content string }
				if err := json.Unmarshal(res.Output, &out); err != nil || out.Content != want {
					t.Errorf("goroutine %d: content %.20q… (%d bytes), %v", i, out.Content, len(out.Content), err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
