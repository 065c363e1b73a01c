package skillmd

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestParseRefusesInvalidUTF8: a SKILL.md that is not UTF-8 (in the
// frontmatter, the body, a script or a template) is refused with its line,
// never accepted to fail later when it is saved or shown.
func TestParseRefusesInvalidUTF8(t *testing.T) {
	for _, doc := range []string{
		"---\nname: x\ndescription: caf\xe9\n---\nbody\n",
		"---\nname: x\n---\nbody \xff\n",
		"---\ntype: script\n---\n```sh\n\r\xef",
		"---\nname: x\ntype: template\n---\n```template\n{{.a}}\xc3\n```\n",
	} {
		_, err := Parse("x/SKILL.md", []byte(doc))
		var fe *FileError
		if !errors.As(err, &fe) || fe.Line < 2 || !errors.Is(err, errs.ErrInvalidInput) {
			t.Errorf("Parse(%q) = %v, want a FileError with its line", doc, err)
		}
	}
}

// TestParseMappingKeys: a mapping nested in parameters, metadata or
// permissions.services whose keys are not plain strings (numbers, booleans,
// null, tagged scalars; in a list too) is read with string keys, so the
// skill encodes as JSON and reads back the same after Render; a key that is
// a collection, or two keys with the same text, are refused.
func TestParseMappingKeys(t *testing.T) {
	for _, field := range []string{"parameters", "metadata", "permissions:\n  services"} {
		for _, tc := range []struct {
			yaml string
			ok   bool
		}{
			{"{a: {80: x, true: y, null: z, 1.5: w}}", true},
			{"{a: {!000 k: v}}", true},
			{"{a: [{1: x}, {b: {2: y}}]}", true},
			{"{a: {b: {c: {3: d}}}}", true},
			{"{a: {1: x, \"1\": y}}", false},
			{"{a: {[1, 2]: x}}", false},
			{"{a: {{k: v}: x}}", false},
		} {
			doc := "---\nname: x\ndescription: d\n" + field + ": " + tc.yaml + "\n---\nbody\n"
			s, err := Parse("x/SKILL.md", []byte(doc))
			if !tc.ok {
				// (yaml.v3 itself refuses a collection as a key.)
				if err == nil || !errors.Is(err, errs.ErrInvalidInput) || !strings.Contains(err.Error(), "x/SKILL.md") {
					t.Errorf("%s: Parse(%q) = %v, want invalid_input naming the file", field, tc.yaml, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: Parse(%q): %v", field, tc.yaml, err)
				continue
			}
			if _, err := json.Marshal(s); err != nil {
				t.Errorf("%s: %q: the skill does not encode as JSON: %v", field, tc.yaml, err)
			}
			out, err := Render(s)
			if err != nil {
				t.Errorf("%s: %q: Render: %v", field, tc.yaml, err)
				continue
			}
			again, err := Parse("x/SKILL.md", out)
			if err != nil {
				t.Errorf("%s: %q: the rendered skill does not parse: %v", field, tc.yaml, err)
			} else if d := skillDiff(s, again); d != "" {
				t.Errorf("%s: %q: the rendered skill parses to another: %s", field, tc.yaml, d)
			}
		}
	}
}
