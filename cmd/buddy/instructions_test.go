package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills/skillmd"
)

// TestGuardThroughTheGate: the guard judges what the registry's resolver
// says a call touches (the canonical path inside the grant, a symlink
// followed), through the real gate and the built-in read_file.
func TestGuardThroughTheGate(t *testing.T) {
	ctx := t.Context()
	root, dir := t.TempDir(), t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"secret.txt": "s", "a.md": "# a"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A link named like a Markdown file, to the secret: the resolved target
	// is the secret, and the declaration does not cover it.
	if err := os.Symlink("secret.txt", filepath.Join(dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, "buddy.toml")
	toml := fmt.Sprintf("[storage]\ndata_dir = %q\n\n[skills.read_file]\nallowed_directories = [%q]\n", filepath.Join(root, "data"), dir)
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, isTerminal: func() bool { return false }}
	e, err := a.openEnv(ctx, cfg, true, true)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	s, err := skillmd.Parse("/skills/s/SKILL.md", []byte("---\nname: md-only\npermissions:\n  fs:\n    read: [\""+osfile.RealPath(dir)+"/**/*.md\"]\n---\nx\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.Dir = "/skills/s"
	if err := e.md.sessions.Activate(ctx, "c", s); err != nil {
		t.Fatal(err)
	}
	gate := e.newGate(a.terminalAsker(true), nil)
	for _, tt := range []struct {
		path string
		ok   bool
	}{
		{"a.md", true},
		{"secret.txt", false},
		{"link.md", false},
	} {
		_, err := gate.Invoke(ctx, catalog.Call{Conversation: "c", Skill: "read_file", Arguments: json.RawMessage(`{"path":"` + tt.path + `"}`)})
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, errs.ErrForbidden) {
			t.Errorf("read_file %s: %v (want ok=%v)", tt.path, err, tt.ok)
		}
	}
	// Another conversation has no declarations: unrestricted.
	if _, err := gate.Invoke(ctx, catalog.Call{Conversation: "other", Skill: "read_file", Arguments: json.RawMessage(`{"path":"secret.txt"}`)}); err != nil {
		t.Errorf("read_file in a conversation with no active skill: %v", err)
	}
}
