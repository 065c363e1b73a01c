package channels_test

import (
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/config"
)

// question waits for the approval question in chat and returns its
// message and its buttons' data.
func (r *rig) question(chat int64) (sentMessage, string, string) {
	r.t.Helper()
	var q sentMessage
	eventually(r.t, "an approval question", func() bool {
		for _, m := range r.bot.chat(chat) {
			if len(m.Buttons) == 1 && len(m.Buttons[0]) == 2 {
				q = m
				return true
			}
		}
		return false
	})
	return q, q.Buttons[0][0]["callback_data"], q.Buttons[0][1]["callback_data"]
}

func (r *rig) waitAnswer(text string) {
	r.t.Helper()
	eventually(r.t, "the press answered with "+text, func() bool {
		for _, a := range r.bot.callbackAnswers() {
			if a.Text == text {
				return true
			}
		}
		return false
	})
}

func TestApprovalByButton(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}})
	r.agent.ask = askVia(r.host, waitFor)
	r.bot.message(42, "write it")
	q, yes, no := r.question(42)
	if !strings.Contains(q.Text, "<b>write_file</b>") || !strings.Contains(q.Text, "notes/&lt;write it&gt;.txt") ||
		!strings.Contains(q.Text, "*bold* &amp; more") || q.ParseMode != "HTML" {
		t.Errorf("the question shows %q", q.Text)
	}
	parts := strings.Split(yes, "|")
	if len(parts) != 3 || parts[0] != "y" || !strings.HasPrefix(parts[1], "ap_") || len(parts[2]) != 32 || no != "n|"+parts[1]+"|"+parts[2] {
		t.Fatalf("buttons: %q %q", yes, no)
	}
	id := parts[1]
	// Forged and stray presses are refused, and leave the question open.
	forged := []struct {
		chat, from int64
		data, note string
	}{
		{42, 42, "y|" + id + "|" + strings.Repeat("0", 32), "This button is not for the call asked about."},
		{42, 99, yes, "Only buddy's owner can answer this."},
		{42, 42, "y|ap_0000000000000000|" + parts[2], "This question is closed."},
		{42, 42, "launch the missiles", "This button is not one of buddy's."},
		{42, 42, yes + strings.Repeat("x", 100), "This button is not one of buddy's."},
		{43, 42, yes, "This question is not this chat's."},
	}
	for _, f := range forged {
		r.bot.press(f.chat, f.from, q.ID, f.data)
		r.waitAnswer(f.note)
	}
	if r.agent.count() != 1 || len(r.bot.texts(42)) != 1 {
		t.Fatalf("a forged press answered the question: %q", r.bot.texts(42))
	}
	r.bot.press(42, 42, q.ID, yes)
	r.waitAnswer("Approved.")
	eventually(t, "the answer and the closed question", func() bool {
		m := r.bot.chat(42)
		return len(m) == 2 && m[1].Text == "approved: write it" && len(m[0].Buttons) == 0 &&
			strings.Contains(m[0].Text, "Approved</b> in the chat")
	})
	// The page holds the decision.
	conv, _, _ := r.st.ChannelChat(t.Context(), "telegram", "42")
	var c struct {
		Approvals []struct {
			ID        string `json:"id"`
			Status    string `json:"status"`
			DecidedBy string `json:"decided_by"`
		}
	}
	r.api("GET", "/api/conversations/"+conv, nil, &c)
	if len(c.Approvals) != 1 || c.Approvals[0].ID != id || c.Approvals[0].Status != "approved" || c.Approvals[0].DecidedBy != "user" {
		t.Errorf("the page shows %+v", c.Approvals)
	}
	// A second press: closed.
	r.bot.press(42, 42, q.ID, no)
	eventually(t, "the late press answered", func() bool {
		a := r.bot.callbackAnswers()
		return len(a) == len(forged)+2 && a[len(a)-1].Text == "This question is closed."
	})
	r.noToken()
}

func TestApprovalAnsweredInThePage(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyPairing})
	r.pair(42)
	r.agent.ask = askVia(r.host, waitFor)
	r.bot.message(42, "write it")
	q, yes, _ := r.question(42)
	id := strings.Split(yes, "|")[1]
	conv, _, _ := r.st.ChannelChat(t.Context(), "telegram", "42")
	if st := r.api("POST", "/api/chat/"+conv+"/approve", map[string]any{"approval_id": id, "approved": false}, nil); st != 200 {
		t.Fatalf("the page's answer: %d", st)
	}
	eventually(t, "the denial in the chat", func() bool {
		m := r.bot.chat(42)
		return len(m) == 2 && m[1].Text == "denied: write it" && len(m[0].Buttons) == 0 &&
			strings.Contains(m[0].Text, "Denied</b> in buddy's page")
	})
	r.bot.press(42, 42, q.ID, yes)
	r.waitAnswer("This question is closed.")
}

func TestApprovalExpires(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}})
	r.agent.ask = askVia(r.host, 500*time.Millisecond)
	r.bot.message(42, "write it")
	r.question(42)
	eventually(t, "the expiry in the chat", func() bool {
		m := r.bot.chat(42)
		return len(m) == 2 && m[1].Text == "not run: context deadline exceeded" && len(m[0].Buttons) == 0 &&
			strings.Contains(m[0].Text, "no answer in time")
	})
}

func TestApprovalOpenPolicyNeedsTheOwner(t *testing.T) {
	// Under dm_policy "open" anyone may talk, but only an owner may approve.
	r := newRig(t, rigOpts{policy: config.DMPolicyOpen})
	r.agent.ask = askVia(r.host, waitFor)
	r.bot.message(77, "write it")
	q, yes, _ := r.question(77)
	r.bot.press(77, 77, q.ID, yes)
	r.waitAnswer("Only buddy's owner can answer this.")
	r.pair(77)
	r.bot.press(77, 77, q.ID, yes)
	r.waitAnswer("Approved.")
	eventually(t, "the answer", func() bool {
		m := r.bot.chat(77)
		return len(m) == 2 && m[1].Text == "approved: write it"
	})
}
