//go:build unix

package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkillMD: `skill add DIR` copies a SKILL.md folder in after validating
// it; `skill list` shows it with its type; `skill info` shows its
// frontmatter and declared permissions; `skill run` runs instruction,
// template and composite skills through the gate and refuses a script;
// `skill remove` deletes the folder.
func TestSkillMD(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	src := filepath.Join(s.dir, "src")
	mk := func(name, text string) string {
		d := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Join(d, "reference"), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(d, "SKILL.md"), text)
		write(t, filepath.Join(d, "reference", "api.md"), "# API\n")
		return d
	}
	guide := mk("doc-coauthoring", "---\nname: doc-coauthoring\ndescription: Co-author documents.\nlicense: Apache-2.0\npermissions:\n  fs:\n    read: [\"**/*.md\"]\n  network:\n    allow: [\"api.example.com:443\"]\n---\n# Co-authoring\nAsk first.\n")
	greet := mk("greet", "---\nname: greet\ntype: template\nparameters:\n  who: the name\n---\n```template\nHello {{.who}}!\n```\n")
	plan := mk("backup", "---\nname: backup\ntype: composite\n---\n```json\n{\"steps\": [{\"tool\": \"read_file\", \"params\": {\"path\": \"a.txt\"}}]}\n```\n")
	script := mk("legacy", "---\nname: legacy\ntype: script\n---\n```sh\necho hi\n```\n")
	bad := mk("bad", "---\nname: bad\npermissions:\n  exec: [curl]\n---\nx\n")
	link := mk("linked", "---\nname: linked\n---\nx\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(link, "passwd")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{guide, greet, plan, script} {
		if r := s.run(t, "skill", "add", d); r.code != 0 {
			t.Fatalf("add %s: %s", d, r)
		}
	}
	if r := s.run(t, "skill", "add", bad); r.code == 0 || !strings.Contains(r.stderr, "bad/SKILL.md:4: permissions: exec is refused") {
		t.Errorf("add with exec: %s", r)
	}
	if r := s.run(t, "skill", "add", link); r.code == 0 || !strings.Contains(r.stderr, "symbolic link") {
		t.Errorf("add with a link: %s", r)
	}
	if r := s.run(t, "skill", "add", guide); r.code == 0 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second add: %s", r)
	}
	skillsDir := filepath.Join(s.dataDir(), "instructions")
	if _, err := os.Stat(filepath.Join(skillsDir, "doc-coauthoring", "reference", "api.md")); err != nil {
		t.Errorf("resources not copied: %v", err)
	}

	list := s.run(t, "skill", "list")
	for _, want := range []string{"doc-coauthoring", "skill.md/instruction", "skill.md/template", "skill.md/composite", "skill.md/script", "read_file"} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	info := s.run(t, "skill", "info", "doc-coauthoring")
	for _, want := range []string{"SKILL.md, instruction", "license:      Apache-2.0", "declared permissions: read **/*.md; network api.example.com:443"} {
		if !strings.Contains(info.stdout, want) {
			t.Errorf("info lacks %q:\n%s", want, info)
		}
	}
	var j struct {
		Type        string `json:"type"`
		Permissions struct {
			FS struct{ Read []string } `json:"fs"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal([]byte(s.run(t, "skill", "info", "doc-coauthoring", "--json").ok(t)), &j); err != nil || j.Type != "instruction" || len(j.Permissions.FS.Read) != 1 {
		t.Errorf("info --json = %+v, %v", j, err)
	}

	run := s.run(t, "skill", "run", "doc-coauthoring", "--input", "{}")
	if !strings.Contains(run.ok(t), `"content":"# Co-authoring\nAsk first.\n"`) {
		t.Errorf("run instruction: %s", run)
	}
	if r := s.run(t, "skill", "run", "greet", "--input", `{"who":"Ann"}`); r.ok(t) != "Hello Ann!\n" {
		t.Errorf("run template = %q", r.stdout)
	}
	if r := s.run(t, "skill", "run", "backup", "--input", "{}"); !strings.Contains(r.ok(t), `"tool":"read_file"`) {
		t.Errorf("run composite: %s", r)
	}
	if r := s.run(t, "skill", "run", "legacy", "--input", "{}"); r.code == 0 || !strings.Contains(r.stderr, "WebAssembly skill") || !strings.HasPrefix(r.stderr, "error: forbidden:") {
		t.Errorf("run script: %s", r)
	}

	if r := s.run(t, "skill", "remove", "doc-coauthoring"); r.code != 0 {
		t.Fatalf("remove: %s", r)
	}
	if _, err := os.Stat(filepath.Join(skillsDir, "doc-coauthoring")); !os.IsNotExist(err) {
		t.Errorf("folder left after remove: %v", err)
	}
	if r := s.run(t, "skill", "info", "doc-coauthoring"); r.code == 0 {
		t.Errorf("info after remove: %s", r)
	}
}
