package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// newBareServer is a Server without a store or a gate, for the checks that
// run before either is reached.
func newBareServer(t testing.TB, o Options) *Server {
	t.Helper()
	o.Token = "0123456789abcdef"
	o.Store = struct{ Store }{}
	o.NewGate = func(approval.Asker) Gate { return nil }
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// TestUpgraderChecksOrigin: gorilla's own Origin hook is the server's rule,
// so an upgrade that reached serveWS without the api wrapper's check would
// still be refused.
func TestUpgraderChecksOrigin(t *testing.T) {
	s := newBareServer(t, Options{})
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"http://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"http://127.0.0.1:7700", http.StatusInternalServerError}, // past the Origin check: a recorder cannot be hijacked
	} {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:7700/api/ws", nil)
		r.Header.Set("Upgrade", "h2c, websocket")
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		r.Header.Set("Origin", tc.origin)
		w := httptest.NewRecorder()
		s.serveWS(w, r)
		if w.Code != tc.want {
			t.Errorf("Origin %s: %d %s, want %d", tc.origin, w.Code, w.Body, tc.want)
			continue
		}
		var body map[string]errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("Origin %s: body %s: %v", tc.origin, w.Body, err)
		}
		if tc.want == http.StatusForbidden && body["error"].Kind != "forbidden" {
			t.Errorf("Origin %s: kind %q, want forbidden", tc.origin, body["error"].Kind)
		}
	}
}

// TestAllowedHostsParsed: New takes names and addresses in the forms
// [server] allowed_hosts holds, and refuses an entry no Host could match.
func TestAllowedHostsParsed(t *testing.T) {
	for _, h := range []string{"buddy.lan", "BUDDY.LAN", "fd00::1", "[fd00::1]", "10.0.0.2", "xn--bcher-kva.example"} {
		newBareServer(t, Options{AllowedHosts: []string{h}})
	}
	for _, h := range []string{"", "buddy.lan:80", "buddy.lan.", "1.2.3", "[::1", "fe80::1%eth0", "bücher.example", "user@buddy.lan", "http://buddy.lan"} {
		_, err := New(Options{Token: "t", Store: struct{ Store }{}, NewGate: func(approval.Asker) Gate { return nil }, AllowedHosts: []string{h}})
		if !errors.Is(err, errs.ErrConfig) || !strings.Contains(err.Error(), "allowed host") {
			t.Errorf("allowed host %q: %v, want a config error naming it", h, err)
		}
	}
}

// TestAllowedOriginsParsed: New takes origins in the form [server]
// allowed_origins holds, and refuses an entry no Origin could match.
func TestAllowedOriginsParsed(t *testing.T) {
	for _, o := range []string{"https://chat.example.com", "http://localhost:3000", "HTTPS://Chat.Example.com:443", "http://[::1]:5173"} {
		newBareServer(t, Options{AllowedOrigins: []string{o}})
	}
	for _, o := range []string{"", "null", "chat.example.com", "https://chat.example.com/", "https://u@chat.example.com", "https://chat.example.com:0", "https://chat.example.com.", "ftp://chat.example.com", "https://bücher.example"} {
		_, err := New(Options{Token: "t", Store: struct{ Store }{}, NewGate: func(approval.Asker) Gate { return nil }, AllowedOrigins: []string{o}})
		if !errors.Is(err, errs.ErrConfig) || !strings.Contains(err.Error(), "allowed origin") {
			t.Errorf("allowed origin %q: %v, want a config error naming it", o, err)
		}
	}
}
