package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// Compaction: past CompactAt of the budget, the oldest whole turns of a
// conversation are summarised by the model itself (a request of its own,
// without tools) into a summary message stored as its own kind (role
// "summary", with the range of ids it stands for); the newest turns stay
// whole; a tool call is never separated from its result (turns are cut at
// user messages only). Nothing is deleted: the store keeps every message,
// and GET /api/conversations/{id} and the page show them. If the summary
// cannot be made (the request fails, or even the transcript cut to fit does
// not), the oldest turns are dropped instead and the model is told that
// earlier messages were left out. Either way the compaction is recorded
// (Options.OnCompaction: an audit row; a log line) and shown (Notice).

// Methods of a compaction.
const (
	MethodSummary = "summary" // the model summarised the older turns
	MethodDropped = "dropped" // they were left out, with a note
)

// Compaction is one compaction of a conversation, as recorded.
type Compaction struct {
	Conversation string
	Method       string
	// Messages is how many stored messages the summary now stands for,
	// CoversFrom..CoversTo their ids; SummaryID the summary's own.
	Messages             int
	CoversFrom, CoversTo int64
	SummaryID            int64
	// TokensBefore and TokensAfter estimate the history before and after.
	TokensBefore, TokensAfter int
	// Error says why the summary could not be made (MethodDropped).
	Error string
}

// Notice is something the user should know about a turn's request: what
// was left out of it to fit the window, or a compaction.
type Notice struct {
	Kind string // NoticeLeftOut or NoticeCompaction
	Text string // in plain words
	// LeftOut lists what the request left out (NoticeLeftOut).
	LeftOut []string
	// Compaction is set for NoticeCompaction.
	Compaction *Compaction
	// WindowTokens is the model's context window.
	WindowTokens int
}

// Kinds of Notice.
const (
	NoticeLeftOut    = "left_out"
	NoticeCompaction = "compaction"
)

// Noticer is implemented by a Sink that shows notices (the server's: a
// left_out or compaction frame).
type Noticer interface {
	Notice(n Notice)
}

// summarySystem asks the model for a summary.
const summarySystem = `You summarise the earlier part of a conversation between a user and buddy, ` +
	`a personal assistant, so that the conversation can go on without it. Keep what the rest of the ` +
	`conversation may need: the user's goals, requests and preferences, facts learnt, the files, ` +
	`URLs and tools used and what they returned, decisions made, and open questions. Write plain ` +
	`text, in the conversation's language, as short as it can be while keeping those.`

// maxTranscriptEntry is what one message may take in a summary request.
const maxTranscriptEntry = 2048

// compactable is the index up to which view may be compacted, keeping the
// newest turns whole within keep tokens: the first user message from which
// the rest fits (the whole view when even the last turn does not).
func (a *Agent) compactable(view []entry, keep int) int {
	cut := len(view)
	size := 0
	for i := len(view) - 1; i >= 0; i-- {
		size += a.cal.tokens(messageBytes(view[i].msg)) + perMessageTokens
		if size > keep {
			break
		}
		if view[i].msg.Role == RoleUser {
			cut = i
		}
	}
	return cut
}

// compact summarises view[:cut] (with the previous summary) and stores the
// summary; c is updated. wait returns once the turn's pending writes are
// stored (the summary goes after them).
func (a *Agent) compact(ctx context.Context, conversation string, c *convHistory, view []entry, cut int, before int,
	b budget, wait func() error, sink Sink, out *Outcome) error {
	if err := wait(); err != nil {
		return err
	}
	var from, to int64
	n := 0
	for _, e := range view[:cut] {
		if e.id == 0 {
			continue
		}
		if from == 0 || e.id < from {
			from = e.id
		}
		to = max(to, e.id)
		n++
	}
	if to == 0 {
		return nil // nothing stored to compact
	}
	if c.summary != nil {
		from = c.summary.coversFrom
		n += c.summary.messages
	}
	if c.first != 0 && c.first < from {
		from = c.first
	}
	comp := Compaction{Conversation: conversation, Method: MethodSummary, Messages: n, CoversFrom: from, CoversTo: to, TokensBefore: before}
	text, err := a.summarise(ctx, conversation, c.summary, view[:cut], b, out)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		comp.Method, comp.Error = MethodDropped, err.Error()
		text = ""
	}
	row := store.Message{Conversation: conversation, Role: store.RoleSummary, Text: text, CoversFrom: from, CoversTo: to,
		Meta: usageJSON(map[string]any{"method": comp.Method, "messages": n, "tokens_before": before, "error": comp.Error})}
	id, err := a.opts.History.AppendMessage(context.WithoutCancel(ctx), row)
	if err != nil {
		return fmt.Errorf("storing the summary: %w", err)
	}
	row.ID = id
	// Not add: the turn's own rows, stored just before, are read with the
	// summary at the next refresh (lastID stays where it was).
	c.applySummary(row)
	comp.SummaryID = id
	comp.TokensAfter = a.estimate(summaryNote(c.summary), nil, messagesOf(c.view()))
	what := fmt.Sprintf("%d earlier messages were summarised to fit the model's context window (%d tokens); they are all kept", n, b.window)
	if comp.Method == MethodDropped {
		what = fmt.Sprintf("%d earlier messages were left out of what the model sees, to fit its context window (%d tokens), because they could not be summarised (%s); they are all kept", n, b.window, clip(comp.Error, 200))
	}
	a.opts.Logger.Info("conversation compacted", "conversation", conversation, "method", comp.Method, "messages", n,
		"covers_from", from, "covers_to", to, "tokens_before", before, "tokens_after", comp.TokensAfter, "window", b.window)
	if a.opts.OnCompaction != nil {
		a.opts.OnCompaction(context.WithoutCancel(ctx), comp)
	}
	if ns, ok := sink.(Noticer); ok {
		ns.Notice(Notice{Kind: NoticeCompaction, Text: what, Compaction: &comp, WindowTokens: b.window})
	}
	return nil
}

// summarise asks the model to summarise the previous summary and entries.
func (a *Agent) summarise(ctx context.Context, conversation string, prev *summary, entries []entry, b budget, out *Outcome) (string, error) {
	limit := b.share(0.75) // room for the instructions and the answer
	var parts []string
	size := 0
	// Newest first, so that what must be cut is the oldest.
	for i := len(entries) - 1; i >= 0; i-- {
		line := transcriptLine(entries[i].msg)
		t := a.cal.tokens(len(line)) + perMessageTokens
		if size+t > limit {
			parts = append(parts, fmt.Sprintf("[%d earlier messages are not shown here]", i+1))
			break
		}
		size += t
		parts = append(parts, line)
	}
	if prev != nil && prev.text != "" {
		line := "Summary of what came before:\n" + prev.text
		if size+a.cal.tokens(len(line)) <= limit {
			parts = append(parts, line)
		}
	}
	if len(parts) == 0 {
		return "", errors.New("not even one message fits a summary request")
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	req := Request{System: summarySystem, Messages: []Message{{Role: RoleUser,
		Text: "Summarise this conversation so far:\n\n" + strings.Join(parts, "\n\n")}}}
	start := time.Now()
	done, err := a.reserve(ctx, conversation, store.UsageSummary, a.estimate(req.System, nil, req.Messages), b, out)
	if err != nil {
		return "", err
	}
	resp, err := a.opts.Provider.Stream(ctx, req, func(string) {})
	if err != nil {
		done()
		return "", err
	}
	a.account(ctx, conversation, store.UsageSummary, req, resp, b, out)
	done()
	text := strings.TrimSpace(resp.Text)
	if text == "" {
		return "", errs.New(errs.ErrUnavailable, "the model's summary was empty")
	}
	a.opts.Logger.Debug("summary made", "conversation", conversation, "took", time.Since(start))
	return text, nil
}

// transcriptLine is one message in a summary request, cut.
func transcriptLine(m Message) string {
	var b strings.Builder
	switch m.Role {
	case RoleUser:
		b.WriteString("User: " + m.Text)
	case RoleAssistant:
		b.WriteString("Assistant: " + m.Text)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "\n(called %s with %s)", tc.Name, tc.Arguments)
		}
	case RoleTool:
		fmt.Fprintf(&b, "Tool %s returned: %s", m.ToolName, m.Content)
	}
	return cutText(b.String(), maxTranscriptEntry, "this message")
}

// summaryNote is what the system prompt says of the latest compaction.
func summaryNote(s *summary) string {
	switch {
	case s == nil:
		return ""
	case s.method == MethodDropped || s.text == "":
		return fmt.Sprintf("\n\nEarlier messages of this conversation (%d) were left out of what you see, to fit your context window; the user still sees them. Ask the user if you need something from them.", s.messages)
	}
	return fmt.Sprintf("\n\nEarlier in this conversation (%d messages, summarised; the user still sees them all):\n%s", s.messages, s.text)
}

func messagesOf(es []entry) []Message {
	out := make([]Message, len(es))
	for i, e := range es {
		out[i] = e.msg
	}
	return out
}
