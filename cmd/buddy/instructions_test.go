package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills/skillmd"
)

// TestGuardAccess: the gate's guard checks the path or URL of the built-ins
// and the whole grant of any other WebAssembly skill against the active
// SKILL.md declarations (seed 001's cases, through buddy's gate wiring).
func TestGuardAccess(t *testing.T) {
	ws, other := t.TempDir(), t.TempDir()
	// The grants the prepared calls carry (catalog.Info.Grant); a SKILL.md
	// skill has a type.
	grants := map[string]catalog.Grant{
		"read_file":  {Read: []string{ws}},
		"write_file": {Write: []string{ws}},
		"notes":      {Read: []string{other}},
		"web":        {Hosts: []catalog.HostGrant{{Host: "example.org", Wildcard: true}}},
		"memo":       {Memory: "memo"},
	}
	types := map[string]string{"doc-guide": catalog.TypeInstruction}
	sess := skillmd.NewSessions(skillmd.Dirs{Work: ws}, nil)
	md := &skillsMD{sessions: sess}
	guard := md.guard()
	ctx := t.Context()
	skill := func(perms string) *skillmd.Skill {
		s, err := skillmd.Parse("/skills/s/SKILL.md", []byte("---\nname: s\n"+perms+"---\nx\n"))
		if err != nil {
			t.Fatal(err)
		}
		s.Dir = "/skills/s"
		return s
	}
	_ = sess.Activate(ctx, "md", skill("permissions:\n  fs:\n    read: [\"**/*.md\"]\n    write: [\"**/*.log\"]\n  network:\n    allow: [\"api.example.com:443\", \"*.example.org\"]\n"))
	_ = sess.Activate(ctx, "free", skill(""))
	tests := []struct {
		conv, skill, args string
		ok                bool
	}{
		{"md", "read_file", `{"path":"secret.txt"}`, false},
		{"md", "read_file", `{"path":"notes/a.md"}`, true},
		{"md", "read_file", `{"path":"../` + filepath.Base(other) + `/x.md"}`, false}, // a relative glob is anchored at $WORK_DIR
		{"md", "write_file", `{"path":"hack.sh","content":"rm -rf /"}`, false},
		{"md", "write_file", `{"path":"run.log","content":"ok"}`, true},
		{"md", "fetch_url", `{"url":"https://evil.com/steal"}`, false},
		{"md", "fetch_url", `{"url":"https://api.example.com/v1"}`, true},
		{"md", "fetch_url", `{"url":"http://api.example.com/v1"}`, false}, // port 80 not declared
		{"md", "notes", `{}`, false},                                      // its grant reads a whole directory
		{"md", "web", `{}`, true},                                         // *.example.org fits
		{"md", "memo", `{}`, true},                                        // memory only
		{"md", "doc-guide", `{}`, true},                                   // a SKILL.md skill
		{"free", "write_file", `{"path":"hack.sh","content":"x"}`, true},  // no declarations: unrestricted
		{"other", "fetch_url", `{"url":"https://evil.com"}`, true},        // nothing loaded there
		{"", "read_file", `{"path":"secret.txt"}`, true},                  // one-shot CLI call
	}
	for _, tt := range tests {
		req := approval.Request{Conversation: tt.conv, Scope: tt.conv, Skill: tt.skill, Type: types[tt.skill],
			Arguments: json.RawMessage(tt.args), Grant: grants[tt.skill], Targets: targetsFor(t, tt.skill, tt.args, ws)}
		err := guard(context.Background(), req)
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, errs.ErrForbidden) {
			t.Errorf("%s %s %s: %v (want ok=%v)", tt.conv, tt.skill, tt.args, err, tt.ok)
		}
	}
	if (*skillsMD)(nil).guard() != nil || (*skillsMD)(nil).union(&catalog.Union{}) == nil {
		t.Error("disabled SKILL.md skills still guard")
	}
}

// targetsFor stands in for the registry's resolver (internal/registry,
// resolve.go): the targets the gate hands the guard for a built-in's call.
func targetsFor(t *testing.T, skill, args, dir string) []catalog.Target {
	t.Helper()
	var a struct{ Path, URL string }
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatal(err)
	}
	switch {
	case skill == "read_file" && a.Path != "":
		return []catalog.Target{{Kind: catalog.TargetFile, Path: filepath.Join(dir, a.Path), Action: "read"}}
	case skill == "write_file" && a.Path != "":
		return []catalog.Target{{Kind: catalog.TargetFile, Path: filepath.Join(dir, a.Path), Action: "create"}}
	case skill == "fetch_url" && a.URL != "":
		u, err := url.Parse(a.URL)
		if err != nil {
			t.Fatal(err)
		}
		port := 443
		if u.Scheme == "http" {
			port = 80
		}
		return []catalog.Target{{Kind: catalog.TargetURL, URL: a.URL, Scheme: u.Scheme, Host: u.Hostname(), Port: port}}
	}
	return nil
}

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
