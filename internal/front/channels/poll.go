package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/store"
)

// watchdogGrace is how long past its own timeout a long poll may take
// before the watchdog cuts it and starts another.
const watchdogGrace = 15 * time.Second

// errStalled is the watchdog's cause.
var errStalled = errors.New("the long poll stalled: no answer within its timeout and 15s more (the watchdog restarted it)")

// Bounds of an event's fields, whatever the adapter returned.
const (
	maxEventText = 32 << 10
	maxEventID   = 256
	maxEventName = 256
)

// pollLoop long-polls the platform: every update is stored (with the
// cursor that acknowledges it, in one transaction) before the next poll
// acknowledges it. Errors back off with jitter (1 s doubling to a minute),
// a 429 waits its retry_after, and the watchdog cuts a poll that outlives
// its timeout.
func (c *Channel) pollLoop(ctx context.Context) {
	defer c.setState(StateStopped)
	var cursor string
	for failures := 1; ; failures++ {
		var err error
		if cursor, err = c.st.ChannelCursor(ctx, c.cfg.Name); err == nil {
			break
		}
		c.log.Error("reading the channel's cursor", "err", c.fail(err))
		if sleep(ctx, c.clk, c.backoff(failures)) != nil {
			return
		}
	}
	limit := 100
	failures := 0
	for ctx.Err() == nil {
		c.setState(StatePolling)
		timeout := c.cfg.PollTimeout
		pctx, cancel := withDeadline(ctx, c.clk, timeout+watchdogGrace, errStalled)
		out, err := c.exchange(pctx, renderInput{body: body{Action: ActionPoll}, Cursor: cursor,
			Timeout: int(timeout / time.Second), Limit: limit})
		stalled := errors.Is(context.Cause(pctx), errStalled)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if stalled {
			c.mu.Lock()
			c.status.restarts++
			n := c.status.restarts
			c.mu.Unlock()
			c.log.Warn("the watchdog restarted a stalled poll", "restarts", n, "timeout", timeout+watchdogGrace)
			err = errStalled
		}
		var wait time.Duration
		switch {
		case err != nil:
			failures++
			wait = c.backoff(failures)
			c.log.Warn("polling failed: backing off", "err", c.fail(err), "retry_in", wait.Round(time.Millisecond), "failures", failures)
		case out.Error != nil:
			f := out.Error
			msg := c.fail(fmt.Errorf("%s: %s", f.Kind, f.Detail))
			switch f.Kind {
			case KindRateLimited:
				wait = time.Duration(max(f.RetryAfter, 1)) * time.Second
				c.log.Warn("polling was rate limited: waiting as told", "retry_after", wait)
			case KindTooLarge:
				if limit > 1 {
					limit = 1
					c.log.Warn("an update is over the response cap: asking for one at a time", "cap_bytes", c.h.opts.MaxResponseBytes)
					continue
				}
				failures++
				wait = c.backoff(failures)
			case KindConflict:
				failures++
				wait = c.backoff(failures)
				c.log.Warn("another client polls this bot, or a webhook is set: backing off", "err", msg, "retry_in", wait.Round(time.Millisecond))
			case KindUnauthorized:
				failures++
				wait = max(c.backoff(failures), 30*time.Second)
				c.log.Error("the platform refused the bot's credential: check the secret", "err", msg, "retry_in", wait)
			default:
				failures++
				wait = c.backoff(failures)
				c.log.Warn("polling failed: backing off", "err", msg, "retry_in", wait.Round(time.Millisecond), "failures", failures)
			}
		default:
			events := c.events(out.Events)
			added, err := c.st.ReceiveChannelUpdates(ctx, c.cfg.Name, events, out.Cursor)
			if err != nil {
				// Not stored, not acknowledged: the same updates come again.
				failures++
				wait = c.backoff(failures)
				c.log.Error("storing updates failed: they will be asked for again", "err", c.fail(err), "retry_in", wait)
				break
			}
			if out.Cursor != "" {
				cursor = out.Cursor
			}
			if len(added) > 0 {
				c.log.Info("updates received", "count", len(added), "repeated", len(events)-len(added))
				wake(c.wakeInbox)
			}
			limit, failures = 100, 0
			c.ok()
			continue
		}
		c.setState(StateBackoff)
		if sleep(ctx, c.clk, wait) != nil {
			return
		}
	}
}

// events turns the adapter's events into store rows: each checked and cut
// to buddy's bounds whatever the adapter said (a text of 32 KiB at most, no
// control character but \n and \t), an event without an update id dropped.
func (c *Channel) events(raw []json.RawMessage) []store.ChannelEvent {
	out := make([]store.ChannelEvent, 0, len(raw))
	for _, r := range raw {
		var e Event
		if err := json.Unmarshal(r, &e); err != nil || e.UpdateID == "" {
			c.log.Warn("the adapter returned an event without an update id: dropped")
			continue
		}
		e = sanitize(e)
		b, err := json.Marshal(e)
		if err != nil {
			continue
		}
		out = append(out, store.ChannelEvent{Chat: e.Chat, UpdateID: e.UpdateID, Event: b})
	}
	return out
}

// sanitize bounds an event's fields.
func sanitize(e Event) Event {
	id := func(s string) string { return cleanText(cutBytes(s, maxEventID)) }
	e.UpdateID, e.Chat, e.Sender, e.MessageID, e.CallbackID = id(e.UpdateID), id(e.Chat), id(e.Sender), id(e.MessageID), id(e.CallbackID)
	if e.Chat == "" {
		e.Chat = "unknown"
	}
	e.Type, e.ChatType = id(e.Type), id(e.ChatType)
	e.ChatTitle, e.SenderName = cleanText(cutBytes(e.ChatTitle, maxEventName)), cleanText(cutBytes(e.SenderName, maxEventName))
	e.Data = cleanText(cutBytes(e.Data, maxEventID))
	if len(e.Text) > maxEventText {
		e.Text = cutBytes(e.Text, maxEventText-64) + fmt.Sprintf("… [%d more bytes not shown]", len(e.Text)-(maxEventText-64))
	}
	e.Text = cleanText(e.Text)
	return e
}

// cleanText drops control characters but \n and \t, and bytes that are
// not UTF-8.
func cleanText(s string) string {
	bad := func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f }
	if utf8.ValidString(s) && strings.IndexFunc(s, bad) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if !bad(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cutBytes cuts s at n bytes, at a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
