package channels

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/scheduler"
	"github.com/buddy-run/buddy/internal/store"
)

// The host is the scheduler's way to the owner's chat app: buddy serve
// hands it in as the scheduler's Deliverer when a channel is configured.
var (
	_ scheduler.Deliverer = (*Host)(nil)
	_ scheduler.HeldAsker = (*Host)(nil)
)

// Deliver is the scheduler's Deliverer: a scheduled job's notification (a
// reminder's text verbatim, a check's answer, what became of a held call)
// goes to the owners' direct chats of every channel, through the durable
// outbox (Notify): stored now, sent when the platform answers, never twice.
// A reminder delivered well after it was due says when it was due. The
// notification that a call is held is not sent: AskHeld posts the question
// itself, with its buttons.
func (h *Host) Deliver(ctx context.Context, n scheduler.Notification) error {
	if n.ApprovalID != "" {
		return nil
	}
	text := strings.TrimSpace(n.Text)
	if n.Kind == store.JobReminder {
		text = "Reminder: " + text
		if !n.DueAt.IsZero() && h.opts.Clock.Now().Sub(n.DueAt) > 5*time.Minute {
			text += fmt.Sprintf("\n(due %s, delivered late: buddy was not running)", n.DueAt.UTC().Format("Jan 2 15:04 UTC"))
		}
	}
	return h.Notify(ctx, "", text)
}

// AskHeld is the scheduler's HeldAsker: a call a scheduled turn held is
// asked in every owner's direct chat, with Approve and Deny buttons bound to
// its approval id and arguments (a press is answered as the page's answer
// is, and only an owner's counts); whatever decides it — a press, the page,
// its expiry — closes it in every chat it was posted in.
func (h *Host) AskHeld(ctx context.Context, held scheduler.Held) error {
	page, _ := h.pageAndAgent()
	if page == nil {
		return errors.New("no one to ask: buddy serve's page is not attached")
	}
	ctx = context.WithoutCancel(ctx)
	type ask struct {
		c     *Channel
		q     *question
		chats []string
	}
	var asks []ask
	view := ApprovalView{Skill: held.Skill, Permission: held.Permission, Description: held.Description,
		Reason:    fmt.Sprintf("A scheduled job (%s) wants to run this; nothing runs until you answer.", held.JobID),
		ExpiresAt: expiresAt(held.Expires, h.opts.Clock.Now())}
	for _, n := range h.names {
		c := h.chans[n]
		chats := c.ownerChats(ctx)
		if len(chats) == 0 {
			continue
		}
		q := c.open(held.ApprovalID, held.ArgumentsHash, held.ConversationID, view)
		if q == nil {
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("approval %s has no arguments' hash to bind buttons to", held.ApprovalID))
		}
		asks = append(asks, ask{c, q, chats})
	}
	if len(asks) == 0 {
		return errs.Wrap(errs.ErrNotFound, "asking the owner about a held call", ErrNoOwner)
	}
	// Watched before it is posted: a decision that comes meanwhile closes
	// what is posted after it.
	watching := page.WatchResolved(held.ApprovalID, func(approved bool, reason string) {
		for _, a := range asks {
			a.c.close(ctx, a.q, approved, reason)
		}
	})
	if !watching {
		for _, a := range asks {
			a.c.forget(a.q)
		}
		return nil // decided already: nothing to ask
	}
	for _, a := range asks {
		for _, chat := range a.chats {
			a.c.post(ctx, a.q, chat)
		}
	}
	return nil
}

// forget drops a question that was never posted.
func (c *Channel) forget(q *question) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.questions[q.id] == q {
		delete(c.questions, q.id)
	}
}
