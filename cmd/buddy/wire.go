package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/audit"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

// auditRecorder writes the audit rows of every call through a gate
// (internal/audit).
func auditRecorder(st *store.Store, log *slog.Logger) func(ctx context.Context, o approval.Outcome) {
	return audit.Recorder(st, log)
}

// newLogger is the structured log of long-running commands, on stderr.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// allowAfterPrivateRead is the gate option of [approval] after_private_read.
func allowAfterPrivateRead(cfg *config.Config) bool {
	return cfg.Approval.AfterPrivateRead == config.AfterPrivateReadAllow
}
