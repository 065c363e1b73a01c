package channels

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// stream is a turn's sink into a chat: each assistant message is one chat
// message, sent at the first words and then edited at most once per edit
// interval as the answer grows, and split at the platform's limit (a new
// message for what does not fit, at a paragraph, line, sentence or word
// boundary, a code block closed and reopened across the cut). Each state is
// stored in the outbox before it is sent.
type stream struct {
	ctx      context.Context
	c        *Channel
	chat     string
	interval time.Duration
	max      int // units per message, less a margin

	mu        sync.Mutex
	cur       string // the assistant message so far
	partStart int    // where the message's current part starts in cur
	reopen    string // a code fence to reopen at the start of the part
	row       int64  // the part's outbox row, 0 before it is queued
	shown     string // the text last stored for row
	last      time.Time
	said      bool
}

// margin is left under the platform's limit for a closing fence and an
// ellipsis.
const margin = 16

func newStream(ctx context.Context, c *Channel, chat string, group bool) *stream {
	iv := time.Duration(c.info.EditIntervalMS) * time.Millisecond
	if group {
		iv = time.Duration(c.info.GroupEditIntervalMS) * time.Millisecond
	}
	if c.h.opts.EditInterval != 0 {
		iv = c.h.opts.EditInterval
	}
	return &stream{ctx: ctx, c: c, chat: chat, interval: iv, max: c.info.MaxText - margin}
}

var _ agent.Sink = (*stream)(nil)

func (s *stream) Delta(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur += text
	s.flush(false)
}

func (s *stream) Message(role, text string) {
	if role != string(agent.RoleAssistant) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = text
	s.flush(true)
	s.reset()
}

func (s *stream) ToolCall(catalog.Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != "" {
		s.flush(true)
		s.reset()
	}
}

func (s *stream) ToolResult(catalog.Call, *catalog.Result, error, time.Duration) {}

func (s *stream) reset() {
	s.cur, s.partStart, s.reopen, s.row, s.shown = "", 0, "", 0, ""
}

// flush stores what the chat should show: the parts that are full, then
// the rest (at most once per interval unless final).
func (s *stream) flush(final bool) {
	for {
		rest := s.cur[s.partStart:]
		budget := s.max - s.c.units(s.reopen)
		if s.c.units(rest) <= budget {
			break
		}
		cut := splitPoint(rest, budget, s.c.units)
		part := s.reopen + rest[:cut]
		next := ""
		if open, lang := openFence(part); open {
			part += "\n```"
			next = "```" + lang + "\n"
		}
		s.store(part, true)
		s.row, s.shown = 0, ""
		s.partStart += cut
		for s.partStart < len(s.cur) && s.cur[s.partStart] == '\n' {
			s.partStart++
		}
		s.reopen = next
	}
	text := s.reopen + s.cur[s.partStart:]
	if strings.TrimSpace(text) == "" {
		if final && s.row != 0 && s.shown != "" {
			s.store(s.shown, true)
		}
		return
	}
	if !final && s.row != 0 && s.c.clk.Now().Sub(s.last) < s.interval {
		return
	}
	s.store(text, final)
}

// store queues or updates the part's row.
func (s *stream) store(text string, final bool) {
	b := body{Action: ActionMessage, Text: text}
	var err error
	if s.row == 0 {
		s.row, err = s.c.enqueue(s.ctx, s.chat, kindAnswer, "", b, final)
	} else if text != s.shown || final {
		err = s.c.update(s.ctx, s.row, b, final)
	}
	if err != nil {
		s.c.log.Error("storing an answer for the chat", "chat", s.chat, "err", err)
		return
	}
	s.shown, s.last, s.said = text, s.c.clk.Now(), true
}

// finish ends the turn in the chat: a part left open is closed, a failure
// or a stop said. stopping: buddy is stopping (the next start says so).
func (s *stream) finish(out agent.Outcome, stopping bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stopping {
		return
	}
	if s.cur != "" {
		s.flush(true)
		s.reset()
	}
	switch out.Reason {
	case agent.ReasonError:
		msg := "Sorry, that failed."
		if out.Err != nil {
			msg = "Sorry, that failed (" + string(errs.KindOf(out.Err)) + "): " + clip(s.c.scrub(out.Err.Error()), 500)
		}
		s.c.notice(s.ctx, s.chat, msg)
	case agent.ReasonCanceled:
		s.c.notice(s.ctx, s.chat, "Stopped.")
	}
}

// units is a text's length as the platform counts it.
func (c *Channel) units(s string) int {
	switch c.info.TextUnit {
	case "bytes":
		return len(s)
	case "runes":
		return utf8.RuneCountInString(s)
	}
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// splitPoint is where to cut s so that its head fits budget units: at the
// last paragraph break of the head's second half, else its last line
// break, sentence end or space, else at the budget.
func splitPoint(s string, budget int, units func(string) int) int {
	// The longest head that fits, at a character boundary.
	limit, n := 0, 0
	for i, r := range s {
		u := units(string(r))
		if n+u > budget {
			break
		}
		n += u
		limit = i + utf8.RuneLen(r)
	}
	if limit == 0 {
		_, w := utf8.DecodeRuneInString(s)
		return w
	}
	head := s[:limit]
	floor := limit / 2
	for _, sep := range []string{"\n\n", "\n", ". ", "! ", "? ", " "} {
		if i := strings.LastIndex(head, sep); i > floor {
			return i + len(sep)
		}
	}
	return limit
}

// openFence reports whether text ends inside a ``` code block, and the
// block's language.
func openFence(text string) (bool, string) {
	open, lang := false, ""
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "```") {
			continue
		}
		if open {
			open = false
			continue
		}
		open, lang = true, strings.TrimSpace(strings.TrimLeft(t, "`"))
		if strings.ContainsAny(lang, "` ") || len(lang) > 32 {
			lang = ""
		}
	}
	return open, lang
}

// tee is a turn's sinks: the page's and the chat's.
type tee []agent.Sink

func (t tee) Delta(s string) {
	for _, k := range t {
		k.Delta(s)
	}
}

func (t tee) Message(role, text string) {
	for _, k := range t {
		k.Message(role, text)
	}
}

func (t tee) ToolCall(c catalog.Call) {
	for _, k := range t {
		k.ToolCall(c)
	}
}

func (t tee) ToolResult(c catalog.Call, r *catalog.Result, err error, d time.Duration) {
	for _, k := range t {
		k.ToolResult(c, r, err, d)
	}
}

// Notice passes the agent's notices to the sinks that take them (the page).
func (t tee) Notice(n agent.Notice) {
	for _, k := range t {
		if nk, ok := k.(agent.Noticer); ok {
			nk.Notice(n)
		}
	}
}
