package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// auditRecorder writes one audit row per call through the gate: the CLI's and
// the server's alike. A failed write is logged; the call's own result stands.
func auditRecorder(st *store.Store, log *slog.Logger) func(ctx context.Context, o approval.Outcome) {
	if st == nil {
		return nil
	}
	return func(ctx context.Context, o approval.Outcome) {
		e := store.AuditEntry{
			Time:          o.Started.UTC(),
			Conversation:  o.Call.Conversation,
			Skill:         o.Call.Skill,
			Version:       o.Info.Version,
			ModuleSHA256:  o.Info.SHA256,
			ArgumentsHash: catalog.ArgumentsHash(o.Call.Arguments),
			Outcome:       "ok",
			Asked:         o.Asked,
			DurationUS:    o.Duration.Microseconds(),
			BytesIn:       int64(len(o.Call.Arguments)),
		}
		if o.Info.Name != "" {
			e.Skill = o.Info.Name
		}
		if o.Err != nil {
			e.Outcome, e.Detail = string(errs.KindOf(o.Err)), o.Err.Error()
		}
		if o.Result != nil {
			e.Fuel, e.BytesOut = o.Result.Fuel, int64(len(o.Result.Output))
			e.Version, e.ModuleSHA256 = o.Result.Version, o.Result.SHA256
		}
		if _, err := st.AppendAudit(ctx, e); err != nil && log != nil {
			log.Error("writing the audit log", "skill", e.Skill, "err", err)
		}
	}
}

// newLogger is the structured log of long-running commands, on stderr.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
