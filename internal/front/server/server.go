// Package server is `buddy serve`: an HTTP and WebSocket front end that lets
// a client invoke skills, watch their calls and answer approval requests
// (docs/PROTOCOL.md). It holds only the approval gate, never the registry: the
// gate is the one path to a skill (a test on the import graph keeps it so).
//
//	srv, err := server.New(server.Options{
//		Token: token, Store: st,
//		NewGate: func(a approval.Asker) server.Gate { return approval.New(reg, approval.Options{Asker: a}) },
//	})
//	httpSrv := &http.Server{Handler: srv.Handler()}
//	go httpSrv.Serve(ln)
//	...
//	srv.Close(ctx) // cancel calls, expire pending approvals, close connections
//
// Access control: every /api/ route and the WebSocket upgrade need the token
// (Authorization: Bearer, or the session cookie set by POST /api/session); a
// request whose Host is not a loopback or configured name, or whose Origin is
// another site's, or whose Host or Origin does not parse strictly
// (headers.go), is refused with 403 before anything else.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buddy-run/buddy/internal/base/hostport"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/store"
)

// Gate is what the server needs of the approval gate: the gated catalog, and
// a way to forget a conversation's "once" approvals when it ends.
type Gate interface {
	catalog.Skills
	EndConversation(id string)
	// Prepare prepares a call without asking or running it (the invoke
	// frame's check; what runs is what was checked).
	Prepare(ctx context.Context, c catalog.Call) (*approval.Gated, error)
}

// Prepared is a call the gate prepared (*approval.Gated).
type Prepared interface {
	Run(ctx context.Context) (*catalog.Result, error)
	Release()
}

// Store is what the server keeps in the database.
type Store interface {
	CreateConversation(ctx context.Context, c store.Conversation) error
	GetConversation(ctx context.Context, id string) (store.Conversation, error)
	ListConversations(ctx context.Context, includeEnded bool) ([]store.Conversation, error)
	EndConversation(ctx context.Context, id string, at time.Time) error
	AppendMessage(ctx context.Context, m store.Message) (int64, error)
	Messages(ctx context.Context, conversation string) ([]store.Message, error)
	InsertApproval(ctx context.Context, a store.Approval) error
	DecideApproval(ctx context.Context, id, status, decidedBy string, at time.Time) error
	GetApproval(ctx context.Context, id string) (store.Approval, error)
	Approvals(ctx context.Context, conversation string) ([]store.Approval, error)
	Audit(ctx context.Context, conversation string, limit int) ([]store.AuditEntry, error)
	ConversationUsage(ctx context.Context, conversation string) (store.UsageTotals, error)
}

// Options configure a Server. Zero values take the defaults below.
type Options struct {
	// Token is the bearer token every /api/ request and the upgrade need.
	Token string
	Store Store
	// NewGate builds the gate the server invokes skills through, asking the
	// user with the server's own Asker (approval requests over the wire).
	NewGate func(asker approval.Asker) Gate
	// NewAgent, if set, builds the agent loop that answers send frames and
	// POST /api/chat/{id}/messages, over the same gate. Without it the
	// server still runs skills directly and send answers that no provider
	// is configured.
	NewAgent func(gate Gate) Agent
	// NewMCP, if set, builds the Streamable HTTP handler served at /mcp
	// (behind the same checks as /api/), given the page as an asker.
	NewMCP func(host MCPHost) http.Handler
	// NewChannels, if set, builds the handler of the chat channels' routes
	// (GET /api/channels, the pairing routes), given the page as a place to
	// ask and the turns it shows (internal/front/channels).
	NewChannels func(host ChannelHost) http.Handler
	// Schedule, if set, serves /api/schedule (the scheduler); Spending,
	// if set, adds today's spend against [budget] to its listing.
	Schedule Schedule
	Spending Spending
	// AllowedOrigins are browser origins (http:// or https://, a host, an
	// optional port) allowed besides the server's own. New fails on one
	// that is not such an origin.
	AllowedOrigins []string
	// AllowedHosts are Host names or IP addresses (no port) served besides
	// loopback ones. New fails on one that is not a valid host name or
	// address, rather than serve a list that can never match.
	AllowedHosts []string
	// MaxMessageBytes caps one WebSocket message from a client.
	MaxMessageBytes int64
	// WriteTimeout bounds one write to a client.
	WriteTimeout time.Duration
	// PingInterval is how often the server pings; a client that sends
	// nothing (not even a pong) for twice as long is disconnected.
	PingInterval time.Duration
	// MaxConnections caps concurrent WebSocket connections.
	MaxConnections int
	// SendQueue is how many frames may wait for a slow client before it is
	// disconnected.
	SendQueue int
	// MaxCallsPerConnection caps a connection's calls in flight.
	MaxCallsPerConnection int
	Logger                *slog.Logger
	// Redact, when set, replaces the secrets buddy knows (package secrets)
	// with "[secret:NAME]" in every frame and API answer, and in what a
	// user sends before the model or the store sees it. It must return its
	// argument when there is nothing to replace.
	Redact func([]byte) []byte
}

// Defaults.
const (
	DefaultMaxMessageBytes       = 1 << 20
	DefaultWriteTimeout          = 10 * time.Second
	DefaultPingInterval          = 30 * time.Second
	DefaultMaxConnections        = 2048
	DefaultSendQueue             = 256
	DefaultMaxCallsPerConnection = 64
)

func (o *Options) defaults() {
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.SendQueue <= 0 {
		o.SendQueue = DefaultSendQueue
	}
	if o.MaxCallsPerConnection <= 0 {
		o.MaxCallsPerConnection = DefaultMaxCallsPerConnection
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server serves the API and the WebSocket.
type Server struct {
	opts    Options
	gate    Gate
	starts  *starts // how many calls may be starting at once (starts.go)
	agent   Agent   // nil: no provider
	log     *slog.Logger
	session string // the session cookie's value
	mux     *http.ServeMux

	ctx    context.Context // ends every call and question when the server closes
	cancel context.CancelFunc
	calls  sync.WaitGroup

	mu       sync.Mutex
	convs    map[string]*conv     // conversations with subscribers, calls or questions
	pending  map[string]*question // approval questions by id, until decided and stored
	clients  map[*client]struct{}
	closed   bool
	nclients atomic.Int64

	upgrader websocket.Upgrader

	allowedHosts   []hostport.Authority // Options.AllowedHosts, parsed
	allowedOrigins []hostport.Origin    // Options.AllowedOrigins, parsed
}

// New returns a server; it listens nowhere until its Handler is served.
func New(opts Options) (*Server, error) {
	if opts.Token == "" || opts.Store == nil || opts.NewGate == nil {
		return nil, errs.New(errs.ErrInternal, "server needs a token, a store and a gate")
	}
	opts.defaults()
	var allowedHosts []hostport.Authority
	for _, h := range opts.AllowedHosts {
		a, err := hostport.ParseAllowedHost(h)
		if err != nil {
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("allowed host %q: %v", h, err))
		}
		allowedHosts = append(allowedHosts, a)
	}
	var allowedOrigins []hostport.Origin
	for _, o := range opts.AllowedOrigins {
		a, err := hostport.ParseOrigin(o)
		if err != nil {
			return nil, errs.New(errs.ErrConfig, fmt.Sprintf("allowed origin %q: %v", o, err))
		}
		allowedOrigins = append(allowedOrigins, a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts: opts, log: opts.Logger, session: sessionValue(opts.Token),
		ctx: ctx, cancel: cancel,
		convs: map[string]*conv{}, pending: map[string]*question{}, clients: map[*client]struct{}{},
		starts: newStarts(0, startLease), allowedHosts: allowedHosts, allowedOrigins: allowedOrigins,
	}
	s.gate = opts.NewGate(approval.AskerFunc(s.ask))
	if opts.NewAgent != nil {
		if a := opts.NewAgent(s.gate); a != nil && !isNilAgent(a) {
			s.agent = a
		}
	}
	s.upgrader = websocket.Upgrader{
		// Buffer sizes 0: the connection reads and writes through the 4 KiB
		// buffers net/http already gave the request, which the handler's
		// goroutine keeps alive anyway, instead of two more of its own
		// (8 KiB less per connected session).
		ReadBufferSize:  0,
		WriteBufferSize: 0,
		// Origin was checked before the upgrade (api: every request that
		// asks to upgrade, in any spelling), with the same rule as every
		// state-changing request. Checked again here, where gorilla decides
		// to upgrade, so that the decision and the check never part.
		CheckOrigin: s.originAllowed,
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			kind := errs.KindInvalidInput
			if status == http.StatusForbidden {
				kind = errs.KindForbidden
			}
			writeError(w, status, kind, "websocket upgrade: "+reason.Error())
		},
	}
	s.routes()
	return s, nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", s.healthz)
	s.webRoutes(m) // the page: GET /, /app.js, /markdown.js, /app.css, the icons (web.go)
	m.HandleFunc("POST /api/session", s.api(s.createSession))
	m.HandleFunc("GET /api/ws", s.api(s.serveWS))
	m.HandleFunc("GET /api/skills", s.api(s.listSkills))
	m.HandleFunc("GET /api/conversations", s.api(s.listConversations))
	m.HandleFunc("GET /api/conversations/{id}", s.api(s.getConversation))
	m.HandleFunc("GET /api/audit", s.api(s.listAudit))
	m.HandleFunc("DELETE /api/conversations/{id}", s.api(s.deleteConversation))
	m.HandleFunc("POST /api/chat/{conversation_id}/approve", s.api(s.approveHTTP))
	m.HandleFunc("POST /api/chat/{conversation_id}/messages", s.api(s.postMessage))
	m.HandleFunc("POST /api/conversations", s.api(s.createConversation))
	m.HandleFunc("GET /api/schedule", s.api(s.listSchedule))
	m.HandleFunc("POST /api/schedule", s.api(s.addSchedule))
	m.HandleFunc("DELETE /api/schedule/{id}", s.api(s.removeSchedule))
	s.mcpRoutes(m)     // /mcp (mcp.go)
	s.channelRoutes(m) // /api/channels, /api/pairing (channels.go)
	m.HandleFunc("/api/", s.api(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errs.KindNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	}))
	s.mux = m
}

// serveHTTP applies the checks every request gets: Host (DNS rebinding),
// then the security headers.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if err := s.checkHost(r); err != nil {
		s.log.Warn("refused request", "reason", "host", "host", clip(r.Host, 100), "target", clip(r.RequestURI, 100), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, errs.KindForbidden, "host not allowed: "+err.Error())
		return
	}
	s.mux.ServeHTTP(w, r)
}

// api wraps an /api/ handler: Origin for state-changing requests and the
// upgrade (403), then the token (401).
func (s *Server) api(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if stateChanging(r) {
			if err := s.checkOrigin(r); err != nil {
				s.log.Warn("refused request", "reason", "origin", "origin", clip(strings.Join(r.Header.Values("Origin"), ", "), 100), "remote", r.RemoteAddr)
				writeError(w, http.StatusForbidden, errs.KindForbidden, "origin not allowed: "+err.Error())
				return
			}
		}
		if !s.authenticated(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="buddy"`)
			writeError(w, http.StatusUnauthorized, errs.KindForbidden, "missing or wrong token: send Authorization: Bearer <token> (buddy token prints it)")
			return
		}
		if s.opts.Redact != nil && r.URL.Path != "/api/ws" && r.URL.Path != "/mcp" {
			w = redactWriter{w, s.opts.Redact}
		}
		h(w, r)
	}
}

// redactWriter redacts every Write of an API answer (writeJSON writes a
// whole answer at once).
type redactWriter struct {
	http.ResponseWriter
	redact func([]byte) []byte
}

func (w redactWriter) Write(p []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(w.redact(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redact applies Options.Redact to b.
func (s *Server) redact(b []byte) []byte {
	if s.opts.Redact == nil {
		return b
	}
	return s.opts.Redact(b)
}

// redactText applies Options.Redact to a text.
func (s *Server) redactText(t string) string {
	if s.opts.Redact == nil {
		return t
	}
	return string(s.opts.Redact([]byte(t)))
}

// redactFrame takes the secrets out of a frame; a frame that would no
// longer be JSON (a secret matched across its syntax) is replaced by an
// error frame.
func (s *Server) redactFrame(frame []byte) []byte {
	out := s.redact(frame)
	if len(out) == len(frame) && string(out) == string(frame) {
		return frame
	}
	if !json.Valid(out) {
		return encode(errorFrame{Type: "error", Kind: string(errs.KindInternal), Detail: "a frame was withheld: it held a secret"})
	}
	return out
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "protocol": ProtocolVersion})
}

// createSession trades the bearer token for the session cookie a browser
// page uses (the page never keeps the token).
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: s.session, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.WriteHeader(http.StatusNoContent)
}

// Close ends the server's work: calls in flight are canceled, questions
// waiting for an answer expire, WebSocket connections close. The HTTP
// listener is the caller's to shut down.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	clients := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.calls.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("waiting for calls to end: %w", ctx.Err())
	}
	// Each connection sends what is queued, then closes; one that cannot
	// within the write timeout (or ctx) is closed regardless.
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.shutdown(ctx) })
	}
	wg.Wait()
	return err
}

// NewCallID names a tool call: "call_" and 16 random hex digits.
func NewCallID() string { return newID("call_") }

// newID returns prefix + 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

// writeError writes {"error":{"kind","detail"}}.
func writeError(w http.ResponseWriter, status int, kind errs.Kind, detail string) {
	writeJSON(w, status, map[string]errorBody{"error": {Kind: string(kind), Detail: detail}})
}

// writeErr writes err with the status of its kind.
func writeErr(w http.ResponseWriter, err error) {
	k := errs.KindOf(err)
	writeError(w, statusOf(k), k, err.Error())
}

func statusOf(k errs.Kind) int {
	switch k {
	case errs.KindInvalidInput, errs.KindTooLarge:
		return http.StatusBadRequest
	case errs.KindNotFound:
		return http.StatusNotFound
	case errs.KindForbidden, errs.KindDenied:
		return http.StatusForbidden
	case errs.KindUnavailable, errs.KindConfig:
		return http.StatusServiceUnavailable
	case errs.KindTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

// isNilAgent catches a typed nil returned as an Agent.
func isNilAgent(a Agent) bool {
	p, ok := a.(*agent.Agent)
	return ok && p == nil
}
