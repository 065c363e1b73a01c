package agent

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// What the model sees of a conversation is built from the store once per
// process and then kept: each turn reads only the rows appended since the
// last one (store.MessagesAfter), so the cost of a turn does not grow with
// the conversation (docs/BENCHMARKS.md, "A turn on a long conversation").
// A summary row (a compaction) replaces the rows it covers: the model sees
// its text in the system prompt, then the rows after it.

// maxCached is how many conversations' histories are kept in memory.
const maxCached = 64

// entry is one message of the history with its store id (0 for a message
// of the running turn, not read back from the store).
type entry struct {
	id  int64
	msg Message
}

// summary is the latest compaction of a conversation.
type summary struct {
	id                   int64
	text                 string
	method               string // "summary" or "dropped"
	coversFrom, coversTo int64
	messages             int // how many messages it stands for (all compactions)
}

// convHistory is what the agent keeps of one conversation between turns.
type convHistory struct {
	mu      sync.Mutex // held by the turn using it
	loaded  bool
	lastID  int64 // the highest store id read
	first   int64 // the id of the conversation's first message
	summary *summary
	entries []entry // the rows after summary.coversTo, as the model sees them
	asked   map[string]bool
	answer  map[string]bool
}

// histories is the agent's cache of conversations, least recently used
// first out.
type histories struct {
	mu    sync.Mutex
	order *list.List // of string, most recent at the front
	byID  map[string]*list.Element
	convs map[string]*convHistory
}

func newHistories() *histories {
	return &histories{order: list.New(), byID: map[string]*list.Element{}, convs: map[string]*convHistory{}}
}

// get returns the conversation's history, creating it (unloaded) if needed.
func (h *histories) get(conversation string) *convHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.byID[conversation]; ok {
		h.order.MoveToFront(e)
		return h.convs[conversation]
	}
	c := &convHistory{asked: map[string]bool{}, answer: map[string]bool{}}
	h.convs[conversation] = c
	h.byID[conversation] = h.order.PushFront(conversation)
	for h.order.Len() > maxCached {
		old := h.order.Back()
		id := old.Value.(string)
		h.order.Remove(old)
		delete(h.byID, id)
		delete(h.convs, id)
	}
	return c
}

// forget drops a conversation (a failed read leaves nothing half-built).
func (h *histories) forget(conversation string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.byID[conversation]; ok {
		h.order.Remove(e)
		delete(h.byID, conversation)
		delete(h.convs, conversation)
	}
}

// summaryFinder is implemented by a History that can find a
// conversation's latest summary without reading every row (the store).
type summaryFinder interface {
	LastSummary(ctx context.Context, conversation string) (store.Message, bool, error)
}

// afterReader is implemented by a History that can read the rows appended
// after an id (the store).
type afterReader interface {
	MessagesAfter(ctx context.Context, conversation string, after int64) ([]store.Message, error)
}

// refresh brings c up to date with the store: on first use, the latest
// summary and the rows after it; then the rows appended since. c.mu is
// held.
func (a *Agent) refresh(ctx context.Context, conversation string, c *convHistory) error {
	var rows []store.Message
	var err error
	ar, incremental := a.opts.History.(afterReader)
	switch {
	case !c.loaded:
		from := int64(0)
		if sf, ok := a.opts.History.(summaryFinder); ok && incremental {
			s, found, err := sf.LastSummary(ctx, conversation)
			if err != nil {
				return fmt.Errorf("loading the conversation: %w", err)
			}
			if found {
				c.setSummary(s)
				from = s.CoversTo
			}
		}
		if incremental {
			rows, err = ar.MessagesAfter(ctx, conversation, from)
		} else {
			rows, err = a.opts.History.Messages(ctx, conversation)
		}
	case incremental:
		rows, err = ar.MessagesAfter(ctx, conversation, c.lastID)
	default:
		// A History that can only read everything: start again (c.mu,
		// held, stays as it is).
		c.lastID, c.first, c.summary, c.entries = 0, 0, nil, nil
		c.asked, c.answer = map[string]bool{}, map[string]bool{}
		rows, err = a.opts.History.Messages(ctx, conversation)
	}
	if err != nil {
		return fmt.Errorf("loading the conversation: %w", err)
	}
	c.loaded = true
	for _, r := range rows {
		if err := a.add(c, r); err != nil {
			return err
		}
	}
	return nil
}

// setSummary makes s the conversation's latest summary.
func (c *convHistory) setSummary(s store.Message) {
	var meta struct {
		Method   string `json:"method"`
		Messages int    `json:"messages"`
	}
	_ = json.Unmarshal(s.Meta, &meta)
	c.summary = &summary{id: s.ID, text: s.Text, method: meta.Method, coversFrom: s.CoversFrom, coversTo: s.CoversTo, messages: meta.Messages}
	if c.first == 0 || s.CoversFrom < c.first {
		c.first = s.CoversFrom
	}
}

// add appends one stored row to the history, as the model sees it.
func (a *Agent) add(c *convHistory, r store.Message) error {
	if r.ID > c.lastID {
		c.lastID = r.ID
	}
	if c.first == 0 && r.Role != store.RoleSummary {
		c.first = r.ID
	}
	switch Role(r.Role) {
	case RoleUser:
		c.entries = append(c.entries, entry{r.ID, Message{Role: RoleUser, Text: r.Text}})
	case RoleAssistant:
		m := Message{Role: RoleAssistant, Text: r.Text}
		if r.ErrorKind != "" {
			m.Text = a.cutAnswer(r.Text, r.ErrorKind, r.ErrorDetail)
		}
		if len(r.ToolCalls) > 0 {
			if err := json.Unmarshal(r.ToolCalls, &m.ToolCalls); err != nil {
				return fmt.Errorf("stored tool calls of the conversation: %w", err)
			}
		}
		for _, tc := range m.ToolCalls {
			c.asked[tc.ID] = true
		}
		c.entries = append(c.entries, entry{r.ID, m})
	case RoleTool:
		if !c.asked[r.CallID] || c.answer[r.CallID] {
			return nil // a client's direct call, or a second result
		}
		c.answer[r.CallID] = true
		m := Message{Role: RoleTool, ToolCallID: r.CallID, ToolName: r.Skill, IsError: !r.OK}
		switch {
		case !r.OK && r.ErrorKind == string(errs.KindDenied):
			m.Content = r.ErrorDetail
		case !r.OK:
			m.Content = r.ErrorDetail
			if !strings.HasPrefix(m.Content, "Error (") {
				m.Content = fmt.Sprintf("Error (%s): %s", r.ErrorKind, r.ErrorDetail)
			}
		case len(r.Result) > 0:
			m.Content = a.capResult(r.Result)
		default:
			m.Content = a.capResult([]byte(r.ResultText))
		}
		c.entries = append(c.entries, entry{r.ID, m})
	case store.RoleSummary:
		c.applySummary(r)
	}
	return nil
}

// applySummary makes s the latest summary and drops the entries it covers.
func (c *convHistory) applySummary(s store.Message) {
	c.setSummary(s)
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.id > s.CoversTo {
			kept = append(kept, e)
		}
	}
	c.entries = kept
}

// view is the history as the model sees it at the start of a turn: the
// entries, with a result filled in for a call left without one (the server
// stopped mid-call), so the history stays valid for every provider.
func (c *convHistory) view() []entry {
	out := make([]entry, 0, len(c.entries)+1)
	answered := map[string]bool{}
	for _, e := range c.entries {
		if e.msg.Role == RoleTool {
			answered[e.msg.ToolCallID] = true
		}
	}
	for i := 0; i < len(c.entries); i++ {
		e := c.entries[i]
		out = append(out, e)
		if e.msg.Role != RoleAssistant || len(e.msg.ToolCalls) == 0 {
			continue
		}
		for i+1 < len(c.entries) && c.entries[i+1].msg.Role == RoleTool {
			i++
			out = append(out, c.entries[i])
		}
		for _, tc := range e.msg.ToolCalls {
			if !answered[tc.ID] {
				answered[tc.ID] = true
				out = append(out, entry{0, Message{Role: RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, IsError: true, Content: "Error (canceled): the call did not finish"}})
			}
		}
	}
	return out
}

// history rebuilds what the model saw, from the store (tests and callers
// that want the model's view without running a turn).
func (a *Agent) history(ctx context.Context, conversation string) ([]Message, error) {
	c := a.hist.get(conversation)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := a.refresh(ctx, conversation, c); err != nil {
		a.hist.forget(conversation)
		return nil, err
	}
	var out []Message
	for _, e := range c.view() {
		out = append(out, e.msg)
	}
	return out, nil
}
