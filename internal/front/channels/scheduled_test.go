package channels_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/channels"
	"github.com/buddy-run/buddy/internal/scheduler"
	"github.com/buddy-run/buddy/internal/store"
)

func TestDeliverScheduledNotifications(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyPairing, allowFrom: []int64{42}})
	r.pair(43)
	now := time.Now()
	for _, n := range []scheduler.Notification{
		{JobID: "j_1", Kind: store.JobReminder, Text: "call the *plumber* <now>", DueAt: now},
		{JobID: "j_2", Kind: store.JobCheck, Text: "Your train leaves at 9:12, platform 4.", DueAt: now},
		// Held: AskHeld posts the question, the notification is not sent.
		{JobID: "j_2", Kind: store.JobCheck, Text: "waiting for approval: write_file wants to run", ApprovalID: "ap_0123456789abcdef"},
		{JobID: "j_3", Kind: store.JobReminder, Text: "water the plants", DueAt: now.Add(-3 * time.Hour)},
	} {
		if err := r.host.Deliver(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	late := fmt.Sprintf("Reminder: water the plants\n(due %s, delivered late: buddy was not running)", now.Add(-3*time.Hour).UTC().Format("Jan 2 15:04 UTC"))
	for _, chat := range []int64{42, 43} {
		r.waitTexts(chat, "Reminder: call the *plumber* <now>", "Your train leaves at 9:12, platform 4.", late)
		if m := r.bot.chat(chat)[0]; m.ParseMode != "" {
			t.Errorf("a notification was formatted (%q): it is sent verbatim", m.ParseMode)
		}
	}
	if r.agent.count() != 0 {
		t.Error("a notification went through the model")
	}
	// Nobody to deliver to: an error the scheduler logs.
	none := newRig(t, rigOpts{policy: config.DMPolicyPairing})
	err := none.host.Deliver(t.Context(), scheduler.Notification{Kind: store.JobReminder, Text: "x"})
	if !errors.Is(err, channels.ErrNoOwner) {
		t.Errorf("no owner: %v", err)
	}
}

// held asks about a held write_file call as the scheduler does: on the page
// (every connection), and, once the question is out, in the owners' chats.
// It returns the approval's id and a channel with the page's outcome.
func (r *rig) held(timeout time.Duration) (string, chan error) {
	r.t.Helper()
	conv := "c_job0000000000001"
	now := time.Now().UTC()
	if err := r.st.CreateConversation(r.t.Context(), store.Conversation{ID: conv, Title: "Job: check", CreatedAt: now, UpdatedAt: now}); err != nil {
		r.t.Fatal(err)
	}
	args := json.RawMessage(`{"path":"notes/<today>.txt","content":"x & y"}`)
	req := approval.Request{Conversation: conv, CallID: "call_9", Skill: "write_file", Permission: catalog.Mutating,
		Arguments: args, ArgumentsHash: catalog.ArgumentsHash(args), Expires: now.Add(timeout), Reason: "held"}
	ids := make(chan string, 1)
	outcome := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		ok, err := r.srv.AskHeld(ctx, req, func(id string) {
			ids <- id
			err := r.host.AskHeld(ctx, scheduler.Held{ApprovalID: id, JobID: "j_2", ConversationID: conv, Skill: req.Skill,
				Permission: string(req.Permission), Arguments: args, ArgumentsHash: req.ArgumentsHash,
				Description: approval.Describe(req, approval.DefaultWidth), Expires: req.Expires})
			if err != nil {
				r.t.Errorf("AskHeld: %v", err)
			}
		})
		switch {
		case err != nil:
			outcome <- err
		case !ok:
			outcome <- errors.New("denied")
		default:
			outcome <- nil
		}
	}()
	select {
	case id := <-ids:
		return id, outcome
	case <-time.After(waitFor):
		r.t.Fatal("the held question was not asked")
		return "", nil
	}
}

func TestHeldCallAskedInTheChats(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyPairing, allowFrom: []int64{42}})
	r.pair(43)
	id, outcome := r.held(waitFor)
	q42, yes42, _ := r.question(42)
	q43, yes43, _ := r.question(43)
	if yes42 != yes43 || !strings.Contains(yes42, "|"+id+"|") {
		t.Fatalf("buttons %q and %q for %s", yes42, yes43, id)
	}
	if !strings.Contains(q42.Text, "<b>write_file</b>") || !strings.Contains(q42.Text, "A scheduled job (j_2) wants to run this") ||
		!strings.Contains(q42.Text, "notes/&lt;today&gt;.txt") {
		t.Errorf("the question shows %q", q42.Text)
	}
	// A stranger's press, in an owner's chat: refused; the question stays.
	r.bot.press(42, 99, q42.ID, yes42)
	r.waitAnswer("Only buddy's owner can answer this.")
	// The other owner approves in their chat: closed in both.
	r.bot.press(43, 43, q43.ID, yes43)
	r.waitAnswer("Approved.")
	if err := recvErr(t, outcome); err != nil {
		t.Fatalf("the held call was not approved: %v", err)
	}
	for _, chat := range []int64{42, 43} {
		eventually(t, "the question closed in both chats", func() bool {
			m := r.bot.chat(chat)
			return len(m) == 1 && len(m[0].Buttons) == 0 && strings.Contains(m[0].Text, "Approved</b> in the chat")
		})
	}
}

func TestHeldCallAnsweredInThePage(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}})
	id, outcome := r.held(waitFor)
	q, yes, _ := r.question(42)
	if st := r.api("POST", "/api/chat/c_job0000000000001/approve", map[string]any{"approval_id": id, "approved": false}, nil); st != 200 {
		t.Fatalf("the page's answer: %d", st)
	}
	if err := recvErr(t, outcome); err == nil || err.Error() != "denied" {
		t.Fatalf("outcome %v", err)
	}
	eventually(t, "the denial in the chat", func() bool {
		m := r.bot.chat(42)
		return len(m) == 1 && len(m[0].Buttons) == 0 && strings.Contains(m[0].Text, "Denied</b> in buddy's page")
	})
	r.bot.press(42, 42, q.ID, yes)
	r.waitAnswer("This question is closed.")
}

func TestHeldCallExpires(t *testing.T) {
	r := newRig(t, rigOpts{policy: config.DMPolicyAllowlist, allowFrom: []int64{42}})
	_, outcome := r.held(time.Second)
	r.question(42)
	if err := recvErr(t, outcome); err == nil {
		t.Fatal("an unanswered held call was approved")
	}
	eventually(t, "the expiry in the chat", func() bool {
		m := r.bot.chat(42)
		return len(m) == 1 && len(m[0].Buttons) == 0 && strings.Contains(m[0].Text, "Denied</b>: no answer in time")
	})
}

func recvErr(t *testing.T, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitFor):
		t.Fatal("timed out waiting for the held call's outcome")
		return nil
	}
}
