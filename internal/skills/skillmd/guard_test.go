package skillmd

import (
	"encoding/json"
	"errors"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// TestGuardAccess: the gate's guard checks the path or URL of the built-ins
// and the whole grant of any other WebAssembly skill against the active
// SKILL.md declarations (through buddy's gate wiring).
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
	sess := NewSessions(Dirs{Work: ws}, nil)
	ctx := t.Context()
	skill := func(perms string) *Skill {
		s, err := Parse("/skills/s/SKILL.md", []byte("---\nname: s\n"+perms+"---\nx\n"))
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
		err := sess.Guard(ctx, Call{Scope: tt.conv, Skill: tt.skill, Type: types[tt.skill],
			Grant: grants[tt.skill], Targets: targetsFor(t, tt.skill, tt.args, ws)})
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, errs.ErrForbidden) {
			t.Errorf("%s %s %s: %v (want ok=%v)", tt.conv, tt.skill, tt.args, err, tt.ok)
		}
	}
	if err := (*Sessions)(nil).Guard(ctx, Call{Scope: "md", Skill: "read_file"}); err != nil {
		t.Errorf("no sessions (SKILL.md skills off) guard: %v", err)
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
