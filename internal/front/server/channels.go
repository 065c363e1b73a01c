package server

import (
	"context"
	"net/http"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
)

// ChannelHost is what the server lends the chat channels
// (Options.NewChannels; internal/front/channels, wired by cmd/buddy): the
// page as a second place to answer a chat's approval questions, answers
// given in a chat, and turns the page shows as they run. The channels live
// in their own package; this one stays free of them.
type ChannelHost interface {
	// AskWatched asks on the page like any approval (an approval_request
	// to the conversation's watchers) and tells asked when the question is
	// out and resolved when it is decided (reason user, timeout or
	// canceled), whoever answered.
	AskWatched(ctx context.Context, req approval.Request,
		asked func(id, hash string, expires time.Time), resolved func(approved bool, reason string)) (bool, error)
	// Answer answers an open question as an approve frame does: errors of
	// kind not_found, invalid_input (already answered, other arguments)
	// and timeout (expired).
	Answer(ctx context.Context, conversation, id string, approved bool, hash string) error
	// WatchResolved calls resolved once the open question id is decided,
	// wherever it was asked (a scheduled turn's held call too), with the
	// reason user, timeout or canceled; false when no such question is
	// open.
	WatchResolved(id string, resolved func(approved bool, reason string)) bool
	// RunTurn runs turn as the conversation's one turn: the watchers see a
	// message frame with the user's text (role user), the turn's frames
	// through the sink it is given, then done. It fails at once (kind
	// invalid_input) when a turn already runs there, and (unavailable) when
	// the server is stopping; a cancel frame cancels the turn's context.
	RunTurn(conversation, text string, turn func(ctx context.Context, page agent.Sink) agent.Outcome) (agent.Outcome, error)
}

type channelHost struct{ s *Server }

func (h channelHost) AskWatched(ctx context.Context, req approval.Request,
	asked func(id, hash string, expires time.Time), resolved func(approved bool, reason string)) (bool, error) {
	return h.s.askWatched(ctx, req, asked, resolved)
}

func (h channelHost) Answer(ctx context.Context, conversation, id string, approved bool, hash string) error {
	_, err := h.s.answer(ctx, conversation, id, approved, hash)
	return err
}

func (h channelHost) WatchResolved(id string, resolved func(approved bool, reason string)) bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	q := h.s.pending[id]
	if q == nil {
		return false
	}
	q.watchers = append(q.watchers, resolved)
	return true
}

func (h channelHost) RunTurn(conversation, text string, turn func(ctx context.Context, page agent.Sink) agent.Outcome) (agent.Outcome, error) {
	s := h.s
	ctx, end, err := s.registerTurn(conversation)
	if err != nil {
		return agent.Outcome{}, err
	}
	defer end()
	s.broadcast(conversation, encode(messageFrame{Type: "message", ConversationID: conversation, Role: "user", Text: text}))
	out := turn(ctx, sink{s: s, conv: conversation})
	end()
	s.endTurn(conversation, out)
	return out, nil
}

// channelRoutes mounts the channels' routes behind the /api/ checks:
// GET /api/channels, GET /api/pairing, POST /api/pairing/approve and
// /revoke (docs/PROTOCOL.md). Without channels, GET /api/channels lists
// none and the pairing routes know no code.
func (s *Server) channelRoutes(m *http.ServeMux) {
	var h http.Handler
	if s.opts.NewChannels != nil {
		h = s.opts.NewChannels(channelHost{s})
	}
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/api/channels":
				writeJSON(w, http.StatusOK, map[string]any{"channels": []any{}})
			case "/api/pairing":
				writeJSON(w, http.StatusOK, map[string]any{"pending": []any{}, "paired": []any{}})
			default:
				writeError(w, http.StatusNotFound, "not_found", "no chat channel is configured ([channels.telegram] in buddy.toml)")
			}
		})
	}
	for _, route := range []string{"GET /api/channels", "GET /api/pairing", "POST /api/pairing/approve", "POST /api/pairing/revoke"} {
		m.HandleFunc(route, s.api(h.ServeHTTP))
	}
}
