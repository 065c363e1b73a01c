package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// client is one WebSocket connection. Its frames go out through a bounded
// queue drained by its own writer: a client that stops reading is
// disconnected when the queue is full, it never blocks the others.
type client struct {
	s      *Server
	ws     *websocket.Conn
	remote string
	out    chan []byte
	done   chan struct{}
	flush  chan struct{} // closed by shutdown: send what is queued, then close
	fonce  sync.Once
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	calls  atomic.Int64 // in flight

	// subs is guarded by s.mu.
	subs map[string]struct{}
}

// serveWS upgrades GET /api/ws.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if n := s.nclients.Add(1); n > int64(s.opts.MaxConnections) {
		s.nclients.Add(-1)
		s.log.Warn("refused connection", "reason", "too many connections", "remote", r.RemoteAddr)
		writeError(w, http.StatusServiceUnavailable, errs.KindUnavailable, "too many connections")
		return
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		s.nclients.Add(-1)
		writeError(w, http.StatusServiceUnavailable, errs.KindUnavailable, "the server is shutting down")
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.nclients.Add(-1)
		return // the upgrader has answered
	}
	ctx, cancel := context.WithCancel(s.ctx)
	cl := &client{
		s: s, ws: ws, remote: r.RemoteAddr, out: make(chan []byte, s.opts.SendQueue), done: make(chan struct{}), flush: make(chan struct{}),
		ctx: ctx, cancel: cancel, subs: map[string]struct{}{},
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.nclients.Add(-1)
		cancel()
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return
	}
	s.clients[cl] = struct{}{}
	s.mu.Unlock()
	s.log.Info("connection opened", "remote", r.RemoteAddr)
	for _, q := range s.openHeld() {
		cl.send(q)
	}
	go cl.writeLoop()
	cl.readLoop()
}

// send queues a frame; a full queue disconnects the client.
func (cl *client) send(frame []byte) {
	frame = cl.s.redactFrame(frame)
	select {
	case <-cl.done:
	case cl.out <- frame:
	default:
		cl.s.log.Warn("disconnecting a slow client", "remote", cl.remote, "queued", len(cl.out))
		cl.abort()
	}
}

// abort drops a client that stopped reading, without waiting: send runs on
// other connections' goroutines and must never block on this one (a close
// frame would wait behind the stuck writer), and the connection is reset so
// that the kernel does not keep its unsent megabytes for a peer that does
// not read them.
func (cl *client) abort() {
	cl.once.Do(func() {
		close(cl.done)
		cl.cancel()
		if tc, ok := cl.ws.NetConn().(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		cl.ws.Close()
	})
}

// sendError sends an error frame.
//
// Error frames answer the client's own frames, on its read goroutine: when
// its queue is full the server waits for room (bounded by the write timeout,
// which closes a connection that stopped reading) rather than dropping the
// client. A client that floods the server with bad frames is slowed down
// (it is not read meanwhile), not disconnected, as long as it reads its
// answers; frames from other goroutines never wait (send).
func (cl *client) sendError(kind errs.Kind, detail, convID string) {
	f := encode(errorFrame{Type: "error", Kind: string(kind), Detail: detail, ConversationID: convID})
	select {
	case cl.out <- f:
	case <-cl.done:
	}
}

// close ends the connection once, telling the peer why.
func (cl *client) close(code int, reason string) {
	cl.once.Do(func() {
		close(cl.done)
		cl.cancel()
		_ = cl.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		cl.ws.Close()
	})
}

// shutdown closes the connection with 1001 once the frames already queued
// are sent (each within the write timeout): a server that stops still
// delivers the approval_resolved and tool_result frames its ending produced.
// When ctx ends first the connection is closed at once. It returns when the
// connection is closed.
func (cl *client) shutdown(ctx context.Context) {
	cl.fonce.Do(func() { close(cl.flush) })
	select {
	case <-cl.done:
	case <-ctx.Done():
		cl.close(websocket.CloseGoingAway, "server shutting down")
	}
}

// writeLoop drains the queue and pings.
func (cl *client) writeLoop() {
	ping := time.NewTicker(cl.s.opts.PingInterval)
	defer ping.Stop()
	write := func(f []byte) bool {
		_ = cl.ws.SetWriteDeadline(time.Now().Add(cl.s.opts.WriteTimeout))
		if err := cl.ws.WriteMessage(websocket.TextMessage, f); err != nil {
			cl.close(websocket.CloseGoingAway, "write failed")
			return false
		}
		return true
	}
	for {
		select {
		case <-cl.done:
			return
		case <-cl.flush:
			// This loop is the queue's only reader: what len counts is there.
			for len(cl.out) > 0 {
				if !write(<-cl.out) {
					return
				}
			}
			cl.close(websocket.CloseGoingAway, "server shutting down")
			return
		case f := <-cl.out:
			if !write(f) {
				return
			}
		case <-ping.C:
			if err := cl.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(cl.s.opts.WriteTimeout)); err != nil {
				cl.close(websocket.CloseGoingAway, "ping failed")
				return
			}
		}
	}
}

// readLoop reads frames until the connection ends. A frame over the size
// cap closes it with 1009; anything else wrong is an error frame.
func (cl *client) readLoop() {
	s := cl.s
	defer func() {
		s.unsubscribeAll(cl)
		s.nclients.Add(-1)
		cl.close(websocket.CloseNormalClosure, "")
		s.log.Info("connection closed", "remote", cl.remote)
	}()
	wait := 2 * s.opts.PingInterval
	cl.ws.SetReadLimit(s.opts.MaxMessageBytes)
	_ = cl.ws.SetReadDeadline(time.Now().Add(wait))
	cl.ws.SetPongHandler(func(string) error { return cl.ws.SetReadDeadline(time.Now().Add(wait)) })
	for {
		typ, data, err := cl.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				cl.close(websocket.CloseMessageTooBig, "message over max_message_bytes")
			}
			return
		}
		_ = cl.ws.SetReadDeadline(time.Now().Add(wait))
		if typ != websocket.TextMessage {
			cl.sendError(errs.KindInvalidInput, "frames are JSON text messages, not binary", "")
			continue
		}
		cl.handle(data)
	}
}

// handle acts on one client frame.
func (cl *client) handle(data []byte) {
	f, err := parseFrame(data)
	if err != nil {
		cl.sendError(errs.KindInvalidInput, err.Error(), "")
		return
	}
	switch f.Type {
	case "invoke":
		cl.invoke(f)
	case "approve":
		// Only a connection watching the question's conversation may
		// answer it (as over HTTP, where the route names the conversation).
		convID, ok := cl.s.questionConversation(cl.ctx, *f.ApprovalID)
		if ok && !cl.s.watching(cl, convID) && !cl.s.heldQuestion(*f.ApprovalID) {
			ok = false
		}
		if !ok {
			cl.sendError(errs.KindNotFound, fmt.Sprintf("no approval %q in a conversation this connection watches (subscribe first)", clip(*f.ApprovalID, 80)), "")
			return
		}
		if _, err := cl.s.answer(cl.ctx, convID, *f.ApprovalID, *f.Approved, deref(f.ArgumentsHash)); err != nil {
			cl.sendError(errs.KindOf(err), err.Error(), convID)
		}
	case "subscribe":
		id := *f.ConversationID
		if _, err := cl.s.conversation(cl.ctx, id); err != nil {
			cl.sendError(errs.KindOf(err), err.Error(), "")
			return
		}
		for _, q := range cl.s.subscribe(cl, id) {
			cl.send(q)
		}
	case "cancel":
		id := *f.ConversationID
		if _, err := cl.s.conversation(cl.ctx, id); err != nil {
			cl.sendError(errs.KindOf(err), err.Error(), "")
			return
		}
		n := cl.s.cancelConversation(id)
		cl.s.log.Info("canceled", "conversation", id, "calls", n)
	case "send":
		cl.sendTurn(f)
	}
}

// invoke starts a call from an invoke frame.
func (cl *client) invoke(f *inFrame) {
	s := cl.s
	if cl.calls.Load() >= int64(s.opts.MaxCallsPerConnection) {
		cl.sendError(errs.KindTooLarge, "too many calls in flight on this connection", deref(f.ConversationID))
		return
	}
	call := catalog.Call{ID: newID("call_"), Skill: *f.Skill, Arguments: json.RawMessage(f.Arguments)}
	fresh := f.ConversationID == nil
	if fresh {
		call.Conversation = newID("c_") // stored once the call can be attempted
	} else {
		call.Conversation = *f.ConversationID
		if _, err := s.conversation(cl.ctx, call.Conversation); err != nil {
			cl.sendError(errs.KindOf(err), err.Error(), call.Conversation)
			return
		}
	}
	// A call that cannot be attempted (unknown skill, arguments that fail
	// its schema) is an error for the sender only: no conversation is
	// created for it and no tool_call announced. The gate prepares the call
	// once: what runs is what was checked here.
	call.ArgumentsHash = catalog.ArgumentsHash(call.Arguments) // once: the gate's and the log line's
	x, err := s.gate.Prepare(cl.ctx, call)
	if err != nil {
		conv := call.Conversation
		if fresh {
			conv = ""
		}
		cl.sendError(errs.KindOf(err), err.Error(), conv)
		return
	}
	if fresh {
		if err := s.storeConversation(cl.ctx, call.Conversation, call.Skill); err != nil {
			x.Release()
			cl.sendError(errs.KindOf(err), err.Error(), "")
			return
		}
		cl.send(encode(conversationFrame{Type: "conversation", ConversationID: call.Conversation}))
	}
	// The sender watches the conversation it invokes in.
	if open, isNew := s.subscribeNew(cl, call.Conversation); isNew {
		for _, q := range open {
			cl.send(q)
		}
	}
	cl.calls.Add(1)
	err = s.startCall(call, x, func() { cl.calls.Add(-1) })
	if err != nil {
		cl.sendError(errs.KindOf(err), err.Error(), call.Conversation)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
