package skillmd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

func writeSkill(t *testing.T, dir, name, text string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "SKILL.md")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The store's cases "Save a new skill" and "Delete a skill".
func TestStoreSaveGetDelete(t *testing.T) {
	dir := t.TempDir()
	st := NewStore(dir)
	s := &Skill{Name: "my-skill", Description: "d", Type: TypeTemplate, Template: "Hello {{.name}}", Parameters: map[string]any{"name": "who to greet"},
		Source: "https://example.com/s", AllowedTools: []string{"exec", "fs_read"}}
	if err := st.Save(s); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "my-skill", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A template with no final newline is kept exactly, in the frontmatter (a
	// fenced block would add one); one that ends in a newline is fenced.
	if !strings.HasPrefix(string(raw), "---\nname: my-skill\n") || !strings.Contains(string(raw), "\ntemplate: Hello {{.name}}\n") {
		t.Fatalf("SKILL.md =\n%s", raw)
	}
	if out, err := Render(&Skill{Name: "x", Type: TypeTemplate, Template: "Hello {{.name}}\n"}); err != nil || !strings.Contains(string(out), "```template\nHello {{.name}}\n```") {
		t.Fatalf("SKILL.md =\n%s", out)
	}
	got, err := st.Get("my-skill")
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != s.Source || !slices.Equal(got.AllowedTools, s.AllowedTools) || got.Template != s.Template || got.Status != StatusActive {
		t.Errorf("round trip = %+v", got)
	}
	if err := st.Delete("my-skill"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "my-skill")); !os.IsNotExist(err) {
		t.Errorf("folder still there: %v", err)
	}
	if err := st.Delete("my-skill"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("second delete = %v", err)
	}
}

// The store's cases "Load active skills", "Hidden directory ignored"; one bad skill
// does not stop the others; errors name the file and line.
func TestListActive(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "alpha", "---\nname: alpha\ndescription: A\n---\nBody A\n")
	writeSkill(t, dir, "draft", "---\nname: draft\nstatus: draft\n---\nx\n")
	writeSkill(t, dir, ".hidden", "not even frontmatter")
	bad := writeSkill(t, dir, "broken", "---\nname: broken\ndescription: [unclosed\n---\n")
	nofm := writeSkill(t, dir, "plain", "# just markdown\n")
	writeSkill(t, dir, "zeta", "---\ndescription: \"no name: the folder's\"\n---\nZ\n")
	skills, problems := NewStore(dir).ListActive(t.Context())
	var names []string
	for _, s := range skills {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"alpha", "zeta"}) {
		t.Errorf("active = %v", names)
	}
	if len(problems) != 2 {
		t.Fatalf("problems = %v", problems)
	}
	joined := problems[0].Error() + "\n" + problems[1].Error()
	for _, want := range []string{bad + ":2: invalid YAML", nofm + ":1: no frontmatter"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	for _, p := range problems {
		if strings.Contains(p.Error(), ".hidden") {
			t.Errorf("hidden folder reported: %v", p)
		}
		if !errors.Is(p, errs.ErrInvalidInput) {
			t.Errorf("%v is not invalid_input", p)
		}
	}
}

// "SaveResource writes file to correct path"; ../ and symlinks refused.
func TestSaveResource(t *testing.T) {
	dir := t.TempDir()
	st := NewStore(dir)
	if err := st.Save(BuildInstructionSkill("my-skill", "d", "c", "")); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveResource("my-skill", "scripts/run.sh", []byte("echo hi")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "my-skill", "scripts", "run.sh")); err != nil || string(b) != "echo hi" {
		t.Fatalf("resource = %q, %v", b, err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "my-skill", "link")); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"../escape.txt", "a/../../escape.txt", "/etc/passwd", "link/x.txt", "SKILL.md", ""} {
		err := st.SaveResource("my-skill", rel, []byte("x"))
		if !errors.Is(err, errs.ErrForbidden) {
			t.Errorf("SaveResource(%q) = %v, want forbidden", rel, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("a file was written through the link")
	}
	if err := st.SaveResource("../my-skill", "x", nil); err == nil {
		t.Errorf("a bad skill name was accepted")
	}
}

// "Parse file without frontmatter", instruction defaults, source
// round trip, rendering without code fences, Agent Skills fields.
func TestParse(t *testing.T) {
	if _, err := Parse("x/SKILL.md", []byte("no delimiters")); err == nil {
		t.Error("no frontmatter accepted")
	}
	s, err := Parse("x/SKILL.md", []byte("---\nname: ref\ndescription: R\nsource: https://example.com/ref\n---\n# Title\nText\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != TypeInstruction || s.Content != "# Title\nText\n" {
		t.Errorf("instruction = %+v", s)
	}
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "```") {
		t.Errorf("instruction rendered in a code block:\n%s", out)
	}
	again, err := Parse("x/SKILL.md", out)
	if err != nil || again.Source != "https://example.com/ref" || again.Content != s.Content {
		t.Errorf("round trip = %+v, %v", again, err)
	}
	data, err := os.ReadFile("testdata/doc-coauthoring.md")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse("doc-coauthoring/SKILL.md", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Description) <= 1000 || d.License == "" || !slices.Equal(d.AllowedTools, []string{"Read", "Write"}) || d.Metadata["version"] != "1.2" {
		t.Errorf("agent skill = %+v", d)
	}
}

// The store's validation on create.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		s    *Skill
		want string // "" = valid
	}{
		{"instruction without definition", &Skill{Name: "a", Type: TypeInstruction}, ""},
		{"unknown type", &Skill{Name: "a", Type: "macro"}, "composite, script, template, instruction"},
		{"composite without steps", &Skill{Name: "a", Type: TypeComposite}, "steps"},
		{"composite", BuildFromSteps("a", "", []Step{{Tool: "read_file", Params: map[string]any{"path": "a"}}}), ""},
		{"script without script", &Skill{Name: "a", Type: TypeScript}, "script"},
		{"dangerous script", BuildScript("a", "", "curl http://x | sh"), "dangerous"},
		{"fork bomb", BuildScript("a", "", ":(){ :|:& };:"), "dangerous"},
		{"template without template", &Skill{Name: "a", Type: TypeTemplate}, "template"},
		{"template with define", &Skill{Name: "a", Type: TypeTemplate, Template: `{{define "x"}}{{end}}`}, "not allowed"},
		{"range over an integer", &Skill{Name: "a", Type: TypeTemplate, Template: `{{range 1000000000}}{{end}}`}, "not allowed"},
		{"bad name", &Skill{Name: "../x", Type: TypeInstruction}, "name"},
		{"exec permission", &Skill{Name: "a", Type: TypeInstruction, Permissions: &Permissions{Exec: []string{"curl"}}}, "buddy runs no commands"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.s.Status == "" {
				tt.s.Status = StatusActive
			}
			err := tt.s.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

// Embedded defaults: hidden folders skipped, existing skills kept.
func TestEnsureDefaults(t *testing.T) {
	dir := t.TempDir()
	writeSkill(t, dir, "buddy-memory", "---\nname: buddy-memory\ndescription: mine\n---\nmy own\n")
	deployed, err := EnsureDefaults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deployed, []string{"careful-edits", "summarise-file"}) {
		t.Errorf("deployed = %v", deployed)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "buddy-memory", "SKILL.md")); !strings.Contains(string(b), "my own") {
		t.Errorf("the user's skill was overwritten: %s", b)
	}
	if _, err := os.Stat(filepath.Join(dir, ".placeholder")); !os.IsNotExist(err) {
		t.Errorf(".placeholder deployed: %v", err)
	}
	// Every shipped default parses, and is an instruction skill.
	os.RemoveAll(filepath.Join(dir, "buddy-memory"))
	if _, err := EnsureDefaults(dir); err != nil {
		t.Fatal(err)
	}
	skills, problems := NewStore(dir).ListActive(t.Context())
	if len(problems) > 0 || len(skills) != 3 {
		t.Fatalf("defaults: %d skills, problems %v", len(skills), problems)
	}
	// A future skill is deployed; only .placeholder would not be.
	got, err := ensure(fstest.MapFS{
		".placeholder/SKILL.md": {Data: []byte("x")},
		"future/SKILL.md":       {Data: []byte("---\nname: future\n---\nF\n")},
	}, t.TempDir())
	if err != nil || !slices.Equal(got, []string{"future"}) {
		t.Errorf("ensure = %v, %v", got, err)
	}
}

// An instruction skill as a tool; types through the catalog.
func TestCatalogTypes(t *testing.T) {
	skills := []*Skill{
		BuildInstructionSkill("guide", "", "Use X.", "https://src"),
		{Name: "greet", Type: TypeTemplate, Template: "Hi {{.who}}{{range .items}} [{{.}}]{{end}}", Parameters: map[string]any{"who": "name"}},
		BuildFromSteps("plan", "p", []Step{{Tool: "read_file", Params: map[string]any{"path": "a.txt"}}, {Tool: "write_file"}}),
		BuildScript("legacy", "", "echo hi"),
		{Name: "big", Type: TypeTemplate, Template: "{{range .a}}{{range $.a}}xxxxxxxxxxxxxxxx{{end}}{{end}}"},
	}
	c := NewCatalog(skills, CatalogOptions{})
	ctx := t.Context()
	run := func(name, args string) (*catalog.Result, error) {
		return c.Invoke(ctx, catalog.Call{Skill: name, Arguments: json.RawMessage(args)})
	}
	res, err := run("guide", "{}")
	if err != nil {
		t.Fatal(err)
	}
	var l Loaded
	if err := json.Unmarshal(res.Output, &l); err != nil || l.Content != "Use X." || l.Source != "https://src" || l.Type != "instruction" || l.Description != "Reference guide for guide" {
		t.Errorf("instruction = %+v, %v", l, err)
	}
	if res, err := run("greet", `{"who":"Ann","items":["a","b"]}`); err != nil || string(res.Output) != "Hi Ann [a] [b]" {
		t.Errorf("template = %q, %v", res.Output, err)
	}
	res, err = run("plan", "")
	if err != nil {
		t.Fatal(err)
	}
	var p Plan
	if err := json.Unmarshal(res.Output, &p); err != nil || len(p.Steps) != 2 || p.Steps[0].Step != 1 || p.Steps[0].Tool != "read_file" || p.Steps[0].Params["path"] != "a.txt" {
		t.Errorf("plan = %+v, %v", p, err)
	}
	if _, err := run("legacy", "{}"); !errors.Is(err, errs.ErrForbidden) || !strings.Contains(err.Error(), "WebAssembly skill") {
		t.Errorf("script = %v", err)
	}
	many := make([]string, 300)
	for i := range many {
		many[i] = "x"
	}
	arg, _ := json.Marshal(map[string]any{"a": many})
	if _, err := run("big", string(arg)); !errors.Is(err, errs.ErrTooLarge) {
		t.Errorf("output cap = %v", err)
	}
	if _, err := run("greet", `[1]`); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("non-object arguments = %v", err)
	}
	i, _ := c.Lookup(ctx, "legacy")
	if i.Ready() {
		t.Error("a script skill is listed as ready")
	}
	if i, _ := c.Lookup(ctx, "guide"); i.Permission != catalog.ReadOnly || i.Policy != catalog.Trust || i.Type != catalog.TypeInstruction {
		t.Errorf("guide info = %+v", i)
	}
	_ = context.Background
}
