package install

import (
	"context"

	"github.com/buddy-run/buddy/internal/store"
)

// auditor is the part of the store that keeps the audit log; a Store that
// has it gets a row per install, upgrade and removal.
type auditor interface {
	AppendAudit(ctx context.Context, e store.AuditEntry) (int64, error)
}

// audit records an install or a removal. The change is already made when it
// runs: a failure to record it cannot undo it, so it is not returned (the
// chain of the rows that are written stays verifiable).
func (in *Installer) audit(ctx context.Context, kind, outcome string, row store.InstalledSkill) {
	a, ok := in.Store.(auditor)
	if !ok {
		return
	}
	_, _ = a.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{
		Kind: kind, Skill: row.Name, Version: row.Version, ModuleSHA256: row.SHA256, Outcome: outcome,
		Paths: []string{row.WasmPath},
	})
}
