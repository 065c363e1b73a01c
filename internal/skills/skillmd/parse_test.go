package skillmd

import (
	"errors"
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
