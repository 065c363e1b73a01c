package install_test

import (
	"testing"

	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/internal/store"
)

// TestInstallsAndRemovalsAudited: install, upgrade and remove each append a
// chained audit row naming the skill, its module and what happened.
func TestInstallsAndRemovalsAudited(t *testing.T) {
	e := newEnv(t)
	e.install(t, "echo.wasm", manifest("echo", "1.0.0", "read_only", ""))
	src := e.module(t, "echo.wasm", manifest("echo", "1.1.0", "read_only", ""))
	if _, err := e.inst.Install(t.Context(), install.Request{WasmPath: src, Upgrade: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.inst.Remove(t.Context(), "echo"); err != nil {
		t.Fatal(err)
	}
	rows, err := e.st.Audit(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ kind, version, outcome string }{
		{store.AuditInstall, "1.0.0", "installed"},
		{store.AuditInstall, "1.1.0", "upgraded from 1.0.0"},
		{store.AuditRemove, "1.1.0", "removed"},
	}
	if len(rows) != len(want) {
		t.Fatalf("audit rows = %+v", rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.Kind != w.kind || r.Skill != "echo" || r.Version != w.version || r.Outcome != w.outcome || len(r.Paths) != 1 || r.ModuleSHA256 == "" {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
	if rep, err := e.st.VerifyAudit(t.Context()); err != nil || rep.Problem != nil {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}
