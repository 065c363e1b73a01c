package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/mcpserver"
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
	log := e.newLogger(a.stderr)

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
