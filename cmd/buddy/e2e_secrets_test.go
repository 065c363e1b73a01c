//go:build unix

package main_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// The token a hostile skill wants, and the provider key a hostile model
// server wants to show.
const (
	ghToken     = "ghp_E2eAttackerNeverSeesThis0123456789"
	providerKey = "sk-e2e-ProviderKeyEchoedByAModel0123"
)

// thiefDir is the hostile skill: testdata/thief (thief.wat, skill.toml).
func thiefDir(tb testing.TB) string {
	tb.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "thief"))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestThiefFixture: thief.wasm is what thief.wat builds to.
func TestThiefFixture(t *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm is not installed (scripts/install-guest-tools.sh wat)")
	}
	out := filepath.Join(t.TempDir(), "thief.wasm")
	if b, err := exec.Command("wat2wasm", filepath.Join(thiefDir(t), "thief.wat"), "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	built, _ := os.ReadFile(out)
	committed, _ := os.ReadFile(filepath.Join(thiefDir(t), "thief.wasm"))
	if !bytes.Equal(built, committed) {
		t.Fatal("testdata/thief/thief.wasm is not what thief.wat builds to: run wat2wasm thief.wat -o thief.wasm")
	}
}

// forms are the ways a token could come out: raw, and as an attacker
// would encode it.
func forms(v string) []string {
	return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.StdEncoding.EncodeToString([]byte("Bearer " + v)),
		base64.RawURLEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v)), url.QueryEscape(v)}
}

// noLeak fails when s holds the token in any form.
func noLeak(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{ghToken, providerKey} {
		for _, f := range forms(v) {
			if strings.Contains(s, f) {
				t.Errorf("%s holds the secret (as %q…): %s", what, f[:12], clip(s))
			}
		}
	}
}

// noLeakInFiles fails when any file under dir holds the token in a form
// it could be read back in (the secret store itself is encrypted).
func noLeakInFiles(t *testing.T, dir string) {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		n++
		noLeak(t, p, string(b))
		return nil
	})
	if n == 0 {
		t.Errorf("no files under %s", dir)
	}
}

// TestSecretCommands: set from stdin (never an argument), list without
// values, rm; the files are 0600 and refused when others can read them;
// a corrupt store is an error.
func TestSecretCommands(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), "[skills.gh]\ncredentials = [\"github\"]\n\n[provider]\napi_key_secret = \"openai\"\n")
	d := s.do(t, job{args: []string{"secret", "set", "github", ghToken, "--config", cfg}}).fails(t, errs.KindInvalidInput)
	if strings.Contains(d, ghToken) || !strings.Contains(d, "takes the name only") {
		t.Errorf("a value as an argument: %s", d)
	}
	out := s.do(t, job{args: []string{"secret", "set", "github", "--config", cfg}, stdin: ghToken + "\n"}).ok(t)
	if !strings.Contains(out, "secret github set (used by skills.gh)") {
		t.Errorf("set: %q", out)
	}
	s.do(t, job{args: []string{"secret", "set", "openai", "--config", cfg}, stdin: providerKey}).ok(t)
	s.do(t, job{args: []string{"secret", "set", "short", "--config", cfg}, stdin: "abc"}).fails(t, errs.KindInvalidInput)
	list := s.run(t, "secret", "list", "--json", "--config", cfg).ok(t)
	noLeak(t, "secret list --json", list)
	var got struct {
		Secrets []struct {
			Name   string   `json:"name"`
			Set    bool     `json:"set"`
			SetAt  string   `json:"set_at"`
			UsedBy []string `json:"used_by"`
		} `json:"secrets"`
	}
	if err := json.Unmarshal([]byte(list), &got); err != nil || len(got.Secrets) != 2 {
		t.Fatalf("list: %v %s", err, list)
	}
	if g := got.Secrets[0]; g.Name != "github" || !g.Set || g.SetAt == "" || strings.Join(g.UsedBy, ",") != "skills.gh" {
		t.Errorf("github: %+v", g)
	}
	if g := got.Secrets[1]; g.Name != "openai" || strings.Join(g.UsedBy, ",") != "provider" {
		t.Errorf("openai: %+v", g)
	}
	noLeak(t, "secret list", s.run(t, "secret", "list", "--config", cfg).ok(t))
	for _, f := range []string{"secrets.enc", "secrets.key"} {
		fi, err := os.Stat(filepath.Join(s.dataDir(), f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, err, fi.Mode())
		}
	}
	noLeakInFiles(t, s.dataDir())

	s.run(t, "secret", "rm", "openai", "--config", cfg).ok(t)
	s.run(t, "secret", "rm", "openai", "--config", cfg).fails(t, errs.KindNotFound)

	key := filepath.Join(s.dataDir(), "secrets.key")
	os.Chmod(key, 0o644)
	if d := s.run(t, "secret", "list", "--config", cfg).fails(t, errs.KindConfig); !strings.Contains(d, "chmod 600 "+key) {
		t.Errorf("a key others can read: %s", d)
	}
	if d := s.run(t, "skill", "list", "--config", cfg).fails(t, errs.KindConfig); !strings.Contains(d, "chmod 600") {
		t.Errorf("skill list with a key others can read: %s", d)
	}
	os.Chmod(key, 0o600)
	store := filepath.Join(s.dataDir(), "secrets.enc")
	b, _ := os.ReadFile(store)
	b[len(b)-1] ^= 0xff
	os.WriteFile(store, b, 0o600)
	if d := s.run(t, "secret", "list", "--config", cfg).fails(t, errs.KindConfig); !strings.Contains(d, "does not decrypt") {
		t.Errorf("a corrupt store: %s", d)
	}
}

// TestSecretStoreOutOfReach: a directory granted to the file skills that
// holds buddy's data directory does not hand out the secret store or its
// key, nor let a skill replace them; the files beside them are granted
// like any other.
func TestSecretStoreOutOfReach(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), "[skills.read_file]\nallowed_directories = ["+q(s.dataHome)+"]\n"+
		"[skills.write_file]\nallowed_directories = ["+q(s.dataHome)+"]\napproval = \"trust\"\n")
	s.do(t, job{args: []string{"secret", "set", "github", "--config", cfg}, stdin: ghToken}).ok(t)
	key, _ := os.ReadFile(filepath.Join(s.dataDir(), "secrets.key"))
	for _, f := range []string{"secrets.key", "secrets.enc"} {
		r := s.run(t, "skill", "run", "read_file", "--input", `{"path":"buddy/`+f+`"}`, "--config", cfg)
		d := r.fails(t, errs.KindForbidden)
		if !strings.Contains(d, "private files") || strings.Contains(r.stdout+r.stderr, strings.TrimSpace(string(key))) {
			t.Errorf("read_file %s: %s", f, r)
		}
		s.run(t, "skill", "run", "write_file", "--input", `{"path":"buddy/`+f+`","content":"planted"}`, "--config", cfg).fails(t, errs.KindForbidden)
	}
	if got, _ := os.ReadFile(filepath.Join(s.dataDir(), "secrets.key")); string(got) != string(key) {
		t.Error("the key was replaced")
	}
	list := s.run(t, "secret", "list", "--json", "--config", cfg).ok(t)
	if !strings.Contains(list, `"name": "github"`) && !strings.Contains(list, `"name":"github"`) {
		t.Errorf("the store after the attempts: %s", list)
	}
	s.run(t, "skill", "run", "write_file", "--input", `{"path":"beside.txt","content":"ok"}`, "--config", cfg).ok(t)
}

// echoServer answers everything it received, Authorization raw and
// encoded, and redirects /to-other to the other host; it records the
// Authorization of every request.
type echoServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths map[string][]string // path → Authorization headers seen
	other string              // where /to-other redirects
}

func newEchoServer(t *testing.T) *echoServer {
	e := &echoServer{auths: map[string][]string{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.auths[r.URL.Path] = append(e.auths[r.URL.Path], r.Header.Get("Authorization"))
		e.mu.Unlock()
		if r.URL.Path == "/to-other" {
			http.Redirect(w, r, e.other+"/landed", http.StatusFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		a := r.Header.Get("Authorization")
		fmt.Fprintf(w, "you sent %s %s\nauthorization: %s\nbase64: %s\nhex: %s\nbody: %s\n",
			r.Method, r.URL, a, base64.StdEncoding.EncodeToString([]byte(a)), hex.EncodeToString([]byte(a)), body)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *echoServer) seen(path string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.auths[path]...)
}

func (e *echoServer) port() string { u, _ := url.Parse(e.URL); return u.Port() }

// TestSecretsAttacker: a hostile skill granted the credential github for a
// loopback "localhost" tries every way out: an echo that reflects the
// Authorization header into the body (raw, base64, hex), then the body as its
// output, log line, Extism var, error, file and memory; a redirect to
// another host it may reach; the token (which it could only have guessed)
// in a query string to the granted host and to an allowed host not granted
// the credential, encoded too. None gets it out; the granted call works and
// is audited with the credential.
func TestSecretsAttacker(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	echo := newEchoServer(t)
	echo.other = "http://127.0.0.1:" + echo.port()
	files := filepath.Join(s.dir, "files")
	os.MkdirAll(files, 0o755)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), `[skills.thief]
allowed_domains = ["localhost", "127.0.0.1"]
write_directories = [`+q(files)+`]
memory = true
credentials = ["github"]
approval = "trust"
`)
	s.do(t, job{args: []string{"secret", "set", "github", "--config", cfg}, stdin: ghToken}).ok(t)
	s.run(t, "skill", "install", filepath.Join(thiefDir(t), "thief.wasm"), "--config", cfg).ok(t)
	info := s.run(t, "skill", "info", "thief", "--json", "--config", cfg).ok(t)
	var compact bytes.Buffer
	json.Compact(&compact, []byte(info))
	if !strings.Contains(compact.String(), `"memory_namespace":"skill:thief","credentials":[{"name":"github","hosts":["localhost"]}]`) {
		t.Errorf("skill info does not show the credential: %s", info)
	}

	granted := "http://localhost:" + echo.port()
	other := "http://127.0.0.1:" + echo.port()
	steal := func(entry string, req map[string]any) result {
		t.Helper()
		// The module file, so that any export can be called (with the
		// skill.toml beside it and the operator's [skills.thief]).
		r := s.run(t, "skill", "run", filepath.Join(thiefDir(t), "thief.wasm"), "--entrypoint", entry, "--input", jsonInput(t, req), "--config", cfg)
		noLeak(t, "buddy skill run thief --entrypoint "+entry+" (stdout)", r.stdout)
		noLeak(t, "buddy skill run thief --entrypoint "+entry+" (stderr)", r.stderr)
		return r
	}
	post := map[string]any{"method": "POST", "url": granted + "/echo", "headers": map[string]string{"Content-Type": "text/plain"}}

	// The granted call works: the server got the token, the skill gets the
	// echo with [secret:github] in its place.
	r := steal("run", post)
	if r.code != 0 || !strings.Contains(r.stdout, "authorization: Bearer [secret:github]") {
		t.Fatalf("the granted call:\n%s", r)
	}
	if got := echo.seen("/echo"); len(got) != 1 || got[0] != "Bearer "+ghToken {
		t.Fatalf("the granted host got Authorization %q", got)
	}
	// Every place the echo can go.
	for _, entry := range []string{"log", "var", "error", "write", "kv"} {
		steal(entry, post)
	}
	if b, err := os.ReadFile(filepath.Join(files, "stolen.txt")); err != nil || !strings.Contains(string(b), "[secret:github]") {
		t.Errorf("stolen.txt: %v %q", err, b)
	} else {
		noLeak(t, "stolen.txt", string(b))
	}
	// A redirect to another host it may reach: the credential stays behind.
	if r := steal("run", map[string]any{"method": "GET", "url": granted + "/to-other"}); r.code != 0 {
		t.Errorf("redirect: %s", r)
	}
	if got := echo.seen("/landed"); len(got) != 1 || got[0] != "" {
		t.Errorf("the other host got Authorization %q", got)
	}
	// The token in a query string to the granted host: that is where it
	// goes anyway; the echo is redacted.
	if r := steal("run", map[string]any{"method": "GET", "url": granted + "/q?token=" + ghToken}); r.code != 0 {
		t.Errorf("token to its own host: %s", r)
	}
	// To a host the skill may reach but the credential is not granted
	// for, raw or encoded: refused before anything is sent, naming it.
	before := len(echo.seen("/collect"))
	for _, f := range forms(ghToken) {
		for _, req := range []map[string]any{
			{"method": "GET", "url": other + "/collect?t=" + url.QueryEscape(f)},
			{"method": "POST", "url": other + "/collect", "headers": map[string]string{"X-Data": f}},
		} {
			// The skill gets the refusal as its result block (status 1,
			// forbidden) and outputs it.
			r := steal("run", req)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "\x01forbidden: ") || !strings.Contains(r.stdout, `the secret "github"`) {
				t.Errorf("leak of %q…:\n%s", f[:10], r)
			}
		}
	}
	if got := len(echo.seen("/collect")); got != before {
		t.Errorf("%d refused requests reached the other host", got-before)
	}

	// The audit log names the credential the calls used, never its value.
	audit := s.run(t, "audit", "list", "--json", "--config", cfg).ok(t)
	noLeak(t, "audit list", audit)
	var rows []struct {
		Outcome     string   `json:"outcome"`
		Credentials []string `json:"credentials"`
	}
	json.Unmarshal([]byte(audit), &rows)
	used := 0
	for _, row := range rows {
		if row.Outcome == "ok" && strings.Join(row.Credentials, ",") == "github" {
			used++
		}
	}
	if used < 3 {
		t.Errorf("%d audit rows name the credential: %s", used, clip(audit))
	}
	if r := s.run(t, "audit", "verify", "--config", cfg); r.code != 0 {
		t.Errorf("audit verify: %s", r)
	}
	noLeakInFiles(t, s.dataDir())
	noLeakInFiles(t, files)
}

// TestSecretsServe: buddy serve shows which credentials a skill may use
// (GET /api/skills, the approval request) and audits the one a call used.
func TestSecretsServe(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	echo := newEchoServer(t)
	files := filepath.Join(s.dir, "files")
	os.MkdirAll(files, 0o755)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), `[skills.thief]
allowed_domains = ["localhost"]
write_directories = [`+q(files)+`]
memory = true
credentials = ["github"]
approval = "always"

[approval]
timeout = "30s"
`)
	s.do(t, job{args: []string{"secret", "set", "github", "--config", cfg}, stdin: ghToken}).ok(t)
	s.run(t, "skill", "install", filepath.Join(thiefDir(t), "thief.wasm"), "--config", cfg).ok(t)
	sv := startServe(t, s, "--config", cfg)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, sv.url("/api/skills"), nil)
	req.Header.Set("Authorization", "Bearer "+sv.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"credentials":[{"name":"github","hosts":["localhost"]}]`) {
		t.Errorf("GET /api/skills: %s", body)
	}
	c := sv.mustDial(t)
	c.invoke("thief", map[string]any{"method": "GET", "url": "http://localhost:" + echo.port() + "/echo"})
	ask, _ := c.until("approval_request")
	creds, _ := json.Marshal(ask["credentials"])
	if string(creds) != `[{"hosts":["localhost"],"name":"github"}]` {
		t.Errorf("approval_request credentials %s", creds)
	}
	c.answer(ask, true)
	res, _ := c.until("tool_result")
	raw, _ := json.Marshal(res)
	noLeak(t, "tool_result", string(raw))
	if res["ok"] != true || !strings.Contains(string(raw), "[secret:github]") {
		t.Errorf("tool_result %s", raw)
	}
	conv := res.str("conversation_id")
	sv.stop(t)
	noLeak(t, "buddy serve's log", sv.stderr.String())
	rows, err := openStore(t, s).Audit(t.Context(), conv, 0)
	if err != nil {
		t.Fatal(err)
	}
	var named bool
	for _, r := range rows {
		named = named || (r.Kind == "invocation" && strings.Join(r.Credentials, ",") == "github")
	}
	if !named {
		t.Errorf("no invocation row names the credential: %+v", rows)
	}
}

// TestProviderKeyEchoed: a malicious model server streams back the API key
// it was sent, split across pieces; it reaches no frame, page, log or row.
// With api_key_secret (the key read from the store per request) and with
// api_key_env (its value redacted too).
func TestProviderKeyEchoed(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"api_key_secret", "api_key_env"} {
		t.Run(how, func(t *testing.T) {
			s := newSandbox(t)
			var mu sync.Mutex
			var keys []string
			model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
				mu.Lock()
				keys = append(keys, key)
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				chunk := func(content, finish string) {
					c, _ := json.Marshal(content)
					fr := "null"
					if finish != "" {
						fr = `"` + finish + `"`
					}
					fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%s},\"finish_reason\":%s}]}\n\n", c, fr)
				}
				text := "I was sent the key " + key + ", and here it is in base64: " + base64.StdEncoding.EncodeToString([]byte(key))
				for i := 0; i < len(text); i += 5 {
					chunk(text[i:min(i+5, len(text))], "")
					if f, ok := w.(http.Flusher); ok {
						f.Flush()
					}
				}
				chunk("", "stop")
				fmt.Fprint(w, "data: [DONE]\n\n")
			}))
			t.Cleanup(model.Close)
			conf := "[provider]\nkind = \"openai\"\nbase_url = " + q(model.URL+"/v1") + "\nmodel = \"m\"\ncontext_tokens = 8192\n"
			var env []string
			if how == "api_key_secret" {
				conf += "api_key_secret = \"openai\"\n"
			} else {
				conf += "api_key_env = \"BUDDY_TEST_KEY\"\n"
				env = []string{"BUDDY_TEST_KEY=" + providerKey}
			}
			cfg := write(t, filepath.Join(s.dir, "buddy.toml"), conf)
			// The user pastes a token buddy holds: neither the model nor
			// the store gets it.
			s.do(t, job{args: []string{"secret", "set", "github", "--config", cfg}, stdin: ghToken}).ok(t)
			if how == "api_key_secret" {
				s.do(t, job{args: []string{"secret", "set", "openai", "--config", cfg}, stdin: providerKey}).ok(t)
			}
			sv := startServeEnv(t, s, env, "--config", cfg)
			c := sv.mustDial(t)
			c.send(map[string]any{"type": "send", "text": "what is your key? mine is " + ghToken})
			done, frames := c.until("done")
			var shown strings.Builder
			for _, f := range append(frames, done) {
				raw, _ := json.Marshal(f)
				noLeak(t, "a "+f.str("type")+" frame", string(raw))
				if f.str("type") == "delta" {
					shown.WriteString(f.str("text"))
				}
			}
			if !strings.Contains(shown.String(), "I was sent the key [secret:") {
				t.Errorf("the streamed answer: %q", shown.String())
			}
			mu.Lock()
			if len(keys) == 0 || keys[0] != providerKey {
				t.Errorf("the model server got the key %q", keys)
			}
			mu.Unlock()
			conv := frames[0].str("conversation_id")
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, sv.url("/api/conversations/"+conv), nil)
			req.Header.Set("Authorization", "Bearer "+sv.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			noLeak(t, "GET /api/conversations/"+conv, string(body))
			sv.stop(t)
			time.Sleep(10 * time.Millisecond)
			noLeak(t, "buddy serve's log", sv.stderr.String())
			noLeakInFiles(t, s.dataDir())
		})
	}
}
