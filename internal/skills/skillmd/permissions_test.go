package skillmd

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Permissions in the frontmatter.
func TestParsePermissions(t *testing.T) {
	raw := `---
name: web-fetch
description: Fetch web content
requires:
  bins: [curl]
permissions:
  fs:
    read: ["$SKILL_DIR/**"]
    write: ["$WORK_DIR/**"]
  network:
    allow: ["*:443", "*:80"]
  env: [LANG]
---
Content here`
	s, err := Parse("web-fetch/SKILL.md", []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Permissions
	if p == nil || len(p.FS.Read) != 1 || len(p.Network.Allow) != 2 || !slices.Equal(p.Env, []string{"LANG"}) {
		t.Fatalf("permissions = %+v", p)
	}
	s, err = Parse("simple/SKILL.md", []byte("---\nname: simple\ndescription: No perms\n---\nBody"))
	if err != nil || s.Permissions != nil {
		t.Errorf("no permissions = %+v, %v", s.Permissions, err)
	}
	// exec is refused at load, naming the line; so is an unknown key.
	for _, tc := range []struct{ doc, want string }{
		{"---\nname: x\npermissions:\n  exec: [curl, jq]\n---\n", "x/SKILL.md:4: permissions: exec is refused: buddy runs no commands"},
		{"---\nname: x\npermissions:\n  fs:\n    raed: [a]\n---\n", "x/SKILL.md:5: permissions: unknown key fs.raed"},
		{"---\nname: x\npermissions:\n  network:\n    allow: [\"http://a.com/x\"]\n---\n", "must be host[:port]"},
		{"---\nname: x\npermissions:\n  fs:\n    read: [\"$HOME/**\"]\n---\n", "unknown variable"},
	} {
		_, err := Parse("x/SKILL.md", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse = %v, want %q", err, tc.want)
		}
	}
}

func mustSkill(t *testing.T, dir, name, perms string) *Skill {
	t.Helper()
	s, err := Parse(filepath.Join(dir, name, "SKILL.md"), []byte("---\nname: "+name+"\ndescription: d\n"+perms+"---\nBody\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.Dir = filepath.Join(dir, name)
	return s
}

// Declared permissions as buddy checks them: a call must fit the union of
// the active skills' declarations.
func TestSessionsCheck(t *testing.T) {
	work, data, skills := t.TempDir(), t.TempDir(), t.TempDir()
	ss := NewSessions(Dirs{Work: work, Data: data}, nil)
	mdOnly := mustSkill(t, skills, "md-only", "permissions:\n  fs:\n    read: [\"**/*.md\"]\n")
	logOnly := mustSkill(t, skills, "log-only", "permissions:\n  fs:\n    write: [\"**/*.log\"]\n")
	apiA := mustSkill(t, skills, "skill-a", "permissions:\n  network:\n    allow: [\"api.a.com:443\"]\n")
	apiB := mustSkill(t, skills, "skill-b", "permissions:\n  network:\n    allow: [\"api.b.com:443\"]\n  fs:\n    read: [\"$SKILL_DIR/**\"]\n  env: [LANG]\n")
	plain := mustSkill(t, skills, "plain", "")
	ctx := t.Context()
	in := func(p string) string { return filepath.Join(work, p) }

	tests := []struct {
		name   string
		active []*Skill
		access Access
		deny   string // "" = allowed; else a word the refusal must hold
	}{
		{"read outside **/*.md denied", []*Skill{mdOnly}, Access{Kind: Read, Target: in("secret.txt")}, "md-only"},
		{"read of a .md allowed", []*Skill{mdOnly}, Access{Kind: Read, Target: in("notes/a.md")}, ""},
		{"write denied when only reads declared", []*Skill{mdOnly}, Access{Kind: Write, Target: in("a.md")}, "write of"},
		{"write of hack.sh outside **/*.log denied", []*Skill{logOnly}, Access{Kind: Write, Target: in("hack.sh")}, "log-only"},
		{"write of a .log allowed", []*Skill{logOnly}, Access{Kind: Write, Target: in("run/app.log")}, ""},
		{"fetch to an undeclared host denied", []*Skill{apiA}, Access{Kind: Network, Target: "evil.com", Port: 443}, "evil.com"},
		{"fetch to the declared host allowed", []*Skill{apiA}, Access{Kind: Network, Target: "api.a.com", Port: 443}, ""},
		{"declared port binds", []*Skill{apiA}, Access{Kind: Network, Target: "api.a.com", Port: 80}, "api.a.com:80"},
		{"unrestricted without declarations", []*Skill{plain}, Access{Kind: Write, Target: "/etc/passwd"}, ""},
		{"nothing active", nil, Access{Kind: Network, Target: "evil.com", Port: 443}, ""},
		{"union: a's host", []*Skill{apiA, apiB}, Access{Kind: Network, Target: "api.a.com", Port: 443}, ""},
		{"union: b's host", []*Skill{apiA, apiB}, Access{Kind: Network, Target: "api.b.com", Port: 443}, ""},
		{"union: neither", []*Skill{apiA, apiB}, Access{Kind: Network, Target: "api.c.com", Port: 443}, "skill-a, skill-b"},
		{"$SKILL_DIR expands to the skill's folder", []*Skill{apiB}, Access{Kind: Read, Target: filepath.Join(skills, "skill-b", "ref.md")}, ""},
		{"another skill's folder is not $SKILL_DIR", []*Skill{apiB}, Access{Kind: Read, Target: filepath.Join(skills, "md-only", "SKILL.md")}, "read of"},
		{"env declared", []*Skill{apiB}, Access{Kind: Env, Target: "LANG"}, ""},
		{"env undeclared", []*Skill{apiB}, Access{Kind: Env, Target: "AWS_SECRET"}, "AWS_SECRET"},
		{"a granted directory fits $WORK_DIR/**", []*Skill{mustSkill(t, skills, "w", "permissions:\n  fs:\n    read: [\"$WORK_DIR/**\"]\n")}, Access{Kind: Read, Target: in("docs"), Tree: true}, ""},
		{"a granted directory does not fit **/*.md", []*Skill{mdOnly}, Access{Kind: Read, Target: work, Tree: true}, "anything in"},
		{"a granted domain fits *.example.com", []*Skill{mustSkill(t, skills, "n", "permissions:\n  network:\n    allow: [\"*.example.com\"]\n")}, Access{Kind: Network, Target: "*.api.example.com", Tree: true}, ""},
		{"a wider granted domain does not", []*Skill{mustSkill(t, skills, "n2", "permissions:\n  network:\n    allow: [\"api.example.com\"]\n")}, Access{Kind: Network, Target: "*.example.com", Tree: true}, "example.com"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conv := "c" + string(rune('a'+i))
			for _, s := range tt.active {
				_ = ss.Activate(ctx, conv, s)
			}
			err := ss.Check(ctx, conv, "tool", []Access{tt.access})
			switch {
			case tt.deny == "" && err != nil:
				t.Errorf("denied: %v", err)
			case tt.deny != "" && err == nil:
				t.Errorf("allowed, want a refusal")
			case tt.deny != "" && (!errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), tt.deny)):
				t.Errorf("refusal %v, want forbidden naming %q", err, tt.deny)
			}
		})
	}
	// A one-shot call activates nothing; End forgets.
	_ = ss.Activate(ctx, "", mdOnly)
	if err := ss.Check(ctx, "", "read_file", []Access{{Kind: Read, Target: in("x.txt")}}); err != nil {
		t.Errorf("one-shot call restricted: %v", err)
	}
	ss.End("ca")
	if got, _ := ss.Active(ctx, "ca"); len(got) != 0 {
		t.Errorf("ended conversation still active: %v", got)
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		glob, path string
		want       bool
	}{
		{"/w/**/*.md", "/w/a.md", true},
		{"/w/**/*.md", "/w/x/y/a.md", true},
		{"/w/**/*.md", "/w/a.txt", false},
		{"/w/*", "/w/x/a", false},
		{"/w/**", "/w", true},
		{"/w/**", "/v/a", false},
	} {
		if got := matchGlob(tc.glob, tc.path); got != tc.want {
			t.Errorf("matchGlob(%q, %q) = %v", tc.glob, tc.path, got)
		}
	}
}
