package channels

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// senders is how many messages (of different chats) are sent at once.
const senders = 4

// outboxLoop sends what the outbox holds, oldest first: a chat's messages
// in order (one is sent only once those before it have their platform id),
// a message's later states as edits. A message is marked when the platform
// confirms it; one that fails is tried again with back-off (a 429 pauses
// every send for its retry_after), one the platform refuses for good is
// marked failed. Messages queued by another process (`buddy pair approve`)
// are seen within a few seconds.
func (c *Channel) outboxLoop(ctx context.Context) {
	retry := map[int64]time.Time{} // id → not before
	failures := map[int64]int{}
	lastEdit := map[int64]time.Time{}
	for ctx.Err() == nil {
		rows, err := c.st.PendingOutbox(ctx, c.cfg.Name)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.Error("reading the outbox", "err", err)
			if sleep(ctx, c.clk, 5*time.Second) != nil {
				return
			}
			continue
		}
		now := c.clk.Now()
		c.mu.Lock()
		pause := c.sendPause
		c.mu.Unlock()
		next := now.Add(3 * time.Second) // a look for rows of other processes
		var due []store.OutboxItem
		blocked := map[string]bool{}
		for _, r := range rows {
			if blocked[r.Chat] {
				continue
			}
			if r.MessageID == "" {
				blocked[r.Chat] = true // the chat's later messages wait for this one
			}
			if r.InSync() {
				if r.Final {
					_ = c.confirm(ctx, r, r.MessageID) // made final as it was shown: done
				}
				continue // a streamed answer shown as it is, not final yet
			}
			at := retry[r.ID]
			if r.MessageID != "" {
				if e := lastEdit[r.ID].Add(c.editGap(r)); e.After(at) {
					at = e
				}
			}
			if pause.After(at) {
				at = pause
			}
			if at.After(now) {
				if at.Before(next) {
					next = at
				}
				continue
			}
			due = append(due, r)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		sem := make(chan struct{}, senders)
		for _, r := range due {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				err := c.send(ctx, r)
				mu.Lock()
				defer mu.Unlock()
				if r.MessageID != "" {
					lastEdit[r.ID] = c.clk.Now()
				}
				if err == nil {
					delete(retry, r.ID)
					delete(failures, r.ID)
					return
				}
				failures[r.ID]++
				retry[r.ID] = c.clk.Now().Add(c.backoff(failures[r.ID]))
			})
		}
		wg.Wait()
		if len(due) > 0 {
			continue // look again at once: sending may have unblocked a chat
		}
		if len(retry) > 1000 { // forget the ids of rows done long ago
			for id, at := range retry {
				if at.Before(now.Add(-time.Hour)) {
					delete(retry, id)
					delete(failures, id)
					delete(lastEdit, id)
				}
			}
		}
		wait := max(next.Sub(now), 0)
		ch, stop := c.clk.Timer(wait)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-c.wakeOutbox:
			stop()
		case <-ch:
		}
	}
}

// editGap is how long a message waits between two edits.
func (c *Channel) editGap(r store.OutboxItem) time.Duration {
	if c.h.opts.EditInterval != 0 {
		return c.h.opts.EditInterval
	}
	return time.Duration(c.info.EditIntervalMS) * time.Millisecond / 2
}

// sendTimeout bounds one send (or edit), its record included.
const sendTimeout = 30 * time.Second

var errSendTimeout = errors.New("the platform did not answer within 30s")

// errRetry marks a send to try again.
var errRetry = errors.New("to be tried again")

// send brings one message to its body: sends it, or edits it.
func (c *Channel) send(ctx context.Context, r store.OutboxItem) error {
	b, err := decodeBody(r.Body)
	if err != nil {
		_ = c.st.FailOutbox(ctx, r.ID, "the stored body does not decode: "+err.Error(), true)
		return nil
	}
	if err := c.limiter.wait(ctx); err != nil {
		return err
	}
	if r.MessageID == "" {
		// Counted before it is made: a crash between the platform's answer
		// and its record is the one case a message may be sent twice.
		if err := c.st.NoteOutboxAttempt(ctx, r.ID); err != nil {
			return err
		}
	}
	in := renderInput{body: b, Chat: r.Chat, MessageID: r.MessageID}
	// A send once started is finished and recorded even when buddy is
	// stopping: cut between the platform's answer and its record, the
	// message would be sent again at the next start.
	sctx, cancel := withDeadline(context.WithoutCancel(ctx), c.clk, sendTimeout, errSendTimeout)
	out, err := c.exchange(sctx, in)
	cancel()
	if err != nil {
		msg := c.fail(err)
		if errs.KindOf(err) == errs.KindInvalidInput {
			// The adapter could not render it: it never will.
			_ = c.st.FailOutbox(ctx, r.ID, msg, true)
			c.log.Error("a message could not be rendered: dropped", "id", r.ID, "chat", r.Chat, "err", msg)
			return nil
		}
		_ = c.st.FailOutbox(ctx, r.ID, msg, false)
		c.log.Warn("sending failed: will try again", "id", r.ID, "chat", r.Chat, "err", msg)
		return errRetry
	}
	if out.Error != nil {
		f := out.Error
		switch f.Kind {
		case KindNotModified:
			return c.confirm(ctx, r, r.MessageID)
		case KindBadMarkup:
			if !b.Plain {
				b.Plain = true
				c.log.Warn("the platform refused the message's formatting: sending it as plain text", "id", r.ID, "detail", f.Detail)
				return c.sendAs(ctx, r, b)
			}
		case KindGone:
			if r.MessageID != "" {
				c.log.Warn("the message to edit is gone: sending it anew", "id", r.ID)
				r.MessageID = ""
				return c.sendAs(ctx, r, b)
			}
		case KindRateLimited:
			wait := time.Duration(max(f.RetryAfter, 1)) * time.Second
			c.mu.Lock()
			c.sendPause = c.clk.Now().Add(wait)
			c.mu.Unlock()
			c.log.Warn("sending was rate limited: pausing as told", "retry_after", wait)
			_ = c.st.FailOutbox(ctx, r.ID, c.fail(f), false)
			return errRetry
		case KindUnavailable, KindConflict, KindTooLarge:
			_ = c.st.FailOutbox(ctx, r.ID, c.fail(f), false)
			return errRetry
		}
		msg := c.fail(f)
		c.log.Error("the platform refused a message for good", "id", r.ID, "chat", r.Chat, "err", msg)
		_ = c.st.FailOutbox(ctx, r.ID, msg, true)
		return nil
	}
	c.ok()
	id := out.MessageID
	if id == "" {
		id = r.MessageID
	}
	if id == "" {
		id = "unknown"
	}
	return c.confirm(ctx, r, id)
}

// sendAs sends r with another body (plain text, or anew) right away; the
// row keeps its body (what the chat should show), the platform the
// fallback's.
func (c *Channel) sendAs(ctx context.Context, r store.OutboxItem, b body) error {
	if err := c.limiter.wait(ctx); err != nil {
		return err
	}
	sctx, cancel := withDeadline(context.WithoutCancel(ctx), c.clk, sendTimeout, errSendTimeout)
	defer cancel()
	out, err := c.exchange(sctx, renderInput{body: b, Chat: r.Chat, MessageID: r.MessageID})
	if err != nil {
		_ = c.st.FailOutbox(ctx, r.ID, c.fail(err), false)
		return errRetry
	}
	if out.Error != nil && out.Error.Kind != KindNotModified {
		if out.Error.Kind == KindUnavailable || out.Error.Kind == KindRateLimited {
			_ = c.st.FailOutbox(ctx, r.ID, c.fail(out.Error), false)
			return errRetry
		}
		_ = c.st.FailOutbox(ctx, r.ID, c.fail(out.Error), true)
		return nil
	}
	id := out.MessageID
	if id == "" {
		id = r.MessageID
	}
	if id == "" {
		id = "unknown"
	}
	return c.confirm(ctx, r, id)
}

// confirm records what the platform shows.
func (c *Channel) confirm(ctx context.Context, r store.OutboxItem, messageID string) error {
	c.log.Debug("message sent", "id", r.ID, "kind", r.Kind, "chat", r.Chat, "message_id", messageID, "edit", r.MessageID != "", "final", r.Final)
	if err := c.st.ConfirmOutbox(context.WithoutCancel(ctx), r.ID, messageID, r.Body); err != nil {
		c.log.Error("recording a sent message", "id", r.ID, "err", err)
		return fmt.Errorf("recording: %w", err)
	}
	return nil
}
