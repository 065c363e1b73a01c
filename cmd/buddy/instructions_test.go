package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
	"github.com/buddy-run/buddy/internal/instructions"
	"github.com/buddy-run/buddy/internal/registry"
)

type fakeSource map[string]*registry.Skill

func (f fakeSource) Get(name string) (*registry.Skill, error) {
	if s, ok := f[name]; ok {
		return s, nil
	}
	return nil, errs.New(errs.ErrNotFound, name)
}

// TestGuardAccess: the gate's guard checks the path or URL of the built-ins
// and the whole grant of any other WebAssembly skill against the active
// SKILL.md declarations (seed 001's cases, through buddy's gate wiring).
func TestGuardAccess(t *testing.T) {
	ws, other := t.TempDir(), t.TempDir()
	dom, err := allow.Parse("*.example.org", allow.Operator)
	if err != nil {
		t.Fatal(err)
	}
	src := fakeSource{
		"read_file":  {Name: "read_file", Builtin: true, Grants: hostfns.Grants{Read: []string{ws}}},
		"write_file": {Name: "write_file", Builtin: true, Grants: hostfns.Grants{Write: []string{ws}}},
		"fetch_url":  {Name: "fetch_url", Builtin: true},
		"notes":      {Name: "notes", Grants: hostfns.Grants{Read: []string{other}}},
		"web":        {Name: "web", Grants: hostfns.Grants{Domains: []allow.Entry{dom}}},
		"memo":       {Name: "memo", Grants: hostfns.Grants{Namespace: "memo"}},
	}
	sess := instructions.NewSessions(instructions.Dirs{Work: ws})
	md := &skillsMD{sessions: sess}
	guard := md.guard(func() skillSource { return src })
	skill := func(perms string) *instructions.Skill {
		s, err := instructions.Parse("/skills/s/SKILL.md", []byte("---\nname: s\n"+perms+"---\nx\n"))
		if err != nil {
			t.Fatal(err)
		}
		s.Dir = "/skills/s"
		return s
	}
	sess.Activate("md", skill("permissions:\n  fs:\n    read: [\"**/*.md\"]\n    write: [\"**/*.log\"]\n  network:\n    allow: [\"api.example.com:443\", \"*.example.org\"]\n"))
	sess.Activate("free", skill(""))
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
		err := guard(context.Background(), approval.Request{Conversation: tt.conv, Skill: tt.skill, Arguments: json.RawMessage(tt.args)})
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, errs.ErrForbidden) {
			t.Errorf("%s %s %s: %v (want ok=%v)", tt.conv, tt.skill, tt.args, err, tt.ok)
		}
	}
	if (*skillsMD)(nil).guard(nil) != nil || (*skillsMD)(nil).union(&catalog.Union{}) == nil {
		t.Error("disabled SKILL.md skills still guard")
	}
}
