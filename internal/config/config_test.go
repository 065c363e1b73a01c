package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/rules"
	"github.com/buddy-run/buddy/internal/base/tomlx"
)

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mkdir(t *testing.T, parts ...string) string {
	t.Helper()
	p := filepath.Join(parts...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// lineOf is the 1-based line of the first occurrence of s in doc.
func lineOf(t *testing.T, doc, s string) int {
	t.Helper()
	i := strings.Index(doc, s)
	if i < 0 {
		t.Fatalf("%q not in document", s)
	}
	return strings.Count(doc[:i], "\n") + 1
}

// fieldErrors returns the field errors of a Parse error.
func fieldErrors(t *testing.T, err error) []*tomlx.FieldError {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("error %v does not wrap errs.ErrConfig", err)
	}
	var list tomlx.Errors
	if errors.As(err, &list) {
		return list
	}
	var fe *tomlx.FieldError
	if errors.As(err, &fe) {
		return []*tomlx.FieldError{fe}
	}
	t.Fatalf("error %T %v carries no field error", err, err)
	return nil
}

// expectError asserts that parsing doc fails with exactly one error, at path
// and on the line of marker, with a message containing msg.
func expectError(t *testing.T, doc, path, marker, msg string) {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err == nil {
		t.Fatalf("Parse accepted (%+v):\n%s", c, doc)
	}
	got := fieldErrors(t, err)
	if len(got) != 1 {
		t.Fatalf("got %d errors, want 1: %v", len(got), err)
	}
	line := lineOf(t, doc, marker)
	if g := got[0]; g.Path != path || g.Line != line || !strings.Contains(g.Msg, msg) {
		t.Errorf("error = {%q, line %d, %q}, want {%q, line %d, containing %q}", g.Path, g.Line, g.Msg, path, line, msg)
	}
	if want := strings.TrimPrefix(fmt.Sprintf("%s (line %d): ", path, line), " "); !strings.Contains(err.Error(), want) {
		t.Errorf("error text %q does not contain %q", err, want)
	}
}

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, doc)
	}
	return c
}

func skillNames(c *Config) []string {
	var names []string
	for n := range c.Skills {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func TestParseMissionExample(t *testing.T) {
	dir := t.TempDir()
	docs := mkdir(t, dir, "home", "user", "documents")
	sandbox := mkdir(t, dir, "home", "user", "sandbox")
	doc := fmt.Sprintf(`[skills.read_file]
allowed_directories = [%q]

[skills.write_file]
allowed_directories = [%q]
approval = "always"   # "always" | "once" | "trust"

[skills.fetch_url]
allowed_domains = ["example.com", "api.github.com"]
`, docs, sandbox)
	c := mustParse(t, doc)
	if got := skillNames(c); !slices.Equal(got, []string{"fetch_url", "read_file", "write_file"}) {
		t.Fatalf("skills = %v", got)
	}
	if got := c.Skills["read_file"]; !slices.Equal(got.AllowedDirectories, []string{docs}) || got.Approval != "" || len(got.AllowedDomains) != 0 {
		t.Errorf("read_file = %+v", got)
	}
	if got := c.Skills["write_file"]; !slices.Equal(got.AllowedDirectories, []string{sandbox}) || got.Approval != ApprovalAlways {
		t.Errorf("write_file = %+v", got)
	}
	if got := c.Skills["fetch_url"]; !slices.Equal(got.AllowedDomains, []string{"example.com", "api.github.com"}) || len(got.AllowedDirectories) != 0 {
		t.Errorf("fetch_url = %+v", got)
	}
}

func TestSkillsPresence(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"empty document", "", nil},
		{"no skills section", "[server]\nlisten = \"127.0.0.1:9000\"\n", nil},
		{"empty skills table", "[skills]\n", nil},
		{"read_file only", "[skills.read_file]\n", []string{"read_file"}},
		{"read_file with a grant", fmt.Sprintf("[skills.read_file]\nallowed_directories = [%q]\n", dir), []string{"read_file"}},
		{"inline empty table", "skills = {read_file = {}}\n", []string{"read_file"}},
		{"dotted key", "skills.fetch_url.allowed_domains = [\"example.com\"]\n", []string{"fetch_url"}},
		{"memory", "[skills.memory]\nmemory = true\n", []string{"memory"}},
		{"several", "[skills.write_file]\n[skills.read_file]\n[skills.my_skill]\n", []string{"my_skill", "read_file", "write_file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.doc)
			if c.Skills == nil {
				t.Fatal("Skills is nil")
			}
			if got := skillNames(c); !slices.Equal(got, tt.want) {
				t.Errorf("skills = %v, want %v", got, tt.want)
			}
		})
	}
}

const serverProvider = `[server]
listen = "0.0.0.0:8080"
token_file = "/etc/buddy/token"
allowed_origins = ["https://chat.example.com", "http://localhost:3000"]
max_message_bytes = 65536
write_timeout = "3s"

[provider]
kind = "anthropic"
base_url = "https://api.anthropic.com"
model = "claude-x"
api_key_env = "ANTHROPIC_API_KEY"
timeout = "90s"
max_iterations = 4
`

func TestServerProviderUnaffectedBySkills(t *testing.T) {
	dir := t.TempDir()
	alone := mustParse(t, serverProvider)
	wantServer := Server{
		Listen:          "0.0.0.0:8080",
		TokenFile:       "/etc/buddy/token",
		AllowedOrigins:  []string{"https://chat.example.com", "http://localhost:3000"},
		MaxMessageBytes: 65536,
		WriteTimeout:    3 * time.Second,
		MaxConnections:  DefaultMaxConnections,
	}
	wantProvider := Provider{Kind: "anthropic", BaseURL: "https://api.anthropic.com", Model: "claude-x",
		APIKeyEnv: "ANTHROPIC_API_KEY", Timeout: 90 * time.Second, MaxIterations: 4,
		MaxAnswerBytes: DefaultMaxAnswerBytes, MaxToolCalls: DefaultMaxToolCalls}
	check := func(t *testing.T, c *Config) {
		t.Helper()
		if fmt.Sprintf("%#v", c.Server) != fmt.Sprintf("%#v", wantServer) {
			t.Errorf("server = %#v, want %#v", c.Server, wantServer)
		}
		if c.Provider != wantProvider {
			t.Errorf("provider = %#v, want %#v", c.Provider, wantProvider)
		}
	}
	check(t, alone)

	skills := fmt.Sprintf("\n[skills.read_file]\nallowed_directories = [%q]\n[skills.fetch_url]\nallowed_domains = [\"*.example.com\"]\napproval = \"once\"\n", dir)
	t.Run("skills after", func(t *testing.T) { check(t, mustParse(t, serverProvider+skills)) })
	t.Run("skills before", func(t *testing.T) { check(t, mustParse(t, skills+"\n"+serverProvider)) })

	broken := "\n[skills.read_file]\nallowed_directories = [\"/does/not/exist/anywhere\"]\napproval = \"sometimes\"\ntimeout = \"soon\"\n"
	t.Run("broken skills name only skills keys", func(t *testing.T) {
		_, err := Parse([]byte(serverProvider + broken))
		for _, fe := range fieldErrors(t, err) {
			if !strings.HasPrefix(fe.Path, "skills.read_file.") {
				t.Errorf("error outside the skills section: %v", fe)
			}
		}
		if n := len(fieldErrors(t, err)); n != 3 {
			t.Errorf("got %d errors, want 3: %v", n, err)
		}
	})
	t.Run("fixed skills", func(t *testing.T) {
		fixed := strings.NewReplacer("/does/not/exist/anywhere", dir, "sometimes", "trust", "soon", "30s").Replace(broken)
		c := mustParse(t, serverProvider+fixed)
		check(t, c)
		if sk := c.Skills["read_file"]; sk.Approval != ApprovalTrust || sk.Timeout != 30*time.Second {
			t.Errorf("read_file = %+v", sk)
		}
	})
	t.Run("skills unaffected by server and provider", func(t *testing.T) {
		a := mustParse(t, skills)
		b := mustParse(t, serverProvider+skills)
		if fmt.Sprintf("%#v", a.Skills) != fmt.Sprintf("%#v", b.Skills) {
			t.Errorf("skills differ: %#v vs %#v", a.Skills, b.Skills)
		}
	})
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, doc, path, marker string
	}{
		{"top level", "listen = \"x\"\n", "listen", "listen"},
		{"top level table", "[plugins]\nx = 1\n", "plugins", "[plugins]"},
		{"server", "[server]\nlisten = \"127.0.0.1:1\"\nport = 8080\n", "server.port", "port"},
		{"provider", "[provider]\nkind = \"openai\"\nmodel = \"m\"\napi_key = \"sk-...\"\n", "provider.api_key", "api_key ="},
		{"storage", "[storage]\ndir = \"/x\"\n", "storage.dir", "dir"},
		{"limits", "\n[limits]\nmax_fuel = 5\nmax_fuels = 6\n", "limits.max_fuels", "max_fuels"},
		{"approval", "[approval]\ntimeout = \"5s\"\nmode = \"always\"\n", "approval.mode", "mode"},
		{"skill", "[skills.read_file]\nallowed_directory = []\n", "skills.read_file.allowed_directory", "allowed_directory"},
		{"skill dotted", "skills.read_file.approvals = \"always\"\n", "skills.read_file.approvals", "approvals"},
		{"skill inline", "[skills]\nread_file = {dirs = []}\n", "skills.read_file.dirs", "read_file"},
		{"nested table in skill", "[skills.read_file]\n[skills.read_file.limits]\nx = 1\n", "skills.read_file.limits", "[skills.read_file.limits]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectError(t, tt.doc, tt.path, tt.marker, "unknown key")
		})
	}
	t.Run("all reported at once", func(t *testing.T) {
		doc := "[server]\nbogus = 1\n[provider]\nbogus = 2\n[skills.read_file]\nbogus = 3\n[extra]\n"
		got := fieldErrors(t, func() error { _, err := Parse([]byte(doc)); return err }())
		var paths []string
		for _, fe := range got {
			paths = append(paths, fmt.Sprintf("%s:%d", fe.Path, fe.Line))
		}
		if want := []string{"server.bogus:2", "provider.bogus:4", "skills.read_file.bogus:6", "extra:7"}; !slices.Equal(paths, want) {
			t.Errorf("errors at %v, want %v", paths, want)
		}
	})
}

func TestDirectories(t *testing.T) {
	dir := t.TempDir()
	home := mkdir(t, dir, "home")
	docs := mkdir(t, home, "docs")
	file := writeFile(t, dir, "file.txt", "x")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(docs, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)

	t.Run("missing directory", func(t *testing.T) {
		doc := fmt.Sprintf("[skills.read_file]\n\nallowed_directories = [\n  %q,\n  %q,\n]\n", docs, filepath.Join(dir, "nope"))
		expectError(t, doc, "skills.read_file.allowed_directories[1]", "allowed_directories", "does not exist")
		_, err := Parse([]byte(doc))
		if !strings.Contains(err.Error(), filepath.Join(dir, "nope")) {
			t.Errorf("error %q does not name the directory", err)
		}
	})
	t.Run("first entry missing", func(t *testing.T) {
		doc := "[skills.read_file]\nallowed_directories = [\"/no/such/dir\"]\n"
		expectError(t, doc, "skills.read_file.allowed_directories[0]", "allowed_directories", "directory /no/such/dir does not exist")
	})
	t.Run("file instead of a directory", func(t *testing.T) {
		doc := fmt.Sprintf("[skills.write_file]\nwrite_directories = [%q]\n", file)
		expectError(t, doc, "skills.write_file.write_directories[0]", "write_directories", "is not a directory")
	})
	t.Run("relative", func(t *testing.T) {
		doc := "[skills.read_file]\nread_directories = [\"docs\"]\n"
		expectError(t, doc, "skills.read_file.read_directories[0]", "read_directories", "must be an absolute path")
	})
	t.Run("dot relative", func(t *testing.T) {
		doc := "[skills.read_file]\nallowed_directories = [\"./docs\"]\n"
		expectError(t, doc, "skills.read_file.allowed_directories[0]", "allowed_directories", "must be an absolute path")
	})
	t.Run("other user's home", func(t *testing.T) {
		doc := "[skills.read_file]\nallowed_directories = [\"~root/x\"]\n"
		expectError(t, doc, "skills.read_file.allowed_directories[0]", "allowed_directories", "must be an absolute path")
	})
	t.Run("empty", func(t *testing.T) {
		doc := "[skills.read_file]\nallowed_directories = [\"\"]\n"
		expectError(t, doc, "skills.read_file.allowed_directories[0]", "allowed_directories", "must be an absolute path")
	})
	t.Run("NUL byte", func(t *testing.T) {
		doc := "[skills.read_file]\nallowed_directories = [\"/tmp\\u0000x\"]\n"
		expectError(t, doc, "skills.read_file.allowed_directories[0]", "allowed_directories", "NUL")
	})
	t.Run("tilde expansion", func(t *testing.T) {
		c := mustParse(t, "[skills.read_file]\nallowed_directories = [\"~/docs\", \"~\", \"~/docs/../docs/\"]\n")
		if got, want := c.Skills["read_file"].AllowedDirectories, []string{docs, home, docs}; !slices.Equal(got, want) {
			t.Errorf("dirs = %v, want %v", got, want)
		}
	})
	t.Run("tilde to a missing directory", func(t *testing.T) {
		doc := "[skills.read_file]\nallowed_directories = [\"~/missing\"]\n"
		expectError(t, doc, "skills.read_file.allowed_directories[0]", "allowed_directories", filepath.Join(home, "missing")+" does not exist")
	})
	t.Run("symlink to a directory", func(t *testing.T) {
		c := mustParse(t, fmt.Sprintf("[skills.read_file]\nallowed_directories = [%q]\n", link))
		if got := c.Skills["read_file"].AllowedDirectories; !slices.Equal(got, []string{link}) {
			t.Errorf("dirs = %v", got)
		}
	})
	t.Run("all three lists", func(t *testing.T) {
		c := mustParse(t, fmt.Sprintf("[skills.mine]\nallowed_directories = [%q]\nread_directories = [%q]\nwrite_directories = [\"~/docs\"]\n", docs, home))
		sk := c.Skills["mine"]
		if !slices.Equal(sk.AllowedDirectories, []string{docs}) || !slices.Equal(sk.ReadDirectories, []string{home}) || !slices.Equal(sk.WriteDirectories, []string{docs}) {
			t.Errorf("skill = %+v", sk)
		}
	})
	t.Run("paths elsewhere expand too", func(t *testing.T) {
		c := mustParse(t, "[storage]\ndata_dir = \"~/data\"\n[server]\ntoken_file = \"~/tok\"\n")
		if c.Storage.DataDir != filepath.Join(home, "data") || c.Storage.Path != filepath.Join(home, "data", "buddy.db") || c.Server.TokenFile != filepath.Join(home, "tok") {
			t.Errorf("storage = %+v, token = %q", c.Storage, c.Server.TokenFile)
		}
	})
	t.Run("relative storage", func(t *testing.T) {
		expectError(t, "[storage]\npath = \"buddy.db\"\n", "storage.path", "path", "must be an absolute path")
	})
}

func TestApproval(t *testing.T) {
	for _, v := range []string{ApprovalAlways, ApprovalOnce, ApprovalTrust} {
		t.Run(v, func(t *testing.T) {
			c := mustParse(t, fmt.Sprintf("[skills.fetch_url]\napproval = %q\n", v))
			if got := c.Skills["fetch_url"].Approval; got != v {
				t.Errorf("approval = %q", got)
			}
		})
	}
	for _, v := range []string{"never", "Always", "", " once", "ask"} {
		t.Run("bad "+v, func(t *testing.T) {
			expectError(t, fmt.Sprintf("[skills.fetch_url]\n\napproval = %q\n", v), "skills.fetch_url.approval", "approval", `must be "always", "once" or "trust"`)
		})
	}
	t.Run("not a string", func(t *testing.T) {
		expectError(t, "[skills.fetch_url]\napproval = true\n", "skills.fetch_url.approval", "approval", "expected a string, got a boolean")
	})
}

func TestDurations(t *testing.T) {
	keys := []struct{ table, key string }{
		{"server", "write_timeout"},
		{"provider", "timeout"},
		{"limits", "max_timeout"},
		{"limits", "fetch_timeout"},
		{"approval", "timeout"},
		{"skills.read_file", "timeout"},
	}
	bad := []struct{ value, msg string }{
		{`"abc"`, "is not a duration"},
		{`"10"`, "is not a duration"},
		{`""`, "is not a duration"},
		{`"0s"`, "must be > 0"},
		{`"-1s"`, "must be > 0"},
		{`"25h"`, "must be <= 24h"},
		{`10`, "expected a string, got an integer"},
	}
	for _, k := range keys {
		for _, b := range bad {
			t.Run(k.table+"."+k.key+"="+b.value, func(t *testing.T) {
				doc := fmt.Sprintf("[%s]\n%s = %s\n", k.table, k.key, b.value)
				expectError(t, doc, k.table+"."+k.key, k.key+" =", b.msg)
			})
		}
		t.Run(k.table+"."+k.key+" ok", func(t *testing.T) {
			mustParse(t, fmt.Sprintf("[%s]\n%s = \"1m30s\"\n", k.table, k.key))
		})
	}
	c := mustParse(t, "[limits]\nmax_timeout = \"24h\"\nfetch_timeout = \"250ms\"\n")
	if c.Limits.MaxTimeout != 24*time.Hour || c.Limits.FetchTimeout != 250*time.Millisecond {
		t.Errorf("limits = %+v", c.Limits)
	}
}

func TestProvider(t *testing.T) {
	t.Run("bad kind", func(t *testing.T) {
		expectError(t, "[provider]\nkind = \"ollama\"\nmodel = \"m\"\n", "provider.kind", "kind", `"ollama" must be "openai"`)
	})
	t.Run("model required with kind", func(t *testing.T) {
		expectError(t, "[provider]\nkind = \"openai\"\n", "provider.model", "[provider]", "required when provider.kind is set")
	})
	t.Run("empty model reported once", func(t *testing.T) {
		expectError(t, "[provider]\nkind = \"openai\"\nmodel = \"\"\n", "provider.model", "model", "must not be empty")
	})
	t.Run("no kind no model", func(t *testing.T) {
		c := mustParse(t, "[provider]\nmax_iterations = 3\n")
		if c.Provider.Kind != "" || c.Provider.MaxIterations != 3 || c.Provider.Timeout != DefaultProviderTimeout {
			t.Errorf("provider = %+v", c.Provider)
		}
	})
	t.Run("openai", func(t *testing.T) {
		c := mustParse(t, "[provider]\nkind = \"openai\"\nmodel = \"gpt-x\"\nbase_url = \"http://localhost:11434/v1\"\n")
		if c.Provider.Kind != "openai" || c.Provider.Model != "gpt-x" || c.Provider.MaxIterations != DefaultMaxIterations {
			t.Errorf("provider = %+v", c.Provider)
		}
	})
	t.Run("base_url", func(t *testing.T) {
		expectError(t, "[provider]\nbase_url = \"ftp://x\"\n", "provider.base_url", "base_url", "must be an http(s) URL")
	})
	t.Run("api_key_env", func(t *testing.T) {
		expectError(t, "[provider]\napi_key_env = \"sk-abc123\"\n", "provider.api_key_env", "api_key_env", "not an environment variable name")
	})
	t.Run("api_key_secret", func(t *testing.T) {
		c := mustParse(t, "[provider]\nkind = \"openai\"\nmodel = \"m\"\napi_key_secret = \"openai\"\n")
		if c.Provider.APIKeySecret != "openai" || c.Provider.APIKeyEnv != "" {
			t.Errorf("provider = %+v", c.Provider)
		}
		expectError(t, "[provider]\napi_key_secret = \"sk-abc 123\"\n", "provider.api_key_secret", "api_key_secret", "not a secret name")
		expectError(t, "[provider]\napi_key_env = \"OPENAI_API_KEY\"\napi_key_secret = \"openai\"\n", "provider.api_key_secret", "api_key_secret", "not both")
	})
	t.Run("max_iterations", func(t *testing.T) {
		expectError(t, "[provider]\nmax_iterations = 0\n", "provider.max_iterations", "max_iterations", "must be > 0")
		expectError(t, "[provider]\nmax_iterations = 1001\n", "provider.max_iterations", "max_iterations", "must be <= 1000")
	})
}

func TestValues(t *testing.T) {
	tests := []struct {
		name, doc, path, marker, msg string
	}{
		{"listen without port", "[server]\nlisten = \"localhost\"\n", "server.listen", "listen", "must be host:port"},
		{"listen bad port", "[server]\nlisten = \"localhost:http\"\n", "server.listen", "listen", "must be host:port"},
		{"listen port too big", "[server]\nlisten = \"127.0.0.1:70000\"\n", "server.listen", "listen", "must be host:port"},
		{"listen bare ipv6", "[server]\nlisten = \"::1:80\"\n", "server.listen", "listen", "must be host:port"},
		{"listen empty", "[server]\nlisten = \" \"\n", "server.listen", "listen", "must not be empty"},
		{"origin without scheme", "[server]\nallowed_origins = [\"https://ok.example\", \"example.com\"]\n", "server.allowed_origins[1]", "allowed_origins", "must be an origin"},
		{"origin with path", "[server]\nallowed_origins = [\"https://example.com/\"]\n", "server.allowed_origins[0]", "allowed_origins", "must be an origin"},
		{"origin scheme only", "[server]\nallowed_origins = [\"https://\"]\n", "server.allowed_origins[0]", "allowed_origins", "must be an origin"},
		{"origin userinfo", "[server]\nallowed_origins = [\"https://u@example.com\"]\n", "server.allowed_origins[0]", "allowed_origins", "must be an origin"},
		{"max_message_bytes", "[server]\nmax_message_bytes = -1\n", "server.max_message_bytes", "max_message_bytes", "must be > 0"},
		{"max_answer_bytes zero", "[provider]\nmax_answer_bytes = 0\n", "provider.max_answer_bytes", "max_answer_bytes", "must be > 0"},
		{"max_answer_bytes huge", "[provider]\nmax_answer_bytes = 2147483648\n", "provider.max_answer_bytes", "max_answer_bytes", "must be <= 1073741824"},
		{"allowed host the server could never match", "[server]\nallowed_hosts = [\"1.2.3\"]\n", "server.allowed_hosts[0]", "allowed_hosts", "ends in a number"},
		{"allowed origin with port 0", "[server]\nallowed_origins = [\"http://localhost:0\"]\n", "server.allowed_origins[0]", "allowed_origins", "port must be a number from 1 to 65535"},
		{"allowed origin with a path", "[server]\nallowed_origins = [\"https://x.example/\"]\n", "server.allowed_origins[0]", "allowed_origins", "nothing else"},
		{"context_tokens zero", "[provider]\ncontext_tokens = 0\n", "provider.context_tokens", "context_tokens", "must be > 0"},
		{"context_tokens tiny", "[provider]\ncontext_tokens = 100\n", "provider.context_tokens", "context_tokens", "too small a window"},
		{"max_tokens over half the window", "[provider]\ncontext_tokens = 4096\nmax_tokens = 4000\n", "provider.max_tokens", "max_tokens", "at most half of it"},
		{"negative price", "[provider]\nprice_per_mtok_in = -1.0\n", "provider.price_per_mtok_in", "price_per_mtok_in", "dollars per million tokens"},
		{"absurd price", "[provider]\nprice_per_mtok_out = 1e9\n", "provider.price_per_mtok_out", "price_per_mtok_out", "dollars per million tokens"},
		{"max_tool_calls zero", "[provider]\nmax_tool_calls = 0\n", "provider.max_tool_calls", "max_tool_calls", "must be > 0"},
		{"max_tool_calls huge", "[provider]\nmax_tool_calls = 1025\n", "provider.max_tool_calls", "max_tool_calls", "must be <= 1024"},
		{"max_fuel zero", "[limits]\nmax_fuel = 0\n", "limits.max_fuel", "max_fuel", "must be > 0"},
		{"max_fuel huge", "[limits]\nmax_fuel = 9223372036854775807\n", "limits.max_fuel", "max_fuel", "must be <="},
		{"max_memory_mb 1", "[limits]\nmax_memory_mb = 1\n", "limits.max_memory_mb", "max_memory_mb", "at least 2"},
		{"max_memory_mb 0 reported once", "[limits]\nmax_memory_mb = 0\n", "limits.max_memory_mb", "max_memory_mb", "must be > 0"},
		{"max_memory_mb 5000", "[limits]\nmax_memory_mb = 5000\n", "limits.max_memory_mb", "max_memory_mb", "must be <= 4096"},
		{"max_concurrent", "[limits]\nmax_concurrent = 0\n", "limits.max_concurrent", "max_concurrent", "must be > 0"},
		{"max_read_bytes", "[limits]\nmax_read_bytes = 2147483648\n", "limits.max_read_bytes", "max_read_bytes", "must be <="},
		{"max_fetch_bytes float", "[limits]\nmax_fetch_bytes = 5e6\n", "limits.max_fetch_bytes", "max_fetch_bytes", "expected an integer, got a float"},
		{"skill name", "[skills.Read-File]\n", "skills.Read-File", "[skills", "not a skill name"},
		{"skill name leading digit", "[skills.1x]\n", "skills.1x", "[skills", "not a skill name"},
		{"domain with scheme", "[skills.fetch_url]\nallowed_domains = [\"https://example.com\"]\n", "skills.fetch_url.allowed_domains[0]", "allowed_domains", "has a scheme"},
		{"domain star", "[skills.fetch_url]\nallowed_domains = [\"example.com\", \"*\"]\n", "skills.fetch_url.allowed_domains[1]", "allowed_domains", "every host"},
		{"domain bare wildcard tld", "[skills.fetch_url]\nallowed_domains = [\"*.com\"]\n", "skills.fetch_url.allowed_domains[0]", "allowed_domains", "top-level domain"},
		{"env", "[skills.x]\nenv = [\"OK\", \"NOT-OK\"]\n", "skills.x.env[1]", "env", "not an environment variable name"},
		{"max_bytes", "[skills.x]\nmax_bytes = 0\n", "skills.x.max_bytes", "max_bytes", "must be > 0"},
		{"fuel", "[skills.x]\nfuel = -1\n", "skills.x.fuel", "fuel", "must be > 0"},
		{"memory not bool", "[skills.x]\nmemory = \"yes\"\n", "skills.x.memory", "memory", "expected a boolean, got a string"},
		{"skills not a table", "skills = [\"read_file\"]\n", "skills", "skills", "expected a table, got an array"},
		{"syntax", "[server]\nlisten = \"x\n", "", "listen", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectError(t, tt.doc, tt.path, tt.marker, tt.msg)
		})
	}
	t.Run("several at once", func(t *testing.T) {
		doc := "[server]\nlisten = \"nope\"\n[limits]\nmax_fuel = 0\n[skills.a]\napproval = \"x\"\n[skills.b]\nenv = [\"1\"]\n"
		_, err := Parse([]byte(doc))
		var paths []string
		for _, fe := range fieldErrors(t, err) {
			paths = append(paths, fmt.Sprintf("%s:%d", fe.Path, fe.Line))
		}
		if want := []string{"server.listen:2", "limits.max_fuel:4", "skills.a.approval:6", "skills.b.env[0]:8"}; !slices.Equal(paths, want) {
			t.Errorf("errors at %v, want %v", paths, want)
		}
	})
	t.Run("domains normalised", func(t *testing.T) {
		c := mustParse(t, "[skills.fetch_url]\nallowed_domains = [\"API.GitHub.com.\", \"[::1]:8080\"]\n")
		if got := c.Skills["fetch_url"].AllowedDomains; !slices.Equal(got, []string{"api.github.com", "[::1]:8080"}) {
			t.Errorf("domains = %v", got)
		}
	})
	t.Run("listen forms", func(t *testing.T) {
		for _, l := range []string{"127.0.0.1:7700", ":0", "[::1]:80", "localhost:65535"} {
			if c := mustParse(t, fmt.Sprintf("[server]\nlisten = %q\n", l)); c.Server.Listen != l {
				t.Errorf("listen = %q", c.Server.Listen)
			}
		}
	})
}

func TestDefaults(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/xdg/data")
	check := func(t *testing.T, c *Config, dataDir string) {
		t.Helper()
		want := Config{
			Server:   Server{Listen: DefaultListen, TokenFile: filepath.Join(dataDir, "token"), MaxMessageBytes: 1 << 20, WriteTimeout: 10 * time.Second, MaxConnections: DefaultMaxConnections},
			Provider: Provider{Timeout: 2 * time.Minute, MaxIterations: 10, MaxAnswerBytes: 1 << 20, MaxToolCalls: 64},
			Storage:  Storage{DataDir: dataDir, Path: filepath.Join(dataDir, "buddy.db")},
			Limits: Limits{MaxFuel: 1e10, MaxMemoryMB: 256, MaxTimeout: 5 * time.Minute, MaxConcurrent: 2 * goruntime.GOMAXPROCS(0),
				MaxReadBytes: 10 << 20, MaxWriteBytes: 10 << 20, MaxFetchBytes: 5 << 20, FetchTimeout: 10 * time.Second},
			Approval: Approval{Timeout: time.Minute, AfterPrivateRead: AfterPrivateReadAsk},
			MCP:      MCP{Approval: MCPApprovalElicit},
			Instructions: Instructions{Enabled: true, SkillsDir: filepath.Join(dataDir, "instructions"),
				PromptTokens: DefaultInstructionTokens},
			Skills: map[string]Skill{}, Channels: map[string]Channel{},
		}
		if got, w := fmt.Sprintf("%#v", *c), fmt.Sprintf("%#v", want); got != w {
			t.Errorf("config =\n%s\nwant\n%s", got, w)
		}
	}
	t.Run("Default", func(t *testing.T) { check(t, Default(), "/xdg/data/buddy") })
	t.Run("empty document", func(t *testing.T) { check(t, mustParse(t, ""), "/xdg/data/buddy") })
	t.Run("empty tables", func(t *testing.T) {
		check(t, mustParse(t, "[server]\n[provider]\n[storage]\n[limits]\n[approval]\n[mcp]\n[instructions]\n"), "/xdg/data/buddy")
	})
	t.Run("relative XDG_DATA_HOME is ignored", func(t *testing.T) {
		t.Setenv("XDG_DATA_HOME", "relative/data")
		t.Setenv("HOME", "/home/someone")
		check(t, Default(), "/home/someone/.local/share/buddy")
	})
	t.Run("unset XDG_DATA_HOME", func(t *testing.T) {
		t.Setenv("XDG_DATA_HOME", "")
		t.Setenv("HOME", "/home/other")
		check(t, Default(), "/home/other/.local/share/buddy")
	})
	t.Run("data_dir moves the database and token", func(t *testing.T) {
		c := mustParse(t, "[storage]\ndata_dir = \"/srv/buddy\"\n")
		if c.Storage.Path != "/srv/buddy/buddy.db" || c.Server.TokenFile != "/srv/buddy/token" {
			t.Errorf("storage = %+v token = %q", c.Storage, c.Server.TokenFile)
		}
	})
	t.Run("explicit values kept", func(t *testing.T) {
		c := mustParse(t, "[storage]\ndata_dir = \"/srv/buddy\"\npath = \"/db/b.db\"\n[limits]\nmax_concurrent = 3\n[approval]\ntimeout = \"5s\"\n")
		if c.Storage.Path != "/db/b.db" || c.Limits.MaxConcurrent != 3 || c.Approval.Timeout != 5*time.Second || c.Limits.MaxFuel != DefaultMaxFuel {
			t.Errorf("config = %+v", c)
		}
	})
}

func TestLoad(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/xdg/data")
	dir := t.TempDir()
	t.Run("empty path gives defaults", func(t *testing.T) {
		c, err := Load("")
		if err != nil || c.Path != "" || c.Storage.DataDir != "/xdg/data/buddy" {
			t.Errorf("Load(\"\") = %+v, %v", c, err)
		}
	})
	t.Run("file", func(t *testing.T) {
		p := writeFile(t, dir, "ok.toml", "[server]\nlisten = \"127.0.0.1:1\"\n")
		c, err := Load(p)
		if err != nil || c.Path != p || c.Server.Listen != "127.0.0.1:1" {
			t.Errorf("Load = %+v, %v", c, err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.toml"))
		if !errors.Is(err, errs.ErrConfig) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("invalid names file, key and line", func(t *testing.T) {
		p := writeFile(t, dir, "bad.toml", "\n[skills.read_file]\nallowed_directories = [\"/no/such/dir\"]\n")
		_, err := Load(p)
		want := p + ": skills.read_file.allowed_directories[0] (line 3): directory /no/such/dir does not exist"
		if err == nil || err.Error() != want {
			t.Errorf("err = %v\nwant %s", err, want)
		}
		if !errors.Is(err, errs.ErrConfig) {
			t.Error("not a config error")
		}
	})
}

func TestDataDir(t *testing.T) {
	c := Default()
	c.Storage.DataDir = filepath.Join(t.TempDir(), "a", "b")
	got, err := c.DataDir()
	if err != nil || got != c.Storage.DataDir {
		t.Fatalf("DataDir = %q, %v", got, err)
	}
	fi, err := os.Stat(got)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir %v, %v", fi.Mode(), err)
	}
	c.Storage.DataDir = filepath.Join(writeFile(t, t.TempDir(), "f", ""), "sub")
	if _, err := c.DataDir(); !errors.Is(err, errs.ErrConfig) {
		t.Errorf("DataDir under a file: %v", err)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	flagFile := writeFile(t, dir, "flag/buddy.toml", "")
	envFile := writeFile(t, dir, "env/buddy.toml", "")
	cwd := mkdir(t, dir, "cwd")
	writeFile(t, cwd, "buddy.toml", "")
	xdg := mkdir(t, dir, "xdg")
	xdgFile := writeFile(t, xdg, "buddy/buddy.toml", "")
	home := mkdir(t, dir, "home")
	homeFile := writeFile(t, home, ".config/buddy/buddy.toml", "")
	empty := mkdir(t, dir, "empty")
	cwdWithDir := mkdir(t, dir, "cwd2")
	mkdir(t, cwdWithDir, "buddy.toml")

	tests := []struct {
		name                  string
		flag, env, chdir, xdg string
		home                  string
		want                  string
		wantErr               string
	}{
		{name: "flag first", flag: flagFile, env: envFile, chdir: cwd, xdg: xdg, home: home, want: flagFile},
		{name: "then $BUDDY_CONFIG", env: envFile, chdir: cwd, xdg: xdg, home: home, want: envFile},
		{name: "./buddy.toml is not read unless named", chdir: cwd, xdg: xdg, home: home, want: xdgFile},
		{name: "./buddy.toml alone is not read", chdir: cwd, xdg: empty, home: empty, want: ""},
		{name: "then $XDG_CONFIG_HOME", chdir: empty, xdg: xdg, home: home, want: xdgFile},
		{name: "then ~/.config when XDG unset", chdir: empty, home: home, want: homeFile},
		{name: "relative XDG ignored", chdir: empty, xdg: "xdg", home: home, want: homeFile},
		{name: "then nothing", chdir: empty, xdg: empty, home: empty, want: ""},
		{name: "./buddy.toml directory skipped", chdir: cwdWithDir, xdg: empty, home: empty, want: ""},
		{name: "missing flag file is an error", flag: filepath.Join(dir, "nope.toml"), env: envFile, chdir: cwd, wantErr: "--config names"},
		{name: "missing $BUDDY_CONFIG is an error", env: filepath.Join(dir, "nope.toml"), chdir: cwd, wantErr: "$BUDDY_CONFIG names"},
		{name: "flag directory is an error", flag: dir, chdir: cwd, wantErr: "a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BUDDY_CONFIG", tt.env)
			t.Setenv("XDG_CONFIG_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			t.Chdir(tt.chdir)
			got, err := Find(tt.flag)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errs.ErrConfig) {
					t.Fatalf("Find = %q, %v; want a config error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Find(%q) = %q, %v; want %q", tt.flag, got, err, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(serverProvider)
	f.Add("[skills.read_file]\nallowed_directories = [\"/\", \"~/x\", \"rel\"]\n[skills.fetch_url]\nallowed_domains = [\"*\", \"*.a.b\"]\n")
	f.Add("[limits]\nmax_memory_mb = 1\nmax_timeout = \"-1s\"\n[approval]\ntimeout = \"1h\"\n")
	f.Fuzz(func(t *testing.T, doc string) {
		c, err := Parse([]byte(doc))
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			if !errors.Is(err, errs.ErrConfig) {
				t.Fatalf("error %v is not a config error", err)
			}
			return
		}
		if c.Skills == nil || c.Server.Listen == "" || c.Storage.DataDir == "" || c.Limits.MaxFuel == 0 ||
			c.Limits.MaxMemoryMB < 2 || c.Approval.Timeout <= 0 || c.Limits.MaxConcurrent <= 0 {
			t.Fatalf("defaults not filled: %+v", c)
		}
		for name, sk := range c.Skills {
			if !rules.ValidSkillName(name) {
				t.Fatalf("accepted skill name %q", name)
			}
			for _, d := range slices.Concat(sk.AllowedDirectories, sk.ReadDirectories, sk.WriteDirectories) {
				if !filepath.IsAbs(d) {
					t.Fatalf("accepted relative directory %q", d)
				}
			}
			for _, d := range sk.AllowedDomains {
				if d == "*" {
					t.Fatal("accepted a \"*\" grant")
				}
			}
			switch sk.Approval {
			case "", ApprovalAlways, ApprovalOnce, ApprovalTrust:
			default:
				t.Fatalf("accepted approval %q", sk.Approval)
			}
		}
	})
}

// TestSkillCredentials: [skills.NAME] credentials = [...] names secrets.
func TestSkillCredentials(t *testing.T) {
	c := mustParse(t, "[skills.gh]\nallowed_domains = [\"api.github.com\"]\ncredentials = [\"github\", \"gh-app\"]\n")
	if got := c.Skills["gh"].Credentials; !slices.Equal(got, []string{"github", "gh-app"}) {
		t.Errorf("credentials = %v", got)
	}
	expectError(t, "[skills.gh]\ncredentials = [\"ok\", \"not ok\"]\n", "skills.gh.credentials[1]", "credentials", "not a secret name")
	expectError(t, "[skills.gh]\ncredentials = [\"github\", \"github\"]\n", "skills.gh.credentials[1]", "credentials", "listed twice")
	expectError(t, "[skills.gh]\ncredentials = \"github\"\n", "skills.gh.credentials", "credentials", "")
}

// TestChannelAdapter: [channels.NAME] adapter names a channel adapter's
// module (skill.toml beside it): a channel buddy has no built-in adapter
// for is accepted with one and an api_base, refused without; the module
// must be an absolute path to a file with its manifest beside it; the name
// is a store key and a route, so it is restricted.
func TestChannelAdapter(t *testing.T) {
	dir := t.TempDir()
	mod := writeFile(t, dir, "matrix.wasm", "\x00asm\x01\x00\x00\x00")
	writeFile(t, dir, "skill.toml", "[skill]\nname = \"matrix\"\n")
	lone := writeFile(t, t.TempDir(), "lone.wasm", "\x00asm\x01\x00\x00\x00")

	c := mustParse(t, fmt.Sprintf("[channels.matrix]\nadapter = %q\napi_base = \"https://matrix.example.org\"\n", mod))
	if ch := c.Channels["matrix"]; ch.Adapter != mod || ch.APIBase != "https://matrix.example.org" || ch.Credential != "matrix" || ch.DMPolicy != DMPolicyPairing {
		t.Errorf("matrix = %+v", ch)
	}
	c = mustParse(t, fmt.Sprintf("[channels.telegram]\nadapter = %q\n", mod))
	if ch := c.Channels["telegram"]; ch.Adapter != mod || ch.APIBase != KnownChannels["telegram"] {
		t.Errorf("telegram with its own adapter = %+v", ch)
	}

	for _, tc := range []struct{ doc, path, marker, msg string }{
		{"[channels.matrix]\napi_base = \"https://m.example\"\n", "channels.matrix", "[channels.matrix]", "needs adapter"},
		{fmt.Sprintf("[channels.matrix]\nadapter = %q\n", mod), "channels.matrix", "[channels.matrix]", "api_base"},
		{fmt.Sprintf("[channels.Ma-trix]\nadapter = %q\napi_base = \"https://m.example\"\n", mod), "channels.Ma-trix", "[channels.Ma-trix]", "not a channel name"},
		{"[channels.telegram]\nadapter = \"matrix.wasm\"\n", "channels.telegram.adapter", "adapter =", "absolute path"},
		{fmt.Sprintf("[channels.telegram]\nadapter = %q\n", filepath.Join(dir, "missing.wasm")), "channels.telegram.adapter", "adapter =", "is not a file"},
		{fmt.Sprintf("[channels.telegram]\nadapter = %q\n", dir), "channels.telegram.adapter", "adapter =", "is not a file"},
		{fmt.Sprintf("[channels.telegram]\nadapter = %q\n", lone), "channels.telegram.adapter", "adapter =", "no skill.toml beside"},
	} {
		expectError(t, tc.doc, tc.path, tc.marker, tc.msg)
	}
}
