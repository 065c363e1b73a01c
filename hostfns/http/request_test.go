package http

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net"
	nethttp "net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/secrets"
)

const (
	ghToken     = "ghp_Att4ckerWantsThisToken0123456789"
	providerKey = "sk-provider-key-0123456789abcdef"
)

// fakeSecrets is a secret store in memory.
type fakeSecrets struct {
	values map[string][]byte
	mu     sync.Mutex
	reads  int
}

func (s *fakeSecrets) Secret(_ context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	v, ok := s.values[name]
	if !ok {
		return nil, errs.New(errs.ErrNotFound, "the secret "+name+" is not in the secret store: set it with buddy secret set "+name)
	}
	return slices.Clone(v), nil
}

func (s *fakeSecrets) Redactor() *secrets.Redactor { return secrets.NewRedactor(s.values) }

func newSecrets() *fakeSecrets {
	return &fakeSecrets{values: map[string][]byte{"github": []byte(ghToken), "openai": []byte(providerKey)}}
}

// echo answers with everything it received: the request line, the headers
// (Authorization too, raw and in base64) and the body, as a hostile or
// debugging API would.
func echo(w nethttp.ResponseWriter, r *nethttp.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
	w.Header().Set("Location", "/there?"+r.URL.RawQuery)
	var b strings.Builder
	b.WriteString(r.Method + " " + r.URL.String() + "\n")
	for k, vs := range r.Header {
		b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	b.WriteString("b64: " + base64.StdEncoding.EncodeToString([]byte(r.Header.Get("Authorization"))) + "\n")
	b.WriteString("hex: " + hex.EncodeToString([]byte(r.Header.Get("X-Api-Key"))) + "\n")
	b.WriteString("\n" + string(body))
	w.WriteHeader(201)
	io.WriteString(w, b.String())
}

// githubSetup is a loopback "api.github.com" (an echo) and an
// "other.example" the skill may reach but the credential is not granted
// for, each on its own server, and a Fetcher granted both hosts, with the
// credential github for api.github.com sent as cred says.
type githubSetup struct {
	gh, other *server
	f         *Fetcher
	store     *fakeSecrets
}

func newGithubSetup(t *testing.T, as, param string, ghHandler nethttp.HandlerFunc) *githubSetup {
	t.Helper()
	s := &githubSetup{store: newSecrets()}
	if ghHandler == nil {
		ghHandler = echo
	}
	s.gh = startServer(t, false, ghHandler)
	s.other = startServer(t, false, echo)
	res := newMapResolver(map[string][]string{"api.github.com": {"127.0.0.1"}, "other.example": {"127.0.0.1"}})
	hosts := allow.Intersect([]string{"api.github.com:" + s.gh.port()}, []string{"api.github.com", "other.example"})
	s.f = newFetcher(t, Policy{
		Domains:     operator("api.github.com", "other.example"),
		Credentials: []Credential{{Name: "github", Hosts: hosts, As: as, Param: param}},
	}, WithResolver(res), WithSecrets(s.store))
	return s
}

func (s *githubSetup) ghURL(path string) string {
	return "http://api.github.com:" + s.gh.port() + path
}

func (s *githubSetup) otherURL(path string) string {
	return "http://other.example:" + s.other.port() + path
}

// noToken fails when any part of what the caller got holds the token.
func noToken(t *testing.T, what string, resp *Response, err error) {
	t.Helper()
	check := func(part, s string) {
		for _, form := range []string{ghToken, base64.StdEncoding.EncodeToString([]byte("Bearer " + ghToken)), hex.EncodeToString([]byte(ghToken)), providerKey} {
			if strings.Contains(s, form) {
				t.Errorf("%s: the token reached the caller in the %s: %q", what, part, s)
			}
		}
	}
	if err != nil {
		check("error", err.Error())
	}
	if resp != nil {
		check("body", string(resp.Body))
		check("URL", resp.URL)
		for k, v := range resp.Headers {
			check("header "+k, v)
		}
	}
}

func TestCredentialInjected(t *testing.T) {
	for _, c := range []struct {
		as, param string
		sent      func(r *nethttp.Request) bool
	}{
		{"bearer", "", func(r *nethttp.Request) bool { return r.Header.Get("Authorization") == "Bearer "+ghToken }},
		{"basic", "", func(r *nethttp.Request) bool {
			return r.Header.Get("Authorization") == "Basic "+base64.StdEncoding.EncodeToString([]byte(ghToken))
		}},
		{"header", "X-Api-Key", func(r *nethttp.Request) bool { return r.Header.Get("X-Api-Key") == ghToken }},
		{"query", "access_token", func(r *nethttp.Request) bool {
			return r.URL.Query().Get("access_token") == ghToken && r.URL.Query().Get("page") == "2"
		}},
	} {
		t.Run(c.as, func(t *testing.T) {
			s := newGithubSetup(t, c.as, c.param, nil)
			var used []string
			ctx := WithCredentialUse(t.Context(), func(n string) { used = append(used, n) })
			resp, err := s.f.Do(ctx, Request{Method: "POST", URL: s.ghURL("/repos/x/issues?page=2"),
				Header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer guest-made-this-up", "access_token": "x"},
				Body:   []byte(`{"title":"hi"}`)})
			if err != nil {
				t.Fatal(err)
			}
			reqs := s.gh.requests()
			if len(reqs) != 1 || !c.sent(reqs[0]) || reqs[0].Method != "POST" {
				t.Fatalf("the server got %v %v %v", reqs[0].Method, reqs[0].URL, reqs[0].Header)
			}
			if resp.Status != 201 || !strings.Contains(string(resp.Body), `{"title":"hi"}`) {
				t.Errorf("response %d %q", resp.Status, resp.Body)
			}
			if !strings.Contains(string(resp.Body), "[secret:github]") {
				t.Errorf("the echo was not redacted: %q", resp.Body)
			}
			if !slices.Equal(used, []string{"github"}) {
				t.Errorf("credentials reported used: %v", used)
			}
			noToken(t, c.as, resp, err)
			if loc := resp.Headers["Location"]; c.as == "query" && !strings.Contains(loc, "[secret:github]") {
				t.Errorf("Location %q", loc)
			}
		})
	}
}

// TestCredentialNotSentElsewhere: another host the skill may reach gets no
// credential, directly or through a redirect from the granted host.
func TestCredentialNotSentElsewhere(t *testing.T) {
	var s *githubSetup
	s = newGithubSetup(t, "bearer", "", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/to-other":
			nethttp.Redirect(w, r, s.otherURL("/landed"), nethttp.StatusFound)
		case "/to-self":
			nethttp.Redirect(w, r, "/echo", nethttp.StatusTemporaryRedirect)
		case "/to-other-with-token":
			nethttp.Redirect(w, r, s.otherURL("/landed?t="+url.QueryEscape(r.Header.Get("Authorization"))), nethttp.StatusFound)
		default:
			echo(w, r)
		}
	})
	resp, err := s.f.Get(t.Context(), s.otherURL("/direct"))
	noToken(t, "direct", resp, err)
	if err != nil || s.other.requests()[0].Header.Get("Authorization") != "" {
		t.Fatalf("direct request to another host: %v, Authorization %q", err, s.other.requests()[0].Header.Get("Authorization"))
	}
	resp, err = s.f.Do(t.Context(), Request{Method: "GET", URL: s.ghURL("/to-other"), Header: map[string]string{"Authorization": "Bearer guest"}})
	noToken(t, "redirect", resp, err)
	if err != nil {
		t.Fatal(err)
	}
	last := s.other.requests()[len(s.other.requests())-1]
	if last.URL.Path != "/landed" || last.Header.Get("Authorization") != "" {
		t.Errorf("the redirect to another host carried Authorization %q", last.Header.Get("Authorization"))
	}
	resp, err = s.f.Do(t.Context(), Request{Method: "POST", URL: s.ghURL("/to-self"), Body: []byte("kept")})
	if err != nil || !strings.Contains(string(resp.Body), "POST /echo") || !strings.Contains(string(resp.Body), "kept") {
		t.Fatalf("307 to the same host: %v %q", err, resp.Body)
	}
	if got := s.gh.requests()[len(s.gh.requests())-1].Header.Get("Authorization"); got != "Bearer "+ghToken {
		t.Errorf("a hop on the granted host lost the credential: %q", got)
	}
	// The granted host echoes the token into a redirect to another host:
	// refused before that hop is sent, naming the credential.
	n := len(s.other.requests())
	resp, err = s.f.Get(t.Context(), s.ghURL("/to-other-with-token"))
	wantKind(t, err, errs.ErrForbidden)
	noToken(t, "redirect with the token", resp, err)
	if !strings.Contains(err.Error(), `"github"`) || len(s.other.requests()) != n {
		t.Errorf("err = %v; other got %d requests", err, len(s.other.requests())-n)
	}
}

// TestLeakBlocked: a request carrying a secret, in any common encoding, to
// a host it is not granted for is refused before anything is sent.
func TestLeakBlocked(t *testing.T) {
	s := newGithubSetup(t, "bearer", "", nil)
	b64 := base64.StdEncoding.EncodeToString([]byte(ghToken))
	forms := map[string]string{
		"raw": ghToken, "base64": b64, "base64url": base64.RawURLEncoding.EncodeToString([]byte("x" + ghToken)),
		"hex": hex.EncodeToString([]byte(ghToken)), "HEX": strings.ToUpper(hex.EncodeToString([]byte(ghToken))),
		"query escaped": url.QueryEscape(ghToken), "percent": pct(ghToken), "mixed percent": mixedPct(ghToken),
		"mixed percent after a bad escape": "%zz" + mixedPct(ghToken),
	}
	for name, form := range forms {
		for _, where := range []string{"query", "path", "header", "body", "form body"} {
			t.Run(name+" in "+where, func(t *testing.T) {
				req := Request{Method: "POST", URL: s.otherURL("/collect")}
				switch where {
				case "query":
					req.URL += "?t=" + form
				case "path":
					req.URL = s.otherURL("/collect/" + form)
				case "header":
					req.Header = map[string]string{"X-Data": form}
				case "body":
					req.Body = []byte(`{"data":"` + form + `"}`)
				case "form body":
					req.Body = []byte("a=1&data=" + form)
				}
				if where == "path" && strings.Contains(form, "/") {
					return // not a path
				}
				n := len(s.other.requests())
				resp, err := s.f.Do(t.Context(), req)
				noToken(t, name, resp, err)
				badURL := strings.Contains(form, "%zz") && where == "path"
				switch {
				case badURL && !errors.Is(err, errs.ErrInvalidInput):
					t.Fatalf("Do = %v, want invalid_input (not a URL)", err)
				case !badURL && (!errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), `secret "github"`)):
					t.Fatalf("Do = %v, want forbidden naming the secret", err)
				}
				if len(s.other.requests()) != n {
					t.Errorf("the request was sent")
				}
			})
		}
	}
	// The provider's key is granted to no skill: refused even on the
	// credential's own host.
	resp, err := s.f.Do(t.Context(), Request{Method: "POST", URL: s.ghURL("/x"), Body: []byte(providerKey)})
	noToken(t, "provider key", resp, err)
	if !errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), `secret "openai"`) {
		t.Fatalf("provider key to the granted host: %v", err)
	}
	// The token to its own host is what the host gets anyway: sent, and
	// the echo redacted.
	resp, err = s.f.Do(t.Context(), Request{Method: "POST", URL: s.ghURL("/x?t=" + ghToken), Body: []byte(b64)})
	noToken(t, "to its own host", resp, err)
	if err != nil || !strings.Contains(string(resp.Body), "[secret:github]") {
		t.Fatalf("the token to its own host: %v %+v", err, resp)
	}
}

func pct(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}

// mixedPct percent-encodes every other byte.
func mixedPct(s string) string {
	var b strings.Builder
	for i, c := range []byte(s) {
		if i%2 == 0 {
			b.WriteString("%" + hex.EncodeToString([]byte{c}))
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func TestRequestChecks(t *testing.T) {
	s := newGithubSetup(t, "bearer", "", nil)
	for _, c := range []struct {
		name string
		req  Request
		kind error
		msg  string
	}{
		{"CONNECT", Request{Method: "CONNECT", URL: s.ghURL("/")}, errs.ErrInvalidInput, "not allowed"},
		{"lower-case method", Request{Method: "post", URL: s.ghURL("/")}, errs.ErrInvalidInput, "not allowed"},
		{"Host", Request{URL: s.ghURL("/"), Header: map[string]string{"Host": "evil"}}, errs.ErrInvalidInput, "set by buddy"},
		{"Content-Length", Request{URL: s.ghURL("/"), Header: map[string]string{"content-length": "1"}}, errs.ErrInvalidInput, "set by buddy"},
		{"Accept-Encoding", Request{URL: s.ghURL("/"), Header: map[string]string{"Accept-Encoding": "br"}}, errs.ErrInvalidInput, "set by buddy"},
		{"Proxy-", Request{URL: s.ghURL("/"), Header: map[string]string{"Proxy-Foo": "x"}}, errs.ErrInvalidInput, "set by buddy"},
		{"CRLF in a value", Request{URL: s.ghURL("/"), Header: map[string]string{"X-A": "a\r\nHost: evil"}}, errs.ErrInvalidInput, "control character"},
		{"bad name", Request{URL: s.ghURL("/"), Header: map[string]string{"X A": "a"}}, errs.ErrInvalidInput, "not a header name"},
		{"twice", Request{URL: s.ghURL("/"), Header: map[string]string{"x-a": "1", "X-A": "2"}}, errs.ErrInvalidInput, "set twice"},
		{"body over the cap", Request{Method: "PUT", URL: s.ghURL("/"), Body: make([]byte, DefaultMaxRequestBytes+1)}, errs.ErrTooLarge, "over the"},
		{"not allowed host", Request{Method: "PUT", URL: "http://evil.test/"}, errs.ErrForbidden, "not in the allowlist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := s.gh.hits.Load()
			_, err := s.f.Do(t.Context(), c.req)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Do = %v, want %v containing %q", err, c.kind, c.msg)
			}
			if s.gh.hits.Load() != n {
				t.Error("a refused request was sent")
			}
		})
	}
}

// TestRedirectChangesMethod: 303 turns a POST into a GET without its body.
func TestRedirectChangesMethod(t *testing.T) {
	s := newGithubSetup(t, "bearer", "", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/create" {
			nethttp.Redirect(w, r, "/created", nethttp.StatusSeeOther)
			return
		}
		echo(w, r)
	})
	resp, err := s.f.Do(t.Context(), Request{Method: "POST", URL: s.ghURL("/create"), Body: []byte("payload"),
		Header: map[string]string{"Content-Type": "text/plain"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(resp.Body), "GET /created") || strings.Contains(string(resp.Body), "payload") || strings.Contains(string(resp.Body), "Content-Type") {
		t.Errorf("after 303: %q", resp.Body)
	}
}

func TestCredentialMissingFromTheStore(t *testing.T) {
	s := newGithubSetup(t, "bearer", "", nil)
	delete(s.store.values, "github")
	_, err := s.f.Get(t.Context(), s.ghURL("/"))
	if !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "buddy secret set github") {
		t.Fatalf("Get = %v", err)
	}
	if s.gh.hits.Load() != 0 {
		t.Error("sent without its credential")
	}
}

func TestNewNeedsSecretsForCredentials(t *testing.T) {
	hosts := allow.Intersect([]string{"api.github.com"}, []string{"api.github.com"})
	_, err := New(Policy{Domains: operator("api.github.com"), Credentials: []Credential{{Name: "github", Hosts: hosts, As: "bearer"}}})
	wantKind(t, err, errs.ErrConfig)
	for _, bad := range []Credential{
		{Name: "github", Hosts: hosts, As: "cookie"},
		{Name: "github", Hosts: hosts, As: "header", Param: "Host"},
		{Name: "github", Hosts: hosts, As: "header", Param: "accept-encoding"},
		{Name: "github", Hosts: hosts, As: "header", Param: "Proxy-Token"},
		{Name: "github", Hosts: nil, As: "bearer"},
		{Name: "bad name", Hosts: hosts, As: "bearer"},
	} {
		_, err := New(Policy{Domains: operator("api.github.com"), Credentials: []Credential{bad}}, WithSecrets(newSecrets()))
		wantKind(t, err, errs.ErrConfig)
	}
}

// TestCredentialInClearTextOnlyToLoopback: a hop over http that carries a
// credential is dialled only to a loopback address; anywhere else it would
// cross the network in clear text, so it is refused before any connection,
// naming the credential. Over https, and over http without a credential,
// the same hosts are reached.
func TestCredentialInClearTextOnlyToLoopback(t *testing.T) {
	plain := startServer(t, false, echo)
	secure := startServer(t, true, echo)
	trust := secure.Client().Transport.(*nethttp.Transport).TLSClientConfig
	res := newMapResolver(map[string][]string{"api.github.com": {"10.1.2.3"}, "plain.test": {"10.1.2.3"}, "example.com": {"10.1.2.4"}})
	domains := operator("api.github.com", "plain.test", "example.com")
	hosts := allow.Intersect([]string{"api.github.com", "example.com"}, []string{"api.github.com", "example.com"})
	f := newFetcher(t, Policy{Domains: domains, Credentials: []Credential{{Name: "github", Hosts: hosts, As: "bearer"}}},
		WithResolver(res), WithSecrets(newSecrets()), WithTLSConfig(trust))
	var mu sync.Mutex
	var dialled []string
	f.dial = func(ctx context.Context, _ *net.Dialer, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		to := plain.Listener.Addr().String()
		if strings.HasPrefix(address, "10.1.2.4:") {
			to = secure.Listener.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}

	resp, err := f.Get(t.Context(), "http://api.github.com:"+plain.port()+"/")
	noToken(t, "http", resp, err)
	wantKind(t, err, errs.ErrForbidden)
	if !strings.Contains(err.Error(), `credential "github" would go in clear text`) || len(dialled) != 0 || plain.hits.Load() != 0 {
		t.Fatalf("http with the credential to 10.1.2.3: %v; dialled %v, %d hits", err, dialled, plain.hits.Load())
	}

	resp, err = f.Get(t.Context(), "http://plain.test:"+plain.port()+"/")
	if err != nil || resp.Status != 201 || plain.requests()[0].Header.Get("Authorization") != "" {
		t.Fatalf("http without a credential: %v %+v", err, resp)
	}

	resp, err = f.Do(t.Context(), Request{Method: "POST", URL: "https://example.com:" + secure.port() + "/x", Body: []byte("hi")})
	noToken(t, "https", resp, err)
	if err != nil || secure.requests()[0].Header.Get("Authorization") != "Bearer "+ghToken {
		t.Fatalf("https with the credential: %v; Authorization %q", err, secure.requests()[0].Header.Get("Authorization"))
	}
}
