package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
)

// newBareServer is a Server without a store or a gate, for the checks that
// run before either is reached.
func newBareServer(t *testing.T, o Options) *Server {
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
