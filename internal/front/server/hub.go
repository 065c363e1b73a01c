package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/later"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/store"
)

// conv is the live state of a conversation: who watches it, its calls in
// flight and its open approval questions. It exists while any of them does.
type conv struct {
	id      string
	subs    map[*client]struct{}
	running map[string]context.CancelFunc // call id → cancel
	asking  map[string]*question          // approval id → question
}

// question is an approval request waiting for its first answer.
type question struct {
	id     string
	conv   string
	hash   string
	frame  []byte    // the approval_request frame, re-sent to new subscribers
	answer chan bool // buffered: the first answer
	// status is "" while open, then approved | denied | expired | canceled;
	// the question stays findable until its decision is stored.
	status string
	// answered is when the first answer reached the server (set with
	// status, before the answer is sent on answer).
	answered time.Time
	// held marks a scheduled turn's held call: its request goes to every
	// connection, and any of them may answer it.
	held bool
	// watchers are told the decision (ChannelHost.WatchResolved; guarded
	// by the server's mu).
	watchers []func(approved bool, reason string)
}

// answeredKey carries to runCall when the user's answer to the call's
// question reached the server, for the invocation's log line.
type answeredKey struct{}

// withAnswered returns a context under which ask records when the answer
// it acts on arrived, and where it records it.
func withAnswered(ctx context.Context) (context.Context, *time.Time) {
	t := new(time.Time)
	return context.WithValue(ctx, answeredKey{}, t), t
}

// liveConv returns the live state of a conversation, creating it. Call with
// s.mu held.
func (s *Server) liveConv(id string) *conv {
	c := s.convs[id]
	if c == nil {
		c = &conv{id: id, subs: map[*client]struct{}{}, running: map[string]context.CancelFunc{}, asking: map[string]*question{}}
		s.convs[id] = c
	}
	return c
}

// dropIdle forgets a conversation's live state once nothing uses it. Call
// with s.mu held.
func (s *Server) dropIdle(c *conv) {
	if len(c.subs) == 0 && len(c.running) == 0 && len(c.asking) == 0 {
		delete(s.convs, c.id)
	}
}

// broadcast sends a frame to every subscriber of a conversation.
func (s *Server) broadcast(convID string, frame []byte) {
	s.mu.Lock()
	c := s.convs[convID]
	var subs []*client
	if c != nil {
		subs = make([]*client, 0, len(c.subs))
		for cl := range c.subs {
			subs = append(subs, cl)
		}
	}
	s.mu.Unlock()
	for _, cl := range subs {
		cl.send(frame)
	}
}

// subscribe adds cl to a conversation's watchers and returns the approval
// requests still open in it, for cl to answer.
func (s *Server) subscribe(cl *client, convID string) [][]byte {
	open, _ := s.subscribeNew(cl, convID)
	return open
}

// subscribeNew is subscribe that also says whether cl was not yet watching.
func (s *Server) subscribeNew(cl *client, convID string) ([][]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.liveConv(convID)
	_, had := c.subs[cl]
	c.subs[cl] = struct{}{}
	cl.subs[convID] = struct{}{}
	var open [][]byte
	for _, q := range c.asking {
		if q.status == "" {
			open = append(open, q.frame)
		}
	}
	return open, !had
}

// unsubscribeAll removes a closed client from every conversation.
func (s *Server) unsubscribeAll(cl *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range cl.subs {
		if c := s.convs[id]; c != nil {
			delete(c.subs, cl)
			s.dropIdle(c)
		}
	}
	delete(s.clients, cl)
}

// conversation returns a stored conversation that has not ended.
func (s *Server) conversation(ctx context.Context, id string) (store.Conversation, error) {
	c, err := s.opts.Store.GetConversation(ctx, id)
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return c, errs.New(errs.ErrNotFound, fmt.Sprintf("no conversation %q", clip(id, 80)))
		}
		return c, err
	}
	if !c.EndedAt.IsZero() {
		return c, errs.New(errs.ErrNotFound, fmt.Sprintf("conversation %q has ended", clip(id, 80)))
	}
	return c, nil
}

// newConversation creates and stores a conversation.
func (s *Server) newConversation(ctx context.Context, title string) (string, error) {
	id := newID("c_")
	if err := s.storeConversation(ctx, id, title); err != nil {
		return "", err
	}
	return id, nil
}

// storeConversation stores a new conversation with an id made by newID.
func (s *Server) storeConversation(ctx context.Context, id, title string) error {
	now := time.Now().UTC()
	if err := s.opts.Store.CreateConversation(ctx, store.Conversation{ID: id, Title: clip(title, 200), CreatedAt: now, UpdatedAt: now}); err != nil {
		return fmt.Errorf("creating a conversation: %w", err)
	}
	s.log.Info("conversation created", "conversation", id)
	return nil
}

// startCall announces a call that the gate has prepared (x) with a
// tool_call frame and runs it in the background: the gate may ask, the
// skill runs, the tool_result goes to every subscriber.
func (s *Server) startCall(call catalog.Call, x Prepared, done func()) error {
	callCtx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		x.Release()
		done()
		return errs.New(errs.ErrUnavailable, "the server is shutting down")
	}
	c := s.liveConv(call.Conversation)
	c.running[call.ID] = cancel
	s.calls.Add(1)
	s.mu.Unlock()

	s.broadcast(call.Conversation, encode(toolCallFrame{
		Type: "tool_call", ConversationID: call.Conversation, CallID: call.ID, Skill: call.Skill, Arguments: call.Arguments,
	}))
	go func() {
		defer s.calls.Done()
		defer done()
		defer func() {
			cancel()
			s.mu.Lock()
			delete(c.running, call.ID)
			s.dropIdle(c)
			s.mu.Unlock()
		}()
		// Few calls start at once (starts.go); the call's writes after
		// its question (the decision when it expires, the audit rows,
		// the tool result) finish work someone waits on: they go ahead
		// of the writes that start new calls.
		release := s.starts.acquire(callCtx)
		defer release()
		ctx, answered := withAnswered(withStarted(store.Finishing(callCtx), release))
		// The skill's sandbox is closed and the next one prepared here,
		// once the result is out, rather than by a goroutine the call
		// would wake on its way back (runtime.AfterUse).
		ctx, cleanUp := later.With(ctx)
		defer cleanUp()
		s.runCall(ctx, call, x, answered)
	}()
	return nil
}

// runCall invokes through the gate and reports the result. answered is
// when the user's answer to its question arrived, if it was asked (ask sets
// it): the invocation's log line gives the time from then to its result.
func (s *Server) runCall(ctx context.Context, call catalog.Call, x Prepared, answered *time.Time) {
	start := time.Now()
	// The gate's audit rows and the tool message below are queued back to
	// back and usually share one commit; the result goes out once both are
	// durable.
	ctx, stored := store.Deferred(ctx)
	res, err := x.Run(ctx)
	f := toolResultFrame{Type: "tool_result", ConversationID: call.Conversation, CallID: call.ID, Skill: call.Skill}
	msg := store.Message{Conversation: call.Conversation, Role: "tool", CallID: call.ID, Skill: call.Skill, Arguments: call.Arguments}
	if err != nil {
		kind := errs.KindOf(err)
		f.Error = &errorBody{Kind: string(kind), Detail: err.Error()}
		f.DurationMS = ms(time.Since(start))
		msg.ErrorKind, msg.ErrorDetail = string(kind), err.Error()
	} else {
		f.OK, f.Result, f.Fuel, f.DurationMS = true, resultJSON(res.Output), res.Fuel, ms(res.Duration)
		msg.OK, msg.Fuel, msg.DurationUS = true, res.Fuel, res.Duration.Microseconds()
		if json.Valid(res.Output) {
			msg.Result = json.RawMessage(res.Output)
		} else {
			msg.ResultText = string(res.Output)
		}
	}
	_, perr := s.opts.Store.AppendMessage(context.WithoutCancel(ctx), msg)
	if perr = errors.Join(perr, stored()); perr != nil {
		s.log.Error("storing a call's audit rows and tool result", "conversation", call.Conversation, "call", call.ID, "err", perr)
	}
	attrs := []any{"conversation", call.Conversation, "call", call.ID, "skill", call.Skill,
		"arguments_sha256", logHash(call), "ok", f.OK, "kind", kindOf(f.Error),
		"duration_ms", f.DurationMS}
	if !answered.IsZero() {
		// The server's share of the approval round trip: the answer's
		// arrival to the result's going out, the decision's and the
		// record's commits included, the skill's own run too.
		attrs = append(attrs, "answer_to_result_ms", ms(time.Since(*answered)))
	}
	s.log.Info("invocation", attrs...)
	s.broadcast(call.Conversation, encode(f))
}

// logHash is the start of a call's arguments hash, for log lines: the one
// the front end computed for the gate, if any.
func logHash(call catalog.Call) string {
	h := call.ArgumentsHash
	if h == "" {
		h = catalog.ArgumentsHash(call.Arguments)
	}
	return h[:16]
}

func kindOf(e *errorBody) string {
	if e == nil {
		return ""
	}
	return e.Kind
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cancelConversation cancels a conversation's calls in flight (their open
// questions end as canceled).
func (s *Server) cancelConversation(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.convs[id]
	if c == nil {
		return 0
	}
	for _, cancel := range c.running {
		cancel()
	}
	return len(c.running)
}

// finisher is implemented by a store that group-commits (store.Store): told
// that a finishing write will follow, it keeps its transactions short.
type finisher interface {
	ExpectFinishing() (done func())
}

// ask is the server's approval.Asker: it stores the question, sends an
// approval_request to the conversation's subscribers and waits for the first
// answer, the gate's deadline, or the call's cancellation.
func (s *Server) ask(ctx context.Context, req approval.Request) (bool, error) {
	return s.askQuestion(ctx, req, false, nil, nil)
}

// askWatched is ask that also tells asked when the question is out (its
// id, the hash of its arguments, its expiry) and resolved when it is
// decided (reason user, timeout or canceled): a chat channel posts the
// question and closes it (ChannelHost).
func (s *Server) askWatched(ctx context.Context, req approval.Request,
	asked func(id, hash string, expires time.Time), resolved func(approved bool, reason string)) (bool, error) {
	return s.askQuestion(ctx, req, false, asked, resolved)
}

// AskHeld asks about a call a scheduled turn held (scheduler.Page): the
// approval_request goes to every connection, now and to those that connect
// while it is open, and any of them may answer it; asked is called with
// the approval's id once it is stored and sent.
func (s *Server) AskHeld(ctx context.Context, req approval.Request, asked func(id string)) (bool, error) {
	var watch func(id, hash string, expires time.Time)
	if asked != nil {
		watch = func(id, _ string, _ time.Time) { asked(id) }
	}
	return s.askQuestion(ctx, req, true, watch, nil)
}

// askQuestion is ask, for a held question when held, watched by asked and
// resolved when they are set.
func (s *Server) askQuestion(ctx context.Context, req approval.Request, held bool,
	asked func(id, hash string, expires time.Time), resolved func(approved bool, reason string)) (bool, error) {
	if req.Conversation == "" {
		return false, errors.New("no conversation to ask in")
	}
	q := &question{id: newID("ap_"), conv: req.Conversation, hash: req.ArgumentsHash, answer: make(chan bool, 1), held: held}
	if q.hash == "" { // a request not made by the gate
		q.hash = catalog.ArgumentsHash(req.Arguments)
	}
	now := time.Now().UTC()
	expires := req.Expires.UTC()
	args := req.Arguments
	if !json.Valid(args) {
		args, _ = json.Marshal(string(args))
	}
	q.frame = encode(approvalRequestFrame{
		Type: "approval_request", ID: q.id, ConversationID: req.Conversation, CallID: req.CallID, SkillName: req.Skill,
		Arguments: args, PermissionLevel: string(req.Permission), ExpiresAt: expires, ArgumentsHash: q.hash, Touches: req.Touches,
		Targets: targetsOrEmpty(req.Targets), Reason: req.Reason, Version: req.Version, ModuleSHA256: req.ModuleSHA256,
		Credentials: credentialsOrEmpty(req.Grant.Credentials),
	})
	// Asking starts work: the request is an ordinary write (store.Finishing).
	err := s.opts.Store.InsertApproval(store.Ordinary(ctx), store.Approval{
		ID: q.id, Conversation: req.Conversation, CallID: req.CallID, Skill: req.Skill, Permission: string(req.Permission),
		Arguments: args, ArgumentsHash: q.hash, Status: "pending", RequestedAt: now, ExpiresAt: expires,
		ModuleSHA256: req.ModuleSHA256,
	})
	if err != nil {
		return false, fmt.Errorf("storing the approval request: %w", err)
	}
	// The decision is a finishing write to come: until it is stored, the
	// store keeps its transactions of new work short.
	if f, ok := s.opts.Store.(finisher); ok {
		defer f.ExpectFinishing()()
	}
	s.mu.Lock()
	c := s.liveConv(req.Conversation)
	c.asking[q.id] = q
	s.pending[q.id] = q
	s.mu.Unlock()
	s.log.Info("approval requested", "conversation", req.Conversation, "approval", q.id, "skill", req.Skill, "call", req.CallID, "held", held)
	if held {
		s.broadcastAll(q.frame)
	} else {
		s.broadcast(req.Conversation, q.frame)
	}
	if asked != nil {
		asked(q.id, q.hash, expires)
	}
	started(ctx) // the question is out: the next call may start

	var approved bool
	var reason, status string
	select {
	case approved = <-q.answer:
		reason = "user"
		noteAnswered(ctx, q)
	case <-ctx.Done():
		// Nobody answered in time, or the call was canceled; an answer may
		// have won the race meanwhile.
		s.mu.Lock()
		if q.status == "" {
			status, reason = "expired", "timeout"
			switch {
			case s.closed:
				// The server is stopping: the question expires unanswered.
				status, reason = "expired", "canceled"
			case errors.Is(ctx.Err(), context.Canceled):
				status, reason = "canceled", "canceled"
			}
			q.status = status
		}
		s.mu.Unlock()
		if status == "" {
			approved, reason = <-q.answer, "user"
			noteAnswered(ctx, q)
		} else if err := s.opts.Store.DecideApproval(context.WithoutCancel(ctx), q.id, status, reason, time.Now().UTC()); err != nil {
			s.log.Error("storing an approval decision", "approval", q.id, "err", err)
		}
	}
	s.mu.Lock()
	delete(c.asking, q.id)
	delete(s.pending, q.id)
	s.dropIdle(c)
	watchers := q.watchers
	s.mu.Unlock()
	s.log.Info("approval resolved", "conversation", req.Conversation, "approval", q.id, "approved", approved, "reason", reason)
	frame := encode(approvalResolvedFrame{
		Type: "approval_resolved", ID: q.id, ConversationID: req.Conversation, Approved: approved, Reason: reason,
	})
	if held {
		s.broadcastAll(frame)
	} else {
		s.broadcast(req.Conversation, frame)
	}
	if resolved != nil {
		resolved(approved, reason)
	}
	for _, w := range watchers {
		w(approved, reason)
	}
	if reason != "user" {
		return false, ctx.Err()
	}
	return approved, nil
}

// noteAnswered tells ctx's call when the answer to q arrived (after the
// answer was received from q.answer: answer set the time before sending it).
func noteAnswered(ctx context.Context, q *question) {
	if t, ok := ctx.Value(answeredKey{}).(*time.Time); ok {
		*t = q.answered
	}
}

// answer records the first answer to an approval question. convID, when not
// "", must be the question's conversation. hash, when not "", must be the
// hash of the arguments the question showed. The status tells HTTP clients
// what happened: 200, 404 (unknown here), 409 (already answered), 410
// (expired), 400 (other arguments).
func (s *Server) answer(ctx context.Context, convID, id string, approved bool, hash string) (int, error) {
	s.mu.Lock()
	q := s.pending[id]
	if q != nil && convID != "" && q.conv != convID {
		q = nil
	}
	if q != nil {
		switch q.status {
		case "":
			if hash != "" && hash != q.hash {
				s.mu.Unlock()
				return http.StatusBadRequest, errs.New(errs.ErrInvalidInput, "arguments_hash does not match the arguments of approval "+id)
			}
			q.status = "denied"
			if approved {
				q.status = "approved"
			}
			q.answered = time.Now()
		case "approved", "denied":
			s.mu.Unlock()
			return http.StatusConflict, errs.New(errs.ErrInvalidInput, "approval "+id+" was already answered")
		default:
			s.mu.Unlock()
			return http.StatusGone, errs.New(errs.ErrTimeout, "approval "+id+" expired")
		}
	}
	s.mu.Unlock()
	if q == nil {
		return s.answerStored(ctx, convID, id)
	}
	// The first answer is stored before it is acted on: nothing runs on an
	// approval that a crash could forget.
	if err := s.opts.Store.DecideApproval(store.Finishing(ctx), id, q.status, "user", q.answered.UTC()); err != nil {
		s.log.Error("storing an approval decision", "approval", id, "err", err)
	}
	q.answer <- approved
	return http.StatusOK, nil
}

// questionConversation is the conversation of an approval question, open
// here or stored.
func (s *Server) questionConversation(ctx context.Context, id string) (string, bool) {
	s.mu.Lock()
	q := s.pending[id]
	s.mu.Unlock()
	if q != nil {
		return q.conv, true
	}
	a, err := s.opts.Store.GetApproval(ctx, id)
	if err != nil {
		return "", false
	}
	return a.Conversation, true
}

// watching reports whether cl is subscribed to a conversation.
func (s *Server) watching(cl *client, convID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := cl.subs[convID]
	return ok
}

// heldQuestion reports whether id is an open held question (any connection
// may answer it).
func (s *Server) heldQuestion(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.pending[id]
	return q != nil && q.held
}

// broadcastAll sends a frame to every connection.
func (s *Server) broadcastAll(frame []byte) {
	s.mu.Lock()
	all := make([]*client, 0, len(s.clients))
	for cl := range s.clients {
		all = append(all, cl)
	}
	s.mu.Unlock()
	for _, cl := range all {
		cl.send(frame)
	}
}

// openHeld are the frames of the held questions still open (sent to a new
// connection).
func (s *Server) openHeld() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, q := range s.pending {
		if q.held && q.status == "" {
			out = append(out, q.frame)
		}
	}
	return out
}

// Answer answers an approval question as the page does (a paired channel
// answering a held call: scheduler.HeldAsker). hash, when not "", must be
// the arguments_hash the question showed. The error is the protocol's
// (not_found, invalid_input for an answer given twice or for other
// arguments, timeout for an expired question).
func (s *Server) Answer(ctx context.Context, approvalID string, approved bool, hash string) error {
	_, err := s.answer(ctx, "", approvalID, approved, hash)
	return err
}

// answerStored explains an answer to a question that is not open here.
func (s *Server) answerStored(ctx context.Context, convID, id string) (int, error) {
	a, err := s.opts.Store.GetApproval(ctx, id)
	if err != nil || (convID != "" && a.Conversation != convID) {
		if err != nil && !errors.Is(err, errs.ErrNotFound) {
			return http.StatusInternalServerError, err
		}
		return http.StatusNotFound, errs.New(errs.ErrNotFound, fmt.Sprintf("no approval %q in this conversation", clip(id, 80)))
	}
	switch a.Status {
	case "approved", "denied":
		return http.StatusConflict, errs.New(errs.ErrInvalidInput, "approval "+id+" was already answered")
	}
	return http.StatusGone, errs.New(errs.ErrTimeout, "approval "+id+" expired")
}

// credentialsOrEmpty is a list for JSON, never null.
func credentialsOrEmpty(cs []catalog.CredentialGrant) []catalog.CredentialGrant {
	if cs == nil {
		return []catalog.CredentialGrant{}
	}
	return cs
}
