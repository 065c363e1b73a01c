// Package mcpserver serves buddy's skills over the Model Context Protocol
// (`buddy mcp` on stdio, /mcp on `buddy serve`), on the official Go SDK.
//
// Tools are the ready skills of the gate's catalog; every tools/call goes
// through the approval gate, like a call from the WebSocket server or the
// CLI. The package holds only the gate (a catalog.Catalog), never the
// registry, the runtime or the host functions: a test on the import graph
// keeps it so.
//
//	srv, err := mcpserver.New(ctx, mcpserver.Options{
//		NewGate: func(a approval.Asker) mcpserver.Gate {
//			return approval.New(live, approval.Options{Asker: a, Timeout: time.Minute})
//		},
//		Fallback: terminalAsker, // when the client cannot show a form; nil denies
//	})
//	go srv.Watch(ctx) // tools/list_changed on install and remove
//	err = srv.Run(ctx, srv.Stdio(os.Stdin, os.Stdout))
//
// Approval: the client's elicitation form when it declares the capability
// (accept approves; decline and cancel deny), else Fallback, else a denial
// ("User denied execution of write_file"). A skill's failure, a denial and
// arguments that fail the schema are tool results with isError and the
// error kind in the text, never protocol errors.
package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/textsafe"
	"github.com/buddy-run/buddy/internal/catalog"
)

// Gate is what the MCP server needs of the approval gate: the gated catalog,
// and a way to forget a session's "once" approvals when it ends.
type Gate interface {
	catalog.Skills
	EndConversation(id string)
}

// Options configure a Server.
type Options struct {
	// NewGate builds the gate every tools/call goes through, asking with
	// the server's own Asker (elicitation, then Fallback). Required.
	NewGate func(asker approval.Asker) Gate
	// Fallback asks when the client cannot show an elicitation form
	// ([mcp] approval = "terminal" or "web"); nil denies.
	Fallback approval.Asker
	// NewConversation, if set, stores a conversation for an MCP session at
	// its first call; its calls and approvals belong to it (the buddy page
	// can then watch and answer them). Without it a session's calls use an
	// unstored conversation id of their own.
	NewConversation func(ctx context.Context, title string) (string, error)
	// Poll is how often the catalog is listed to notice skills installed
	// or removed (Watch); default 2s.
	Poll time.Duration
	// MaxMessageBytes caps one message: an HTTP request body on the
	// Streamable HTTP transport (413 beyond it), a line on stdio (Stdio);
	// default 1 MiB.
	MaxMessageBytes int64
	// Version is buddy's version, reported to clients.
	Version string
	Logger  *slog.Logger
}

// Scope is what every MCP session's taint and SKILL.md bindings are kept
// under (catalog.Call.Scope): an MCP client's model keeps what it read
// across sessions, so a reconnect, a new session or a restart of buddy does
// not clear them. "once" approvals stay per session. `buddy mcp forget`
// clears the scope.
const Scope = "mcp"

// Defaults.
const (
	DefaultPoll            = 2 * time.Second
	DefaultMaxMessageBytes = 1 << 20
	// maxDescribe caps the approval form's text.
	maxDescribe = 16 << 10
)

// protocolVersions are the MCP versions served: 2026-07-28 and later forbid
// a server-initiated elicitation request inside a tools/call (SEP-2322),
// which is how the gate asks, so they are not offered yet.
var protocolVersions = func() []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < "2026-07-28" {
			out = append(out, v)
		}
	}
	return out
}()

// Server is buddy's MCP server.
type Server struct {
	opts Options
	gate Gate
	mcp  *mcp.Server
	log  *slog.Logger

	ctx    context.Context // canceled by Close: ends calls in flight
	cancel context.CancelFunc

	mu       sync.Mutex
	tools    map[string]string // tool name → fingerprint of what is registered
	sessions map[*mcp.ServerSession]*session
}

// session is what the server keeps of one MCP session.
type session struct {
	once sync.Once
	conv string
	err  error
}

// New lists the gate's skills and returns a server serving them as tools.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.NewGate == nil {
		return nil, errs.New(errs.ErrInternal, "mcpserver needs a gate")
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{
		opts: opts, log: opts.Logger, ctx: bctx, cancel: cancel,
		tools: map[string]string{}, sessions: map[*mcp.ServerSession]*session{},
	}
	s.gate = opts.NewGate(approval.AskerFunc(s.ask))
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "buddy", Title: "buddy", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: "buddy's skills: WebAssembly plugins whose only I/O is capability-gated host functions. " +
			"Mutating and network skills ask the user for approval before they run.",
		Logger:                    opts.Logger,
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		SupportedProtocolVersions: protocolVersions,
	})
	if err := s.Sync(ctx); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// MCP is the SDK server, to connect a transport to (tests use the in-memory
// one).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one session on t (stdio) until the client disconnects or ctx
// ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	return s.mcp.Run(ctx, t)
}

// HTTPHandler is the Streamable HTTP transport. It does no access control
// of its own: mount it behind the token, Origin and Host checks of
// `buddy serve` (the SDK's own localhost Host check is replaced by them).
func (s *Server) HTTPHandler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Logger:                     s.log,
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        s.opts.MaxMessageBytes,
		SessionTimeout:             time.Hour,
	})
}

// Close cancels the calls in flight and closes every session.
func (s *Server) Close() {
	s.cancel()
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
}

// Watch lists the catalog every Poll and updates the tools (the SDK sends
// notifications/tools/list_changed) until ctx ends.
func (s *Server) Watch(ctx context.Context) {
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
			if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("listing skills for MCP", "err", err)
			}
		}
	}
}

// Sync lists the catalog and registers its ready skills as tools: new and
// changed ones are (re)added, gone and no longer ready ones removed.
func (s *Server) Sync(ctx context.Context) error {
	infos, err := s.gate.List(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, info := range infos {
		if !info.Ready() {
			continue
		}
		tool, err := toolOf(info)
		if err != nil {
			s.log.Warn("skill not served over MCP", "skill", info.Name, "err", err)
			continue
		}
		seen[info.Name] = true
		fp := fingerprint(tool)
		if s.tools[info.Name] == fp {
			continue
		}
		s.tools[info.Name] = fp
		s.mcp.AddTool(tool, s.handler(info.Name))
	}
	var gone []string
	for name := range s.tools {
		if !seen[name] {
			gone = append(gone, name)
			delete(s.tools, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	return nil
}

// Tools returns the names of the tools served, for tests and logs.
func (s *Server) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tools))
	for n := range s.tools {
		out = append(out, n)
	}
	return out
}

// toolOf describes a skill as an MCP tool. Its input schema must be an
// object schema (MCP arguments are a JSON object); a skill that declares
// none takes any object.
func toolOf(info catalog.Info) (*mcp.Tool, error) {
	schema := map[string]any{"type": "object"}
	if info.InputSchema != nil {
		schema = info.InputSchema
		switch t := schema["type"]; t {
		case "object":
		case nil:
			schema = clone(schema)
			schema["type"] = "object"
		default:
			return nil, fmt.Errorf("its input schema has type %v: MCP tool arguments are a JSON object", t)
		}
	}
	yes, no := true, false
	ann := &mcp.ToolAnnotations{Title: info.Name}
	switch info.Permission {
	case catalog.ReadOnly:
		ann.ReadOnlyHint, ann.DestructiveHint, ann.OpenWorldHint = true, &no, &no
	case catalog.Mutating:
		ann.DestructiveHint, ann.OpenWorldHint = &yes, &no
	case catalog.Network:
		// A network skill may send as well as fetch: not known harmless.
		ann.DestructiveHint, ann.OpenWorldHint = &yes, &yes
	default:
		return nil, fmt.Errorf("unknown permission level %q", info.Permission)
	}
	desc := clean(info.Description, 4096)
	if desc == "" {
		desc = info.Name
	}
	desc += fmt.Sprintf(" (buddy skill, %s", info.Permission)
	if info.Policy != catalog.Trust {
		desc += "; asks the user for approval"
	}
	desc += ")"
	return &mcp.Tool{Name: info.Name, Description: desc, InputSchema: schema, Annotations: ann}, nil
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// fingerprint identifies what a tool says, to notice a changed skill.
func fingerprint(t *mcp.Tool) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// clean keeps a manifest's text readable and free of control characters
// (an MCP client may show it on a terminal, or hand it to a model).
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for _, r := range s {
		if b.Len()+utf8.RuneLen(r) > max {
			b.WriteString("…")
			break
		}
		if textsafe.Safe(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte(' ')
		}
	}
	return strings.TrimSpace(b.String())
}

// sessionKey carries the MCP session of a tools/call to the asker.
type sessionKey struct{}

// handler runs one tools/call through the gate.
func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Close ends the calls in flight.
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		unhook := context.AfterFunc(s.ctx, func() { cancel(errors.New("server closing")) })
		defer unhook()

		args := json.RawMessage(req.Params.Arguments)
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		conv, err := s.conversation(ctx, req.Session)
		if err != nil {
			return errorResult(err), nil
		}
		ctx = context.WithValue(ctx, sessionKey{}, req.Session)
		res, err := s.gate.Invoke(ctx, catalog.Call{ID: newID("mcp_"), Conversation: conv, Scope: Scope, Skill: name, Arguments: args})
		if err != nil {
			return errorResult(err), nil
		}
		out := res.Output
		if !utf8.Valid(out) {
			out = []byte(strings.ToValidUTF8(string(out), "\uFFFD"))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}, nil
	}
}

// errorResult is a failed call as a tool result: isError, "<kind>: <detail>"
// as text, and {"error":{"kind","detail"}} as structured content.
func errorResult(err error) *mcp.CallToolResult {
	kind := errs.KindOf(err)
	detail := err.Error()
	if sen := errs.Sentinel(kind); sen != nil {
		detail = strings.TrimPrefix(detail, sen.Error()+": ")
	}
	detail = clean(detail, 4096)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: string(kind) + ": " + detail}},
		StructuredContent: map[string]any{"error": map[string]string{"kind": string(kind), "detail": detail}},
	}
}

// conversation returns the conversation of a session's calls: a stored one
// when NewConversation is set, else an id of the session's own. The gate
// keys "once" approvals by it; it is forgotten when the session ends.
func (s *Server) conversation(ctx context.Context, ss *mcp.ServerSession) (string, error) {
	if ss == nil {
		return "", nil
	}
	s.mu.Lock()
	st := s.sessions[ss]
	if st == nil {
		st = &session{}
		s.sessions[ss] = st
	}
	s.mu.Unlock()
	st.once.Do(func() {
		if s.opts.NewConversation != nil {
			title := "MCP session"
			if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
				title = "MCP: " + clean(p.ClientInfo.Name, 100)
			}
			st.conv, st.err = s.opts.NewConversation(ctx, title)
		} else {
			st.conv = newID("mcp_")
		}
		if st.err != nil {
			s.mu.Lock()
			delete(s.sessions, ss)
			s.mu.Unlock()
			return
		}
		go func() {
			_ = ss.Wait()
			s.gate.EndConversation(st.conv)
			s.mu.Lock()
			delete(s.sessions, ss)
			s.mu.Unlock()
		}()
	})
	return st.conv, st.err
}

// ask is the gate's Asker: the client's elicitation form when it has one,
// else the fallback, else no one (a denial).
func (s *Server) ask(ctx context.Context, req approval.Request) (bool, error) {
	ss, _ := ctx.Value(sessionKey{}).(*mcp.ServerSession)
	if ss != nil && canElicit(ss) {
		return s.elicit(ctx, ss, req)
	}
	if s.opts.Fallback == nil {
		return false, errors.New("the MCP client cannot show an approval form (no elicitation) and [mcp] approval names no other asker")
	}
	return s.opts.Fallback.Ask(ctx, req)
}

// canElicit reports whether the client declared form elicitation.
func canElicit(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	// Neither mode named means form (the SDK's reading of older clients).
	return e.Form != nil || e.URL == nil
}

// elicit shows the approval form: the skill, its permission, the arguments
// (targets first, escaped, folded: approval.Describe) and what it may touch.
// accept approves; decline denies; cancel (dismissed) denies with its cause.
func (s *Server) elicit(ctx context.Context, ss *mcp.ServerSession, req approval.Request) (bool, error) {
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         FormText(req),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	})
	if err != nil {
		return false, fmt.Errorf("asking the MCP client: %w", err)
	}
	switch res.Action {
	case "accept":
		return true, nil
	case "decline":
		return false, nil
	case "cancel":
		return false, errors.New("the approval form was dismissed")
	}
	return false, fmt.Errorf("the MCP client answered %q", clean(res.Action, 40))
}

// FormText is the text of the approval form.
func FormText(req approval.Request) string {
	var b strings.Builder
	b.WriteString("buddy asks for approval.\n\n")
	b.WriteString(approval.Describe(req, approval.DefaultWidth))
	if len(req.Touches) > 0 {
		b.WriteString("\n\nIt may:")
		for _, t := range req.Touches {
			b.WriteString("\n  - ")
			b.WriteString(textsafe.Terminal(t, 1024))
		}
	}
	b.WriteString("\n\nAccept to run it once, decline to refuse.")
	if !req.Expires.IsZero() {
		fmt.Fprintf(&b, " No answer by %s is a refusal.", req.Expires.UTC().Format(time.RFC3339))
	}
	text := b.String()
	if len(text) > maxDescribe {
		text = strings.ToValidUTF8(text[:maxDescribe], "") + "\n… (cut)"
	}
	return text
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
