package server

import (
	"context"
	"net/http"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// MCPHost is what the server lends its /mcp endpoint (Options.NewMCP): the
// buddy page as an asker, and conversations to ask in. The MCP server itself
// lives in internal/mcpserver; this package stays free of the MCP SDK.
type MCPHost interface {
	// Ask asks on the buddy page: an approval_request frame to the
	// watchers of req.Conversation (a stored conversation), answered by
	// an approve frame or POST /api/chat/{id}/approve, like any other.
	Ask(ctx context.Context, req approval.Request) (bool, error)
	// NewConversation stores a conversation for an MCP session's calls.
	NewConversation(ctx context.Context, title string) (string, error)
}

type mcpHost struct{ s *Server }

func (h mcpHost) Ask(ctx context.Context, req approval.Request) (bool, error) {
	return h.s.ask(ctx, req)
}

func (h mcpHost) NewConversation(ctx context.Context, title string) (string, error) {
	return h.s.newConversation(ctx, title)
}

// mcpRoutes mounts the MCP endpoint, when there is one, behind the same
// Host, Origin and token checks as every /api/ route; the Origin is checked
// on every method, the server's event stream (GET) included, as the MCP
// specification asks of Streamable HTTP servers.
func (s *Server) mcpRoutes(m *http.ServeMux) {
	if s.opts.NewMCP == nil {
		return
	}
	h := s.opts.NewMCP(mcpHost{s})
	if h == nil {
		return
	}
	m.HandleFunc("/mcp", s.api(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkOrigin(r); err != nil {
			s.log.Warn("refused request", "reason", "origin", "path", "/mcp", "remote", r.RemoteAddr)
			writeError(w, http.StatusForbidden, errs.KindForbidden, "origin not allowed: "+err.Error())
			return
		}
		h.ServeHTTP(w, r)
	}))
}
