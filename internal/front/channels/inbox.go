package channels

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

// Outbox kinds.
const (
	kindAnswer   = "answer"   // a streamed answer (one row per part)
	kindApproval = "approval" // an approval question (ref: its id)
	kindNotice   = "notice"   // anything else buddy says (pairing, errors)
)

// chatQueue is a chat's updates waiting to be handled, in order.
type chatQueue struct {
	items   []queued
	running bool
}

type queued struct {
	item  store.InboxItem
	event Event
}

// inboxLoop handles the stored updates: at start the ones an earlier run
// left (replayed), then each poll's. A chat's updates are handled one after
// the other, in the order received; button presses at once (the turn
// waiting for an approval is the chat's).
func (c *Channel) inboxLoop(ctx context.Context) {
	lastPrune := time.Time{}
	failures := 0
	for {
		if now := c.clk.Now(); now.Sub(lastPrune) > 24*time.Hour {
			lastPrune = now
			if n, err := c.st.PruneChannelInbox(ctx, c.cfg.Name, now.Add(-c.h.opts.PruneAfter)); err != nil {
				c.log.Warn("pruning the inbox", "err", err)
			} else if n > 0 {
				c.log.Info("pruned handled updates", "count", n)
			}
		}
		items, err := c.st.OpenInbox(ctx, c.cfg.Name)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			c.log.Error("reading the inbox", "err", err)
			if sleep(ctx, c.clk, c.backoff(failures)) != nil {
				return
			}
			continue
		}
		failures = 0
		open := make(map[int64]bool, len(items))
		for _, it := range items {
			open[it.Seq] = true
		}
		c.mu.Lock()
		// What this run handled is marked in the store (before it is noted
		// here): once the inbox no longer lists it, it never will again.
		for seq := range c.handled {
			if !open[seq] {
				delete(c.handled, seq)
			}
		}
		c.mu.Unlock()
		for _, it := range items {
			c.dispatch(ctx, it)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wakeInbox:
		}
	}
}

// dispatch hands a stored update to its chat's queue (or, a button press,
// to a goroutine of its own), unless it is already being handled.
func (c *Channel) dispatch(ctx context.Context, it store.InboxItem) {
	var e Event
	if err := json.Unmarshal(it.Event, &e); err != nil {
		c.log.Error("an inbox update does not decode: dropped", "seq", it.Seq, "err", err)
		c.mark(ctx, it.Seq, store.InboxDone, "unreadable", true)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The inbox was read before this update's handling ended, or while
	// it runs: not again.
	if c.inflight[it.Seq] || c.handled[it.Seq] {
		return
	}
	c.inflight[it.Seq] = true
	if it.State == store.InboxRunning {
		c.log.Warn("replaying a message whose turn an earlier run did not finish", "seq", it.Seq, "chat", it.Chat)
	}
	if e.Type == EventCallback {
		c.h.wg.Go(func() { c.handle(ctx, it, e) })
		return
	}
	q := c.chats[it.Chat]
	if q == nil {
		q = &chatQueue{}
		c.chats[it.Chat] = q
	}
	q.items = append(q.items, queued{it, e})
	if !q.running {
		q.running = true
		c.h.wg.Go(func() { c.runChat(ctx, it.Chat, q) })
	}
}

// runChat handles a chat's queue until it is empty.
func (c *Channel) runChat(ctx context.Context, chat string, q *chatQueue) {
	for {
		c.mu.Lock()
		if len(q.items) == 0 || ctx.Err() != nil {
			q.running = false
			if len(q.items) == 0 {
				delete(c.chats, chat)
			}
			c.mu.Unlock()
			return
		}
		next := q.items[0]
		q.items = q.items[1:]
		c.mu.Unlock()
		c.handle(ctx, next.item, next.event)
	}
}

// handle acts on one update.
func (c *Channel) handle(ctx context.Context, it store.InboxItem, e Event) {
	done := true
	defer func() {
		c.mu.Lock()
		delete(c.inflight, it.Seq)
		if done {
			c.handled[it.Seq] = true
		}
		c.mu.Unlock()
		if !done && ctx.Err() == nil {
			// Not handled (the store failed): try again in a while.
			c.h.wg.Go(func() {
				if sleep(ctx, c.clk, 5*time.Second) == nil {
					wake(c.wakeInbox)
				}
			})
		}
	}()
	switch e.Type {
	case EventCallback:
		c.callback(ctx, e)
		c.mark(ctx, it.Seq, store.InboxDone, "button", false)
		return
	case EventMessage, EventEditedMessage, EventUnsupported, EventOversize:
	default:
		c.mark(ctx, it.Seq, store.InboxDone, "ignored", false)
		return
	}
	if ok, why := c.allowed(ctx, e); !ok {
		if !isGroup(e) && c.cfg.DMPolicy == config.DMPolicyPairing && e.Sender != "" && e.Chat != "unknown" {
			c.pair(ctx, e)
		}
		c.log.Info("a message from a sender not allowed: nothing of it reaches the agent", "chat", e.Chat, "sender", e.Sender, "why", why)
		c.mark(ctx, it.Seq, store.InboxRefused, why, true)
		return
	}
	switch e.Type {
	case EventUnsupported:
		c.notice(ctx, e.Chat, "I can only read text messages (a photo's caption counts).")
		c.mark(ctx, it.Seq, store.InboxDone, "unsupported", true)
	case EventOversize:
		c.notice(ctx, e.Chat, "That message was too large for me to read: send it in smaller parts.")
		c.mark(ctx, it.Seq, store.InboxDone, "oversize", true)
	default:
		done = c.turn(ctx, it, e)
	}
}

// mark moves an update to its state, retrying a failed write: an update
// whose turn ran and that stays "running" would be answered again at the
// next start.
func (c *Channel) mark(ctx context.Context, seq int64, state, note string, forget bool) bool {
	for attempt := 1; ; attempt++ {
		err := c.st.SetInboxState(context.WithoutCancel(ctx), seq, state, note, forget)
		if err == nil || errors.Is(err, errs.ErrNotFound) {
			return err == nil
		}
		c.log.Error("recording an update's state", "seq", seq, "state", state, "err", err)
		if attempt == 5 || sleep(ctx, c.clk, c.backoff(attempt)) != nil {
			return false
		}
	}
}

// allowed says whether a message's sender may talk to buddy, and if not why:
// a group only when its id is in allow_from; in a direct chat a user of
// allow_from, anyone under dm_policy "open", a paired user under "pairing".
func (c *Channel) allowed(ctx context.Context, e Event) (bool, string) {
	if isGroup(e) {
		if id, err := strconv.ParseInt(e.Chat, 10, 64); err == nil && slices.Contains(c.cfg.AllowFrom, id) {
			return true, ""
		}
		return false, "a group not in allow_from"
	}
	if e.Sender == "" {
		return false, "no sender"
	}
	if id, err := strconv.ParseInt(e.Sender, 10, 64); err == nil && id > 0 && slices.Contains(c.cfg.AllowFrom, id) {
		return true, ""
	}
	switch c.cfg.DMPolicy {
	case config.DMPolicyOpen:
		return true, ""
	case config.DMPolicyPairing:
		ok, err := c.st.Paired(ctx, c.cfg.Name, e.Sender)
		if err != nil {
			c.log.Error("reading pairings", "err", err)
			return false, "pairings unreadable"
		}
		if ok {
			return true, ""
		}
		return false, "not paired"
	}
	return false, "not in allow_from"
}

// isOwner reports whether user may answer approval questions: a user of
// allow_from or a paired user.
func (c *Channel) isOwner(ctx context.Context, user string) bool {
	id, err := strconv.ParseInt(user, 10, 64)
	if err != nil || id <= 0 {
		return false
	}
	if slices.Contains(c.cfg.AllowFrom, id) {
		return true
	}
	ok, err := c.st.Paired(ctx, c.cfg.Name, user)
	return err == nil && ok
}

// notice queues a plain message to a chat.
func (c *Channel) notice(ctx context.Context, chat, text string) {
	if _, err := c.enqueue(ctx, chat, kindNotice, "", body{Action: ActionMessage, Text: text, Plain: true}, true); err != nil {
		c.log.Error("queueing a message", "chat", chat, "err", err)
	}
}

// enqueue stores a message for the sender and wakes it.
func (c *Channel) enqueue(ctx context.Context, chat, kind, ref string, b body, final bool) (int64, error) {
	c.log.Debug("queueing a message", "chat", chat, "kind", kind)
	id, err := c.st.EnqueueOutbox(context.WithoutCancel(ctx), store.OutboxItem{Channel: c.cfg.Name, Chat: chat, Kind: kind, Ref: ref,
		Body: encodeBody(b), Final: final})
	if err == nil {
		wake(c.wakeOutbox)
	}
	return id, err
}

// update changes what a queued message shows and wakes the sender.
func (c *Channel) update(ctx context.Context, id int64, b body, final bool) error {
	err := c.st.UpdateOutbox(context.WithoutCancel(ctx), id, encodeBody(b), final)
	if err == nil {
		wake(c.wakeOutbox)
	}
	return err
}

func encodeBody(b body) []byte {
	out, _ := json.Marshal(b)
	return out
}

func decodeBody(raw []byte) (body, error) {
	var b body
	err := json.Unmarshal(raw, &b)
	return b, err
}

// turn runs a message as a turn of its chat's conversation, the answer
// streamed into the chat; it reports whether the update is done (false
// when buddy is stopping: the next start replays it).
func (c *Channel) turn(ctx context.Context, it store.InboxItem, e Event) bool {
	page, ag := c.h.pageAndAgent()
	if ag == nil {
		c.notice(ctx, e.Chat, "buddy has no language model configured ([provider] in buddy.toml), so it cannot answer messages yet.")
		c.mark(ctx, it.Seq, store.InboxDone, "no provider", false)
		return true
	}
	select {
	case c.h.turns <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-c.h.turns }()
	conv, err := c.conversation(ctx, e)
	if err != nil {
		c.log.Error("finding the chat's conversation", "chat", e.Chat, "err", err)
		return false
	}
	if !c.mark(ctx, it.Seq, store.InboxRunning, conv, false) {
		return false
	}
	text := e.Text
	if e.Type == EventEditedMessage {
		text = "(edited) " + text
	}
	s := newStream(ctx, c, e.Chat, isGroup(e))
	c.typing(ctx, e.Chat)
	run := func(tctx context.Context, pageSink agent.Sink) agent.Outcome {
		tctx, stop := context.WithCancel(tctx)
		defer stop()
		defer context.AfterFunc(ctx, stop)()
		var sink agent.Sink = s
		if pageSink != nil {
			sink = tee{pageSink, s}
		}
		return ag.Turn(tctx, conv, text, sink)
	}
	var out agent.Outcome
	for attempt := 1; ; attempt++ {
		if page == nil {
			out = run(ctx, nil)
			break
		}
		out, err = page.RunTurn(conv, text, run)
		if err == nil {
			break
		}
		if !errors.Is(err, errs.ErrInvalidInput) || ctx.Err() != nil {
			// buddy serve is stopping: the update stays for the next start.
			c.log.Warn("the turn could not start", "chat", e.Chat, "err", err)
			return false
		}
		// A turn of the page runs in this conversation: wait for it.
		if sleep(ctx, c.clk, time.Second) != nil {
			return false
		}
	}
	if ctx.Err() != nil && out.Reason == agent.ReasonCanceled {
		s.finish(agent.Outcome{Reason: agent.ReasonCanceled}, true)
		return false // replayed at the next start
	}
	s.finish(out, false)
	c.mark(ctx, it.Seq, store.InboxDone, out.Reason, false)
	return true
}

// conversation is the chat's conversation, created at its first message
// (or when the one it had was ended in the page).
func (c *Channel) conversation(ctx context.Context, e Event) (string, error) {
	id, ok, err := c.st.ChannelChat(ctx, c.cfg.Name, e.Chat)
	if err != nil {
		return "", err
	}
	if ok {
		conv, err := c.st.GetConversation(ctx, id)
		if err == nil && !conv.Ended() {
			return id, nil
		}
		if err != nil && !errors.Is(err, errs.ErrNotFound) {
			return "", err
		}
	}
	id = newID("c_")
	who := e.SenderName
	if isGroup(e) && e.ChatTitle != "" {
		who = e.ChatTitle
	}
	if who == "" {
		who = "chat " + e.Chat
	}
	title := fmt.Sprintf("%s: %s", displayName(c.cfg.Name), who)
	now := c.clk.Now().UTC()
	if err := c.st.CreateConversation(ctx, store.Conversation{ID: id, Title: title, CreatedAt: now, UpdatedAt: now}); err != nil {
		return "", err
	}
	if err := c.st.SetChannelChat(ctx, c.cfg.Name, e.Chat, id); err != nil {
		return "", err
	}
	c.log.Info("conversation created for a chat", "chat", e.Chat, "conversation", id)
	return id, nil
}

// displayName is a channel's name as a title shows it.
func displayName(name string) string {
	if name == "" {
		return name
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// typing tells the chat buddy is at work (best effort, not stored).
func (c *Channel) typing(ctx context.Context, chat string) {
	c.h.wg.Go(func() {
		tctx, cancel := withDeadline(ctx, c.clk, 10*time.Second, errors.New("typing: no answer in 10s"))
		defer cancel()
		if err := c.limiter.wait(tctx); err != nil {
			return
		}
		if _, err := c.exchange(tctx, renderInput{body: body{Action: ActionTyping}, Chat: chat}); err != nil {
			c.log.Debug("typing", "err", c.scrub(err.Error()))
		}
	})
}

// newID is prefix and 16 random hex digits (the server's ids).
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
