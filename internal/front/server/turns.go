package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// Agent runs a conversation turn (internal/agent).
type Agent interface {
	Turn(ctx context.Context, conversation, text string, sink agent.Sink) agent.Outcome
}

// turnKey is the key of a conversation's running turn among its calls.
const turnKey = "turn"

type deltaFrame struct {
	Type           string `json:"type"` // "delta"
	ConversationID string `json:"conversation_id"`
	Text           string `json:"text"`
}

type messageFrame struct {
	Type           string `json:"type"` // "message"
	ConversationID string `json:"conversation_id"`
	Role           string `json:"role"`
	Text           string `json:"text"`
}

type doneFrame struct {
	Type           string          `json:"type"` // "done"
	ConversationID string          `json:"conversation_id"`
	Reason         string          `json:"reason"` // final | max_iterations | canceled | error
	Usage          agent.TurnUsage `json:"usage"`
}

// leftOutFrame says what a turn's request left out to fit the model's
// window (agent.NoticeLeftOut).
type leftOutFrame struct {
	Type           string   `json:"type"` // "left_out"
	ConversationID string   `json:"conversation_id"`
	Text           string   `json:"text"`
	LeftOut        []string `json:"left_out"`
	WindowTokens   int      `json:"window_tokens"`
}

// compactionFrame says earlier messages were summarised (or left out) to
// fit the model's window (agent.NoticeCompaction).
type compactionFrame struct {
	Type           string `json:"type"` // "compaction"
	ConversationID string `json:"conversation_id"`
	Text           string `json:"text"`
	Method         string `json:"method"` // summary | dropped
	Messages       int    `json:"messages"`
	CoversFrom     int64  `json:"covers_from"`
	CoversTo       int64  `json:"covers_to"`
	SummaryID      int64  `json:"summary_id"`
	TokensBefore   int    `json:"tokens_before"`
	TokensAfter    int    `json:"tokens_after"`
	WindowTokens   int    `json:"window_tokens"`
}

// sink broadcasts what a turn produces to the conversation's subscribers.
type sink struct {
	s    *Server
	conv string
}

// Notice implements agent.Noticer: a left_out or compaction frame.
func (k sink) Notice(n agent.Notice) {
	switch n.Kind {
	case agent.NoticeLeftOut:
		k.s.broadcast(k.conv, encode(leftOutFrame{Type: "left_out", ConversationID: k.conv, Text: n.Text, LeftOut: n.LeftOut, WindowTokens: n.WindowTokens}))
	case agent.NoticeCompaction:
		c := n.Compaction
		k.s.broadcast(k.conv, encode(compactionFrame{Type: "compaction", ConversationID: k.conv, Text: n.Text, Method: c.Method,
			Messages: c.Messages, CoversFrom: c.CoversFrom, CoversTo: c.CoversTo, SummaryID: c.SummaryID,
			TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, WindowTokens: n.WindowTokens}))
	}
}

func (k sink) Delta(text string) {
	k.s.broadcast(k.conv, encode(deltaFrame{Type: "delta", ConversationID: k.conv, Text: text}))
}

func (k sink) Message(role, text string) {
	k.s.broadcast(k.conv, encode(messageFrame{Type: "message", ConversationID: k.conv, Role: role, Text: text}))
}

func (k sink) ToolCall(call catalog.Call) {
	k.s.broadcast(k.conv, encode(toolCallFrame{
		Type: "tool_call", ConversationID: k.conv, CallID: call.ID, Skill: call.Skill, Arguments: call.Arguments,
	}))
}

func (k sink) ToolResult(call catalog.Call, res *catalog.Result, err error, took time.Duration) {
	f := toolResultFrame{Type: "tool_result", ConversationID: k.conv, CallID: call.ID, Skill: call.Skill}
	if err != nil {
		f.Error = &errorBody{Kind: string(errs.KindOf(err)), Detail: err.Error()}
		f.DurationMS = ms(took)
	} else {
		f.OK, f.Result, f.Fuel, f.DurationMS = true, resultJSON(res.Output), res.Fuel, ms(res.Duration)
	}
	k.s.log.Info("invocation", "conversation", k.conv, "call", call.ID, "skill", call.Skill,
		"arguments_sha256", logHash(call), "ok", f.OK, "kind", kindOf(f.Error), "duration_ms", f.DurationMS)
	k.s.broadcast(k.conv, encode(f))
}

// startTurn registers a turn in a conversation; only one runs at a time.
func (s *Server) startTurn(convID string) (context.Context, func(), error) {
	if s.agent == nil {
		return nil, nil, agent.ErrNoProvider
	}
	return s.registerTurn(convID)
}

// registerTurn registers a turn of any agent (the server's, a chat
// channel's) in a conversation.
func (s *Server) registerTurn(convID string) (context.Context, func(), error) {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		return nil, nil, errs.New(errs.ErrUnavailable, "the server is shutting down")
	}
	c := s.liveConv(convID)
	if _, busy := c.running[turnKey]; busy {
		cancel()
		return nil, nil, errs.New(errs.ErrInvalidInput, "a turn is already running in this conversation: wait for its done frame, or cancel it")
	}
	c.running[turnKey] = cancel
	s.calls.Add(1)
	var once sync.Once
	end := func() {
		once.Do(func() {
			cancel()
			s.mu.Lock()
			delete(c.running, turnKey)
			s.dropIdle(c)
			s.mu.Unlock()
			s.calls.Done()
		})
	}
	return ctx, end, nil
}

// runTurn runs a turn and ends it with a done frame (an error frame first
// when it failed). end unregisters the turn before done is sent: a client
// that sends its next message as soon as it reads done must not be told a
// turn is still running.
func (s *Server) runTurn(ctx context.Context, end func(), convID, text string) agent.Outcome {
	out := s.agent.Turn(ctx, convID, text, sink{s: s, conv: convID})
	end()
	s.endTurn(convID, out)
	return out
}

// endTurn sends a turn's last frames: error (when it failed), then done.
func (s *Server) endTurn(convID string, out agent.Outcome) {
	if out.Reason == agent.ReasonError && out.Err != nil {
		kind := errs.KindOf(out.Err)
		s.log.Warn("turn failed", "conversation", convID, "kind", kind, "err", out.Err)
		s.broadcast(convID, encode(errorFrame{Type: "error", Kind: string(kind), Detail: out.Err.Error(), ConversationID: convID}))
	}
	s.broadcast(convID, encode(doneFrame{Type: "done", ConversationID: convID, Reason: out.Reason, Usage: out.Usage}))
}

// send handles a send frame: the turn runs in the background; its frames go
// to every subscriber.
func (cl *client) sendTurn(f *inFrame) {
	s := cl.s
	if s.agent == nil {
		cl.sendError(errs.KindConfig, agent.ErrNoProvider.Error(), deref(f.ConversationID))
		return
	}
	// What the user typed reaches neither the model nor the store with a
	// secret in it.
	text := s.redactText(*f.Text)
	f.Text = &text
	var convID string
	if f.ConversationID != nil {
		convID = *f.ConversationID
		if _, err := s.conversation(cl.ctx, convID); err != nil {
			cl.sendError(errs.KindOf(err), err.Error(), convID)
			return
		}
	} else {
		id, err := s.newConversation(cl.ctx, *f.Text)
		if err != nil {
			cl.sendError(errs.KindOf(err), err.Error(), "")
			return
		}
		convID = id
		cl.send(encode(conversationFrame{Type: "conversation", ConversationID: id}))
	}
	if open, isNew := s.subscribeNew(cl, convID); isNew {
		for _, q := range open {
			cl.send(q)
		}
	}
	ctx, end, err := s.startTurn(convID)
	if err != nil {
		cl.sendError(errs.KindOf(err), err.Error(), convID)
		return
	}
	go func() {
		defer end()
		s.runTurn(ctx, end, convID, text)
	}()
}

// createConversation is POST /api/conversations: a new, empty conversation.
func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Title string `json:"title"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(w, r, &body); err != nil {
			writeError(w, http.StatusBadRequest, errs.KindInvalidInput, err.Error())
			return
		}
	}
	id, err := s.newConversation(r.Context(), body.Title)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"conversation_id": id})
}

// postMessage is POST /api/chat/{conversation_id}/messages with {"text"}:
// the turn runs while the request waits, its frames go to subscribers as
// usual, and the answer is the turn's final text, its tool calls and reason.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text *string `json:"text"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, errs.KindInvalidInput, err.Error())
		return
	}
	if body.Text == nil || *body.Text == "" {
		writeError(w, http.StatusBadRequest, errs.KindInvalidInput, `body must be {"text": "..."}`)
		return
	}
	convID := r.PathValue("conversation_id")
	if _, err := s.conversation(r.Context(), convID); err != nil {
		writeErr(w, err)
		return
	}
	ctx, end, err := s.startTurn(convID)
	if err != nil {
		status := statusOf(errs.KindOf(err))
		if errors.Is(err, errs.ErrInvalidInput) {
			status = http.StatusConflict
		}
		writeError(w, status, errs.KindOf(err), err.Error())
		return
	}
	defer end()
	// The client going away cancels the turn, like a cancel frame.
	stop := context.AfterFunc(r.Context(), end)
	defer stop()
	// A turn run for an HTTP client is the conversation's until it ends.
	out := s.runTurn(ctx, end, convID, s.redactText(*body.Text))
	calls := out.ToolCalls
	if calls == nil {
		calls = []agent.ToolOutcome{}
	}
	resp := map[string]any{"conversation_id": convID, "text": out.Text, "reason": out.Reason, "tool_calls": calls, "usage": out.Usage}
	if out.Err != nil {
		resp["error"] = errorBody{Kind: string(errs.KindOf(out.Err)), Detail: out.Err.Error()}
	}
	writeJSON(w, http.StatusOK, resp)
}
