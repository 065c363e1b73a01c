package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/front/server"
)

// apiRoutes is every /api/ route, with a body where one is needed.
var apiRoutes = []struct{ method, path, body string }{
	{http.MethodGet, "/api/skills", ""},
	{http.MethodGet, "/api/conversations", ""},
	{http.MethodGet, "/api/conversations/c_x", ""},
	{http.MethodDelete, "/api/conversations/c_x", ""},
	{http.MethodPost, "/api/chat/c_x/approve", `{"approval_id":"ap_x","approved":true}`},
	{http.MethodPost, "/api/session", ""},
	{http.MethodGet, "/api/ws", ""},
	{http.MethodGet, "/api/no/such/route", ""},
}

// dialStatus tries the upgrade with hdr and returns the HTTP status (101 on
// success).
func (s *stack) dialStatus(t *testing.T, path string, hdr http.Header) int {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.DialContext(t.Context(), "ws://"+s.host+path, hdr)
	if err == nil {
		ws.Close()
		return resp.StatusCode
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	return resp.StatusCode
}

func TestTokenRequired(t *testing.T) {
	s := newStack(t, stackOpts{})
	creds := []struct {
		name  string
		hdr   http.Header
		query string
	}{
		{"no token", http.Header{}, ""},
		{"wrong token", http.Header{"Authorization": {"Bearer " + strings.Repeat("f", 64)}}, ""},
		{"token prefix", http.Header{"Authorization": {"Bearer " + testToken[:32]}}, ""},
		{"token with a suffix", http.Header{"Authorization": {"Bearer " + testToken + "0"}}, ""},
		{"empty bearer", http.Header{"Authorization": {"Bearer "}}, ""},
		{"basic scheme", http.Header{"Authorization": {"Basic " + testToken}}, ""},
		{"token in the query string", http.Header{}, "?token=" + testToken},
		{"access_token in the query string", http.Header{}, "?access_token=" + testToken},
		{"token as the cookie", http.Header{"Cookie": {server.SessionCookie + "=" + testToken}}, ""},
		{"wrong cookie", http.Header{"Cookie": {server.SessionCookie + "=" + strings.Repeat("0", 64)}}, ""},
	}
	for _, cr := range creds {
		t.Run(cr.name, func(t *testing.T) {
			for _, r := range apiRoutes {
				status, body := s.request(t, r.method, r.path+cr.query, r.body, cr.hdr)
				if status != http.StatusUnauthorized {
					t.Errorf("%s %s: %d %s, want 401", r.method, r.path, status, body)
					continue
				}
				apiError(t, body)
			}
			if st := s.dialStatus(t, "/api/ws"+cr.query, cr.hdr); st != http.StatusUnauthorized {
				t.Errorf("upgrade: %d, want 401", st)
			}
		})
	}
	t.Run("right token", func(t *testing.T) {
		for _, path := range []string{"/api/skills", "/api/conversations"} {
			if status, body := s.request(t, http.MethodGet, path, nil, nil); status != http.StatusOK {
				t.Errorf("GET %s: %d %s", path, status, body)
			}
		}
		if st := s.dialStatus(t, "/api/ws", authHeader()); st != http.StatusSwitchingProtocols {
			t.Errorf("upgrade: %d, want 101", st)
		}
		// The scheme is case-insensitive (RFC 7235).
		if status, _ := s.request(t, http.MethodGet, "/api/skills", nil, http.Header{"Authorization": {"bearer " + testToken}}); status != http.StatusOK {
			t.Errorf("lowercase scheme: %d", status)
		}
	})
	t.Run("healthz is open", func(t *testing.T) {
		if status, body := s.request(t, http.MethodGet, "/healthz", nil, http.Header{}); status != http.StatusOK || !strings.Contains(string(body), `"ok":true`) {
			t.Errorf("GET /healthz: %d %s", status, body)
		}
	})
}

func TestSessionCookie(t *testing.T) {
	s := newStack(t, stackOpts{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+"/api/session", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = authHeader()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /api/session: %d", resp.StatusCode)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.SessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("no %s cookie in %v", server.SessionCookie, resp.Header["Set-Cookie"])
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value == "" || strings.Contains(cookie.Value, testToken) {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, not the token", cookie)
	}
	hdr := http.Header{"Cookie": {cookie.String()}}
	if status, body := s.request(t, http.MethodGet, "/api/skills", nil, hdr); status != http.StatusOK {
		t.Errorf("GET /api/skills with the cookie: %d %s", status, body)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(t.Context(), s.wsURL(), hdr)
	if err != nil {
		t.Fatalf("upgrade with the cookie: %v", err)
	}
	c := newClient(t, ws)
	c.send(`{"type":"subscribe"}`)
	c.expect("error") // the connection serves frames
}

func TestOrigin(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) {
		o.AllowedOrigins = []string{"http://localhost:5173"}
	}})
	withOrigin := func(origin string) http.Header {
		h := authHeader()
		h.Set("Origin", origin)
		return h
	}
	refused := []string{
		"http://evil.example",
		"https://evil.example",
		"null",
		"http://" + s.host + ".evil.example",
		"http://127.0.0.1:1",            // another port is another origin
		"https://" + s.host,             // another scheme too
		"http://localhost:5174",         // near an allowed origin
		"file://",                       // no host
		"chrome-extension://abcdefghij", // not http(s)
	}
	for _, origin := range refused {
		t.Run("refused "+origin, func(t *testing.T) {
			if st := s.dialStatus(t, "/api/ws", withOrigin(origin)); st != http.StatusForbidden {
				t.Errorf("upgrade: %d, want 403", st)
			}
			for _, r := range []struct{ method, path, body string }{
				{http.MethodPost, "/api/chat/c_x/approve", `{"approval_id":"ap_x","approved":true}`},
				{http.MethodDelete, "/api/conversations/c_x", ""},
				{http.MethodPost, "/api/session", ""},
			} {
				status, body := s.request(t, r.method, r.path, r.body, withOrigin(origin))
				if status != http.StatusForbidden {
					t.Errorf("%s %s: %d %s, want 403", r.method, r.path, status, body)
					continue
				}
				if kind, _ := apiError(t, body); kind != "forbidden" {
					t.Errorf("kind %q, want forbidden", kind)
				}
			}
		})
	}
	for _, origin := range []string{"http://" + s.host, "http://localhost:5173"} {
		t.Run("allowed "+origin, func(t *testing.T) {
			if st := s.dialStatus(t, "/api/ws", withOrigin(origin)); st != http.StatusSwitchingProtocols {
				t.Errorf("upgrade: %d, want 101", st)
			}
			if status, body := s.request(t, http.MethodDelete, "/api/conversations/c_x", nil, withOrigin(origin)); status != http.StatusNotFound {
				t.Errorf("DELETE: %d %s, want 404 (past the Origin check)", status, body)
			}
		})
	}
	// The Origin check does not replace the token.
	h := http.Header{"Origin": {"http://" + s.host}}
	if st := s.dialStatus(t, "/api/ws", h); st != http.StatusUnauthorized {
		t.Errorf("own origin without the token: %d, want 401", st)
	}
}

func TestHost(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) { o.AllowedHosts = []string{"buddy.lan"} }})
	_, port, _ := strings.Cut(s.host, ":")
	withHost := func(host string) http.Header {
		h := authHeader()
		h.Set("Host", host)
		return h
	}
	refused := []string{
		"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port, "localhost.evil.example",
		"192.168.1.10:" + port, "0.0.0.0:" + port, "buddy.lan.evil.example",
	}
	for _, host := range refused {
		t.Run("refused "+host, func(t *testing.T) {
			for _, path := range []string{"/api/skills", "/healthz", "/"} {
				status, body := s.request(t, http.MethodGet, path, nil, withHost(host))
				if status != http.StatusForbidden {
					t.Errorf("GET %s Host %q: %d %s, want 403", path, host, status, body)
				}
			}
			if st := s.dialStatus(t, "/api/ws", withHost(host)); st != http.StatusForbidden {
				t.Errorf("upgrade Host %q: %d, want 403", host, st)
			}
		})
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "LOCALHOST:" + port, "buddy.lan:" + port, "buddy.lan"} {
		t.Run("allowed "+host, func(t *testing.T) {
			if status, body := s.request(t, http.MethodGet, "/api/skills", nil, withHost(host)); status != http.StatusOK {
				t.Errorf("GET /api/skills Host %q: %d %s", host, status, body)
			}
			h := withHost(host)
			h.Set("Origin", "http://"+host) // a page served by buddy under that name
			if st := s.dialStatus(t, "/api/ws", h); st != http.StatusSwitchingProtocols {
				t.Errorf("upgrade Host %q: %d", host, st)
			}
		})
	}
	// Without allowed_hosts, the same name is refused.
	plain := newStack(t, stackOpts{})
	if status, _ := plain.request(t, http.MethodGet, "/api/skills", nil, withHost("buddy.lan")); status != http.StatusForbidden {
		t.Errorf("buddy.lan without allowed_hosts: %d, want 403", status)
	}
}
