package channels_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/channels"
	"github.com/buddy-run/buddy/internal/store"
)

// TestHostileUpdates: what a platform (or someone posing as it) may send
// is bounded and cleaned before it reaches the agent or the store.
func TestHostileUpdates(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, maxResponse: 256 << 10})
	got := make(chan string, 16)
	r.agent.reply = func(text string) string {
		got <- text
		return "ok"
	}
	chat := privateChat(42)
	from := user(42, "Eve<b>")
	msg := func(text string) map[string]any {
		return map[string]any{"message": map[string]any{"message_id": 1, "from": from, "chat": chat, "date": 1, "text": text}}
	}
	// A giant text (under the response cap): cut to 32 KiB, saying so.
	r.bot.pushRaw(msg(strings.Repeat("x", 200<<10)))
	if text := recv(t, got); len(text) > 32<<10 || !strings.HasSuffix(text, "more bytes not shown]") {
		t.Errorf("a giant text reached the agent as %d bytes ending %q", len(text), text[max(0, len(text)-40):])
	}
	// Control characters, bytes that are not UTF-8, bidi text: controls
	// dropped, bad bytes replaced.
	r.bot.pushRaw(msg("a\x00b\x1b[31mc\u0085d\u202eé\xff"))
	if text := recv(t, got); text != "ab[31mcd\u202eé\uFFFD" {
		t.Errorf("control characters reached the agent: %q", text)
	}
	// The credential's placeholder is text like any other.
	r.bot.pushRaw(msg("{credential}"))
	if text := recv(t, got); text != "{credential}" {
		t.Errorf("got %q", text)
	}
	// Updates buddy does not read, or that lack a chat: acknowledged, ignored.
	r.bot.pushRaw(map[string]any{"channel_post": map[string]any{"message_id": 1, "chat": map[string]any{"id": -1, "type": "channel"}, "text": "x"}})
	r.bot.pushRaw(map[string]any{"my_chat_member": map[string]any{"chat": chat}})
	r.bot.pushRaw(map[string]any{"message": map[string]any{"message_id": 1, "text": "no chat"}})
	r.bot.pushRaw(map[string]any{"callback_query": map[string]any{"id": "cb", "from": from, "data": "y|ap_x|0"}})
	// An update over the response cap: asked for alone, then passed on as
	// oversize (its sender told), and acknowledged; what follows is read.
	r.bot.pushRaw(msg(strings.Repeat("y", 300<<10)))
	r.bot.message(42, "after")
	if text := recv(t, got); text != "after" {
		t.Errorf("after the oversize update the agent got %q", text)
	}
	eventually(t, "every update handled", func() bool {
		s := r.inboxStates()
		return s[store.InboxNew]+s[store.InboxRunning] == 0 && r.bot.pending() == 0
	})
	eventually(t, "the chat's messages", func() bool {
		return slices.Contains(r.bot.texts(42), "That message was too large for me to read: send it in smaller parts.")
	})
	for _, m := range r.bot.chat(42) {
		if strings.Contains(m.Text, botToken) {
			t.Errorf("the token was sent to the chat: %q", m.Text)
		}
	}
	if n := r.agent.count(); n != 4 {
		t.Errorf("%d turns, want 4", n)
	}
	if !strings.Contains(r.logs.String(), "asking for one at a time") {
		t.Error("the oversize update was not asked for alone")
	}
	r.noToken()
}

func TestStreamingAndSplitting(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}})
	var b strings.Builder
	b.WriteString("# Report\n\n")
	for i := range 70 {
		fmt.Fprintf(&b, "Paragraph %d: **some** words and an emoji 😀 to count as two units, then more text to fill the line.\n\n", i)
	}
	b.WriteString("```go\n")
	for i := range 90 {
		fmt.Fprintf(&b, "fmt.Println(%d, \"<tag>\") // a line of code that is rather long\n", i)
	}
	b.WriteString("```\n\nThe end 😀😀😀")
	answer := b.String()
	r.agent.reply = func(string) string { return answer }
	r.agent.deltas, r.agent.pace = 200, 2*time.Millisecond
	r.bot.message(42, "report")
	eventually(t, "the whole answer", func() bool {
		m := r.bot.chat(42)
		return len(m) > 0 && strings.HasSuffix(m[len(m)-1].Text, "The end 😀😀😀")
	})
	eventually(t, "the outbox done", func() bool { n, _ := r.st.OutboxBacklog(t.Context(), "telegram"); return n == 0 })
	msgs := r.bot.chat(42)
	if len(msgs) < 3 {
		t.Fatalf("%d messages for a %d-byte answer", len(msgs), len(answer))
	}
	edited := false
	for i, m := range msgs {
		if n := len(utf16.Encode([]rune(visible(m.Text)))); n > 4096 {
			t.Errorf("message %d has %d UTF-16 units", i, n)
		}
		if m.ParseMode != "HTML" {
			t.Errorf("message %d is not formatted", i)
		}
		edited = edited || m.Edits > 0
	}
	if !edited {
		t.Error("no message was edited as the answer streamed")
	}
	if !strings.HasPrefix(msgs[0].Text, "<b>Report</b>") {
		t.Errorf("the first message starts %q", msgs[0].Text[:40])
	}
	// The code block cut across two messages is closed and reopened.
	for i, m := range msgs[:len(msgs)-1] {
		if strings.Count(m.Text, "<pre>") != strings.Count(m.Text, "</pre>") {
			t.Errorf("message %d leaves a code block open", i)
		}
	}
}

func TestBadMarkupFallsBackToPlainText(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}})
	r.bot.mu.Lock()
	r.bot.rejectMD = true
	r.bot.mu.Unlock()
	r.agent.reply = func(string) string { return "**bold** answer" }
	r.agent.deltas = 1
	r.bot.message(42, "hi")
	r.waitTexts(42, "**bold** answer")
	if m := r.bot.chat(42)[0]; m.ParseMode != "" {
		t.Errorf("parse mode %q", m.ParseMode)
	}
}

func TestNotify(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyPairing, allowFrom: []int64{42}})
	r.pair(43)
	if err := r.host.Notify(t.Context(), "telegram", "Reminder: call *Ada* at 3"); err != nil {
		t.Fatal(err)
	}
	r.waitTexts(42, "Reminder: call *Ada* at 3")
	r.waitTexts(43, "Reminder: call *Ada* at 3")
	if r.agent.count() != 0 {
		t.Error("a notification went through the model")
	}
	if err := r.host.Notify(t.Context(), "matrix", "x"); !errors.Is(err, channels.ErrUnknownChannel) {
		t.Errorf("an unknown channel: %v", err)
	}
	none := newRig(t, rigOpts{policy: config.DMPolicyPairing})
	if err := none.host.Notify(t.Context(), "", "x"); !errors.Is(err, channels.ErrNoOwner) || !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("no owner: %v", err)
	}
}

func TestStatusRoute(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}})
	r.bot.message(42, "hi")
	r.waitTexts(42, "echo: hi")
	eventually(t, "a success", func() bool { return r.status()["last_success"] != nil })
	s := r.status()
	for _, k := range []string{"name", "state", "last_success", "lag_ms", "lag", "error", "restarts", "inbox", "outbox", "dm_policy", "paired", "pending_pairings"} {
		if _, ok := s[k]; !ok {
			t.Errorf("GET /api/channels lacks %q: %+v", k, s)
		}
	}
	if s["name"] != "telegram" || s["error"] != "" || s["lag_ms"] != float64(0) || s["dm_policy"] != "allowlist" {
		t.Errorf("status = %+v", s)
	}
	if _, err := time.Parse(time.RFC3339Nano, s["last_success"].(string)); err != nil {
		t.Errorf("last_success %v", s["last_success"])
	}
}

func TestRefusedCredential(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}, credential: "999:WRONGsecret"})
	eventually(t, "the refusal in the status", func() bool {
		return strings.Contains(fmt.Sprint(r.status()["error"]), "unauthorized")
	})
	if strings.Contains(r.logs.String(), "WRONGsecret") || strings.Contains(fmt.Sprint(r.status()), "WRONGsecret") {
		t.Error("the credential is in the log or the status")
	}
	h := channels.New(channels.Options{Store: r.st})
	err := h.Add(t.Context(), channels.Config{Name: "telegram", Adapter: r.rec, Credential: []byte("  \n")})
	if !errors.Is(err, channels.ErrNoCredential) || !errors.Is(err, errs.ErrConfig) {
		t.Errorf("an empty credential: %v", err)
	}
}

// visible is a message's text as Telegram counts it: after entities parsing.
func visible(html string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&amp;", "&").Replace(tagRE.ReplaceAllString(html, ""))
}

// recv takes the next value of ch, failing the test after waitFor.
func recv(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatal("timed out waiting for a turn")
		return ""
	}
}
