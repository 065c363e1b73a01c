package channels_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/channels"
	"github.com/buddy-run/buddy/internal/store"
)

func TestAllowlist(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42, -100777}})
	r.bot.message(42, "hello")
	r.waitTexts(42, "echo: hello")
	// A stranger gets nothing at all, and nothing of theirs reaches the agent.
	r.bot.message(99, "let me in")
	// A group not listed: nothing; a listed group: anyone in it.
	r.bot.groupMessage(-100555, 42, "in another group")
	r.bot.groupMessage(-100777, 7, "in our group")
	r.waitTexts(-100777, "echo: in our group")
	r.bot.message(42, "again")
	r.waitTexts(42, "echo: hello", "echo: again")
	if got := r.bot.texts(99); len(got) != 0 {
		t.Errorf("the stranger was answered: %q", got)
	}
	if got := r.bot.texts(-100555); len(got) != 0 {
		t.Errorf("a group not allowed was answered: %q", got)
	}
	if n := r.agent.count(); n != 3 {
		t.Errorf("the agent ran %d turns, want 3", n)
	}
	eventually(t, "the inbox to be handled", func() bool {
		s := r.inboxStates()
		return s[store.InboxDone] == 3 && s[store.InboxRefused] == 2
	})
	items, _ := r.st.Inbox(t.Context(), "telegram", 100)
	for _, it := range items {
		if it.State == store.InboxRefused && strings.Contains(string(it.Event), "let me in") {
			t.Errorf("a refused message is kept: %s", it.Event)
		}
	}
	// One conversation per chat, visible in the page.
	var list struct{ Conversations []struct{ ID, Title string } }
	r.api("GET", "/api/conversations", nil, &list)
	titles := map[string]bool{}
	for _, c := range list.Conversations {
		titles[c.Title] = true
	}
	if len(list.Conversations) != 2 || !titles["Telegram: U42 @u42"] || !titles["Telegram: Team"] {
		t.Errorf("conversations = %+v", list.Conversations)
	}
	r.noToken()
}

var codeRE = regexp.MustCompile(`Your pairing code: ([A-Z0-9]{8})\b`)

func TestPairing(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyPairing})
	r.bot.message(11, "hi, I'm Ada")
	eventually(t, "a pairing code", func() bool { return len(r.bot.texts(11)) == 1 })
	m := codeRE.FindStringSubmatch(r.bot.texts(11)[0])
	if m == nil {
		t.Fatalf("no code in %q", r.bot.texts(11)[0])
	}
	code := m[1]
	if strings.ContainsAny(code, "0O1IL") {
		t.Errorf("code %s has an ambiguous character", code)
	}
	// Writing again while the code waits: no second code, nothing to the agent.
	r.bot.message(11, "hello?")
	// Three more strangers: two get a code, the fourth pending one nothing.
	for _, u := range []int64{12, 13, 14} {
		r.bot.message(u, "me too")
	}
	eventually(t, "the strangers' updates to be handled", func() bool { return r.inboxStates()[store.InboxRefused] == 5 })
	codes := func() int { return len(r.bot.texts(12)) + len(r.bot.texts(13)) + len(r.bot.texts(14)) }
	eventually(t, "two more codes", func() bool { return codes() == 2 })
	eventually(t, "the outbox to be sent", func() bool { n, _ := r.st.OutboxBacklog(t.Context(), "telegram"); return n == 0 })
	if n := len(r.bot.texts(11)); n != 1 {
		t.Errorf("user 11 got %d messages, want 1 code", n)
	}
	if got := codes(); got != 2 {
		t.Errorf("%d codes for three more strangers, want 2 (at most 3 pending)", got)
	}
	if r.agent.count() != 0 {
		t.Fatalf("a stranger's message reached the agent")
	}
	var list struct{ Pending, Paired []channels.PairingView }
	r.api("GET", "/api/pairing", nil, &list)
	if len(list.Pending) != 3 || len(list.Paired) != 0 {
		t.Fatalf("GET /api/pairing = %+v", list)
	}
	// The owner approves in the page (lower case, with a dash: as typed).
	typed := strings.ToLower(code[:4] + "-" + code[4:])
	var v channels.PairingView
	if st := r.api("POST", "/api/pairing/approve", map[string]string{"code": typed}, &v); st != 200 || v.User != "11" || v.Status != "paired" {
		t.Fatalf("approve: %d %+v", st, v)
	}
	r.waitTexts(11, r.bot.texts(11)[0], "You're paired: buddy now reads your messages here and answers them.")
	r.bot.message(11, "now?")
	first := r.bot.texts(11)
	r.waitTexts(11, first[0], first[1], "echo: now?")
	// Approving twice, or a code that is not one.
	if st := r.api("POST", "/api/pairing/approve", map[string]string{"code": code}, nil); st != 404 {
		t.Errorf("approving twice: %d", st)
	}
	if st := r.api("POST", "/api/pairing/approve", map[string]string{"code": "O0O0"}, nil); st != 400 {
		t.Errorf("a bad code: %d", st)
	}
	// Revoked: a stranger again (a new code; nothing reaches the agent).
	if st := r.api("POST", "/api/pairing/revoke", map[string]string{"channel": "telegram", "user": "11"}, &v); st != 200 || v.Status != "revoked" {
		t.Fatalf("revoke: %d %+v", st, v)
	}
	turns := r.agent.count()
	r.bot.message(11, "still there?")
	eventually(t, "a new code after the revocation", func() bool { return len(r.bot.texts(11)) == 4 })
	if r.agent.count() != turns {
		t.Error("a revoked user's message reached the agent")
	}
	if s := r.status(); s["paired"] != float64(0) || s["pending_pairings"] != float64(3) {
		t.Errorf("status = %+v", s)
	}
	r.noToken()
}

func TestPairingCodeExpires(t *testing.T) {
	clk := newFakeClock()
	r := newRig(t, rigOpts{clock: clk})
	r.bot.message(21, "hi")
	eventually(t, "a code", func() bool { return len(r.bot.texts(21)) == 1 })
	code := codeRE.FindStringSubmatch(r.bot.texts(21)[0])[1]
	_, err := channels.ApprovePairing(t.Context(), r.st, code, clk.Now().Add(channels.PairingCodeTTL+time.Second))
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("approving an expired code: %v", err)
	}
}

func TestCodes(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		c := channels.NewCode()
		if len(c) != channels.CodeLength || strings.ContainsAny(c, "0O1IL") {
			t.Fatalf("code %q", c)
		}
		if n, ok := channels.NormalizeCode(" " + strings.ToLower(c[:3]) + "-" + c[3:]); !ok || n != c {
			t.Fatalf("normalize %q = %q %v", c, n, ok)
		}
		seen[c] = true
	}
	if len(seen) < 1990 {
		t.Errorf("only %d distinct codes of 2000", len(seen))
	}
	for _, bad := range []string{"", "ABCDEFG", "ABCDEFGHJ", "ABCD EFG0", "ABCDEFGI"} {
		if _, ok := channels.NormalizeCode(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

var _ = context.Background
var _ = fmt.Sprint
