package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/audit"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

// newGate is the one place a process builds its approval gate: buddy serve
// (the WebSocket server, its agent and /mcp), buddy mcp and buddy skill run
// all get theirs here, each with only its own Asker (TestOneGate keeps it
// so). The gate wraps every skill the env serves (the WebAssembly registry,
// live across reloads, and the SKILL.md skills), reads [approval] as it is
// now at every call, records every call in the audit log, checks SKILL.md
// bindings, and keeps what it learns of a conversation in the store.
func (e *env) newGate(asker approval.Asker, log *slog.Logger) *approval.Gate {
	var cat catalog.Catalog = e.live
	cat = e.md.union(cat)
	opts := approval.Options{
		Asker:    asker,
		Settings: func() approval.Settings { return approvalSettings(e.config()) },
		Record:   audit.Recorder(e.st, log),
		Guard:    e.md.guard(),
	}
	if e.st != nil {
		opts.State = e.st
	}
	return approval.New(cat, opts)
}

// approvalSettings are the gate's settings of a configuration: [approval]
// timeout and after_private_read.
func approvalSettings(cfg *config.Config) approval.Settings {
	return approval.Settings{
		Timeout:               cfg.Approval.Timeout,
		AllowAfterPrivateRead: cfg.Approval.AfterPrivateRead == config.AfterPrivateReadAllow,
	}
}

// newLogger is the structured log of long-running commands, on stderr.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// compactionRecorder writes an audit row for every compaction of a
// conversation (agent.Options.OnCompaction): what was summarised or left
// out, and why.
func compactionRecorder(st *store.Store, log *slog.Logger) func(ctx context.Context, c agent.Compaction) {
	return func(ctx context.Context, c agent.Compaction) {
		detail := fmt.Sprintf("%d messages (ids %d to %d) %s to fit the model's window: about %d tokens before, %d after",
			c.Messages, c.CoversFrom, c.CoversTo, map[string]string{agent.MethodSummary: "summarised", agent.MethodDropped: "left out"}[c.Method],
			c.TokensBefore, c.TokensAfter)
		if c.Error != "" {
			detail += "; the summary failed: " + c.Error
		}
		_, err := st.AppendAudit(ctx, store.AuditEntry{Kind: store.AuditCompaction, Conversation: c.Conversation, Outcome: c.Method, Detail: detail})
		if err != nil {
			log.Error("writing the audit log", "kind", store.AuditCompaction, "conversation", c.Conversation, "err", err)
		}
	}
}
