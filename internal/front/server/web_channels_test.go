package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/buddy-run/buddy/internal/front/server"
)

// fakeChannels serves the chat channels' routes as internal/front/channels
// does (docs/PROTOCOL.md): one channel, backing off, with a stranger's
// pairing code waiting (a hostile name) and a paired user; it records the
// page's approvals and revocations.
type fakeChannels struct {
	mu       sync.Mutex
	pending  []map[string]any
	paired   []map[string]any
	approved []string
	revoked  []string
}

const hostileName = "Eve <img src=x onerror=\"window.__pwned='name'\"> \u202egnp.exe"

func newFakeChannels() *fakeChannels {
	now := time.Now().UTC()
	return &fakeChannels{
		pending: []map[string]any{{"channel": "telegram", "user": "11", "name": hostileName, "chat": "11", "code": "ABCD2345",
			"status": "pending", "created_at": now, "expires_at": now.Add(time.Hour)}},
		paired: []map[string]any{{"channel": "telegram", "user": "42", "name": "Ada @ada", "chat": "42", "status": "paired",
			"created_at": now.Add(-time.Hour), "paired_at": now.Add(-time.Hour)}},
	}
}

func (f *fakeChannels) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	var in map[string]string
	if r.Method == http.MethodPost {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			w.WriteHeader(400)
			return
		}
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /api/channels":
		json.NewEncoder(w).Encode(map[string]any{"channels": []map[string]any{{
			"name": "telegram", "state": "backing_off", "last_success": time.Now().Add(-90 * time.Second).UTC(),
			"lag_ms": 75000, "lag": "1m15s", "error": "unavailable: telegram: 502 <b>Bad Gateway</b>", "restarts": 2,
			"inbox": 3, "outbox": 1, "dm_policy": "pairing", "paired": len(f.paired), "pending_pairings": len(f.pending)}}})
	case "GET /api/pairing":
		json.NewEncoder(w).Encode(map[string]any{"pending": f.pending, "paired": f.paired})
	case "POST /api/pairing/approve":
		f.approved = append(f.approved, in["code"])
		for i, p := range f.pending {
			if p["code"] == in["code"] {
				p["status"], p["paired_at"] = "paired", time.Now().UTC()
				delete(p, "code")
				f.paired = append(f.paired, p)
				f.pending = slices.Delete(f.pending, i, i+1)
				break
			}
		}
		w.Write([]byte(`{}`))
	case "POST /api/pairing/revoke":
		f.revoked = append(f.revoked, in["user"]+in["code"])
		f.paired = slices.DeleteFunc(f.paired, func(p map[string]any) bool { return p["user"] == in["user"] })
		w.Write([]byte(`{}`))
	default:
		w.WriteHeader(404)
	}
}

// TestWebChannels: with a chat channel configured, the page shows its state
// and the pairing codes waiting (a count on its button), approves a code
// and revokes a paired user; a stranger's name is text. Without one, the
// button stays hidden.
func TestWebChannels(t *testing.T) {
	browser := newBrowser(t)
	fc := newFakeChannels()
	s := newStack(t, stackOpts{server: func(o *server.Options) {
		o.NewChannels = func(server.ChannelHost) http.Handler { return fc }
	}})
	b := signedIn(t, browser, s)
	b.wait(`!document.getElementById("channels-toggle").hidden && document.getElementById("pairing-count").textContent === "1"`)
	b.run(chromedp.Click("#skills-toggle", chromedp.ByID))
	b.run(chromedp.Click("#channels-toggle", chromedp.ByID))
	b.wait(`!document.getElementById("channels").hidden && document.getElementById("skills").hidden &&
		document.getElementById("channel-status").textContent.includes("backing off")`)
	status := b.str(`document.getElementById("channel-status").textContent`)
	for _, want := range []string{"telegram", "lag 1m15s", "restarted the poll 2×", "502 <b>Bad Gateway</b>", "3 to handle", "1 to send", "dm_policy pairing"} {
		if !strings.Contains(status, want) {
			t.Errorf("the status shows %q, not %q", status, want)
		}
	}
	pending := b.str(`document.getElementById("pairing-pending").textContent`)
	if !strings.Contains(pending, "ABCD2345") || !strings.Contains(pending, `<img src=x onerror="window.__pwned='name'">`) ||
		!strings.Contains(pending, "⟦U+202E⟧") {
		t.Errorf("the request shows %q", pending)
	}
	b.pwnedCheck()
	b.run(chromedp.Click(`#pairing-pending button.primary`, chromedp.ByQuery))
	b.wait(`document.getElementById("pairing-pending").textContent.includes("None waiting.") &&
		document.getElementById("pairing-count").hidden && document.getElementById("pairing-paired").textContent.includes("Eve")`)
	// Revoking takes two clicks.
	ada := `[...document.querySelectorAll("#pairing-paired li")].find(li => li.textContent.includes("Ada")).querySelector("button")`
	b.run(chromedp.Click(`#pairing-paired li:first-child button`, chromedp.ByQuery))
	b.wait(ada + `.textContent === "Revoke?"`)
	b.run(chromedp.Click(`#pairing-paired li:first-child button`, chromedp.ByQuery))
	b.wait(`!document.getElementById("pairing-paired").textContent.includes("Ada")`)
	fc.mu.Lock()
	if !slices.Equal(fc.approved, []string{"ABCD2345"}) || !slices.Equal(fc.revoked, []string{"42"}) {
		t.Errorf("approved %q, revoked %q", fc.approved, fc.revoked)
	}
	fc.mu.Unlock()
	// Four panel buttons fit 360 px.
	b.run(chromedp.EmulateViewport(360, 740))
	var w struct{ Doc, Toggle int }
	b.eval(`({doc: document.documentElement.scrollWidth, toggle: Math.ceil(document.getElementById("channels-toggle").getBoundingClientRect().right)})`, &w)
	if w.Doc > 360 || w.Toggle > 360 {
		t.Errorf("at 360 px: page %d, the channels' button ends at %d px", w.Doc, w.Toggle)
	}

	// No channel configured: no button.
	plain := newStack(t, stackOpts{})
	p := signedIn(t, browser, plain)
	time.Sleep(200 * time.Millisecond) // the channels' first look has answered
	if p.str(`String(document.getElementById("channels-toggle").hidden)`) != "true" {
		t.Error("the channels' button shows with no channel configured")
	}
}
