package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/mcpserver"
	"github.com/buddy-run/buddy/internal/front/server"
)

// mcpCommand is `buddy mcp`: buddy's skills served over the Model Context
// Protocol on stdin/stdout, for an MCP client that spawns it. The log goes
// to stderr; stdout carries only the protocol.
func (a *app) mcpCommand(ctx context.Context, args []string) (err error) {
	if len(args) > 0 && args[0] == "forget" {
		return a.mcpForget(ctx, args[1:])
	}
	_, configPath, err := parseCommand("mcp", args, 0, "", nil)
	if err != nil {
		return err
	}
	a.longRunning = true
	e, err := a.openEnv(ctx, configPath, true, true)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	log := newLogger(a.stderr)

	var fallback approval.Asker
	switch e.cfg.MCP.Approval {
	case config.MCPApprovalTerminal:
		fallback = ttyAsker()
	case config.MCPApprovalWeb:
		log.Info(`[mcp] approval = "web" needs buddy serve's /mcp: over stdio, calls the client cannot approve by elicitation are denied`)
	}
	srv, err := newMCPServer(ctx, e, log, fallback, nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	go srv.Watch(ctx)
	log.Info("serving MCP on stdio", "config", e.cfg.Path, "tools", len(srv.Tools()), "approval", e.cfg.MCP.Approval)
	// A line over [server] max_message_bytes, or not JSON-RPC, is answered
	// with a JSON-RPC error and the session reads on (mcpserver.Stdio).
	err = srv.Run(ctx, srv.Stdio(a.stdin, a.stdout))
	if ctx.Err() != nil || err == nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil // the client hung up, or Ctrl-C / SIGTERM
	}
	return fmt.Errorf("serving MCP: %w", err)
}

// newMCPServer builds the MCP server over the same gate as every front end
// (newGate).
func newMCPServer(ctx context.Context, e *env, log *slog.Logger,
	fallback approval.Asker, newConversation func(context.Context, string) (string, error)) (*mcpserver.Server, error) {
	return mcpserver.New(ctx, mcpserver.Options{
		NewGate: func(asker approval.Asker) mcpserver.Gate {
			return e.newGate(asker, log)
		},
		Fallback:        fallback,
		NewConversation: newConversation,
		MaxMessageBytes: e.cfg.Server.MaxMessageBytes,
		Version:         version,
		Logger:          log,
	})
}

// ttyMu keeps two questions from sharing the terminal at once.
var ttyMu sync.Mutex

// ttyAsker asks on the controlling terminal (/dev/tty): stdin and stdout
// belong to the MCP client. With no terminal (a client that spawned buddy
// detached) the call is denied.
func ttyAsker() approval.Asker {
	return approval.AskerFunc(func(ctx context.Context, req approval.Request) (bool, error) {
		ttyMu.Lock()
		defer ttyMu.Unlock()
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			return false, fmt.Errorf("no terminal to ask for approval ([mcp] approval = \"terminal\"): %w", err)
		}
		defer tty.Close()
		if !isTerminal(tty.Fd()) {
			return false, errors.New("/dev/tty is not a terminal")
		}
		fmt.Fprintf(tty, "\nbuddy mcp: %s\nAllow? [y/N] ", approval.Describe(req, approval.DefaultWidth))
		return readYes(ctx, tty, tty, func() { _ = tty.Close() })
	})
}

// newServeMCP is the MCP server of buddy serve's /mcp: [mcp] approval =
// "web" asks on the buddy page (each MCP session gets a stored conversation
// the page can watch), "terminal" on buddy serve's terminal.
func newServeMCP(ctx context.Context, e *env, log *slog.Logger, host server.MCPHost) (*mcpserver.Server, error) {
	var fallback approval.Asker
	var newConv func(context.Context, string) (string, error)
	switch e.cfg.MCP.Approval {
	case config.MCPApprovalTerminal:
		fallback = ttyAsker()
	case config.MCPApprovalWeb:
		fallback = approval.AskerFunc(host.Ask)
		newConv = host.NewConversation
	}
	return newMCPServer(ctx, e, log, fallback, newConv)
}

// mcpForget is `buddy mcp forget`: MCP clients' models keep what they read
// across sessions, so buddy keeps the private reads (taint) and SKILL.md
// bindings of every MCP session under one scope that outlives sessions and
// restarts (mcpserver.Scope); this clears it, once the operator knows no MCP
// client still holds that data (a new chat in the client, say).
func (a *app) mcpForget(ctx context.Context, args []string) (err error) {
	_, configPath, err := parseCommand("mcp forget", args, 0, "", nil)
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	items, err := e.st.ConversationState(ctx, mcpserver.Scope)
	if err != nil {
		return err
	}
	if err := e.st.DeleteConversationState(ctx, mcpserver.Scope); err != nil {
		return err
	}
	reads, bindings := 0, 0
	for _, it := range items {
		switch it.Kind {
		case catalog.StateTaint:
			reads++
		case catalog.StateBinding:
			bindings++
		}
	}
	fmt.Fprintf(a.stdout, "forgot what MCP clients read (%d private reads) and %d SKILL.md bindings: their next network call follows its policy again\n", reads, bindings)
	return nil
}
