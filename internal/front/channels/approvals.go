package channels

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// question is an approval question posted in one or more chats of a
// channel (a chat's own question in that chat; a scheduled turn's held call
// in every owner's chat).
type question struct {
	id, hash     string
	conversation string
	view         ApprovalView

	mu     sync.Mutex
	rows   map[string]int64 // its outbox row in each chat it was posted in
	by     string           // where it was answered: chat (set by a press), else page
	closed *ApprovalView    // its outcome, once decided
}

// The data of a question's buttons: "y|ID|HASH" and "n|ID|HASH", HASH the
// first 32 hex digits of the arguments' sha256 (Telegram allows 64 bytes).
const hashPrefix = 32

// Ask is the Asker of the channels' gate (cmd/buddy builds it with
// env.newGate): a question about a call of a chat's conversation is asked on
// the page, as every question is, and posted in the chat with Approve and
// Deny buttons bound to its id and arguments; the first answer, in either,
// closes it in both. A question of another conversation is asked on the
// page only.
func (h *Host) Ask(ctx context.Context, req approval.Request) (bool, error) {
	page, _ := h.pageAndAgent()
	if page == nil {
		return false, errors.New("no one to ask: buddy serve's page is not attached")
	}
	c, chat := h.chatOf(ctx, req.Conversation)
	if c == nil {
		return page.AskWatched(ctx, req, nil, nil)
	}
	var q *question
	asked := func(id, hash string, expires time.Time) {
		view := ApprovalView{Skill: req.Skill, Permission: string(req.Permission),
			Description: approval.Describe(req, 160), Reason: req.Reason, ExpiresAt: expiresAt(expires, c.clk.Now())}
		if q = c.open(id, hash, req.Conversation, view); q != nil {
			c.post(ctx, q, chat)
		}
	}
	resolved := func(approved bool, reason string) {
		if q != nil {
			c.close(ctx, q, approved, reason)
		}
	}
	return page.AskWatched(ctx, req, asked, resolved)
}

// chatOf is the channel and chat of a conversation, if it is a chat's.
func (h *Host) chatOf(ctx context.Context, conversation string) (*Channel, string) {
	if conversation == "" || h.opts.Store == nil {
		return nil, ""
	}
	name, chat, ok, err := h.opts.Store.ChatOfConversation(ctx, conversation)
	if err != nil || !ok {
		return nil, ""
	}
	c := h.chans[name]
	if c == nil {
		return nil, ""
	}
	return c, chat
}

// expiresAt is when a question expires as a chat shows it: the time of day,
// with the date when it is not within a day.
func expiresAt(t, now time.Time) string {
	switch {
	case t.IsZero():
		return ""
	case t.Sub(now) < 20*time.Hour:
		return t.UTC().Format("15:04:05 UTC")
	}
	return t.UTC().Format("Jan 2 15:04 UTC")
}

// open notes a question the channel will post (nil when it cannot be
// answered in a chat: no arguments' hash to bind the buttons to).
func (c *Channel) open(id, hash, conversation string, view ApprovalView) *question {
	if len(hash) < hashPrefix {
		c.log.Error("an approval question without its arguments' hash cannot be answered in a chat", "approval", id)
		return nil
	}
	short := hash[:hashPrefix]
	view.ID, view.Approve, view.Deny = id, "y|"+id+"|"+short, "n|"+id+"|"+short
	q := &question{id: id, hash: hash, conversation: conversation, view: view, rows: map[string]int64{}}
	c.mu.Lock()
	c.questions[id] = q
	c.mu.Unlock()
	return q
}

// post queues the question for a chat (closed at once when it was decided
// meanwhile).
func (c *Channel) post(ctx context.Context, q *question, chat string) {
	q.mu.Lock()
	v := q.view
	if q.closed != nil {
		v = *q.closed
	}
	row, err := c.enqueue(ctx, chat, kindApproval, q.id, body{Action: ActionApproval, Approval: &v}, q.closed != nil)
	if err != nil {
		q.mu.Unlock()
		c.log.Error("posting an approval question in the chat", "approval", q.id, "err", err)
		return
	}
	q.rows[chat] = row
	q.mu.Unlock()
	c.log.Info("approval question posted in the chat", "approval", q.id, "chat", chat, "skill", v.Skill)
}

// posted reports whether the question was posted in chat.
func (q *question) posted(chat string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.rows[chat]
	return ok
}

// close edits the question's messages to its outcome.
func (c *Channel) close(ctx context.Context, q *question, approved bool, reason string) {
	c.mu.Lock()
	if c.questions[q.id] == q {
		delete(c.questions, q.id)
	}
	c.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	v := q.view
	switch reason {
	case "user":
		v.Outcome = "denied"
		if approved {
			v.Outcome = "approved"
		}
		v.By = "page"
		if q.by != "" {
			v.By = q.by
		}
	case "timeout":
		v.Outcome = "expired"
	default:
		v.Outcome = "canceled"
	}
	q.closed = &v
	for chat, row := range q.rows {
		if err := c.update(ctx, row, body{Action: ActionApproval, Approval: &v}, true); err != nil {
			c.log.Error("closing an approval question in the chat", "approval", q.id, "chat", chat, "err", err)
		}
	}
}

// callback handles a button press: only one of buddy's open questions, in
// its own chat, pressed by an owner (a user of allow_from or a paired user),
// with the arguments' hash it was posted with, answers it. Anything else is
// refused with a short note to the presser.
func (c *Channel) callback(ctx context.Context, e Event) {
	refuse := func(why, note string) {
		c.log.Warn("a button press was refused", "why", why, "chat", e.Chat, "sender", e.Sender)
		c.answerCallback(ctx, e.CallbackID, note)
	}
	parts := strings.Split(e.Data, "|")
	if len(e.Data) > c.info.MaxButtonData || len(parts) != 3 || (parts[0] != "y" && parts[0] != "n") ||
		!strings.HasPrefix(parts[1], "ap_") || len(parts[2]) != hashPrefix {
		refuse("not one of buddy's buttons", "This button is not one of buddy's.")
		return
	}
	c.mu.Lock()
	q := c.questions[parts[1]]
	c.mu.Unlock()
	switch {
	case q == nil:
		refuse("no such open question", "This question is closed.")
		return
	case !q.posted(e.Chat):
		refuse("a question of another chat", "This question is not this chat's.")
		return
	case !c.isOwner(ctx, e.Sender):
		refuse("not the owner", "Only buddy's owner can answer this.")
		return
	case subtle.ConstantTimeCompare([]byte(q.hash[:hashPrefix]), []byte(parts[2])) != 1:
		refuse("the arguments' hash differs", "This button is not for the call asked about.")
		return
	}
	page, _ := c.h.pageAndAgent()
	approved := parts[0] == "y"
	q.mu.Lock()
	q.by = "chat"
	q.mu.Unlock()
	err := page.Answer(ctx, q.conversation, q.id, approved, q.hash)
	switch {
	case err == nil && approved:
		c.log.Info("approved in the chat", "approval", q.id, "sender", e.Sender)
		c.answerCallback(ctx, e.CallbackID, "Approved.")
	case err == nil:
		c.log.Info("denied in the chat", "approval", q.id, "sender", e.Sender)
		c.answerCallback(ctx, e.CallbackID, "Denied.")
	case errors.Is(err, errs.ErrTimeout):
		c.answerCallback(ctx, e.CallbackID, "Too late: the question expired.")
	default:
		q.mu.Lock()
		q.by = ""
		q.mu.Unlock()
		c.answerCallback(ctx, e.CallbackID, "This question was already answered.")
	}
}

// answerCallback answers a press (the platform shows a short note; it is
// not a message, and not stored: a press left unanswered only spins).
func (c *Channel) answerCallback(ctx context.Context, id, text string) {
	if id == "" {
		return
	}
	actx, cancel := withDeadline(ctx, c.clk, 10*time.Second, errors.New("answering a press: no answer in 10s"))
	defer cancel()
	if err := c.limiter.wait(actx); err != nil {
		return
	}
	out, err := c.exchange(actx, renderInput{body: body{Action: ActionAnswerCallback, Text: text}, CallbackID: id})
	if err == nil && out.Error != nil {
		err = out.Error
	}
	if err != nil {
		c.log.Debug("answering a button press", "err", c.scrub(err.Error()))
	}
}
