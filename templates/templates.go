// Package templates holds the project scaffolds of `buddy skill init`: one tree
// per language (tinygo/, rust/) and common/, the files every language shares
// (skill.toml, test.sh). internal/skills/scaffold renders them.
//
//	files, err := templates.Files("rust") // common/ overlaid with rust/
//	for _, f := range files {
//		out := templates.Output(f.Path) // "Cargo.toml.tmpl" → "Cargo.toml"
//		...
//	}
//
// Conventions, relied on by internal/skills/scaffold and checked by this package's
// tests:
//   - Every file is named NAME.tmpl and is written as NAME: go:embed cannot
//     cross a nested go.mod, and a template .go file must not compile as part
//     of buddy's own module.
//   - A file is a text/template executed with the project's data (the skill
//     name, the Go module path, the Rust crate name), except under a
//     third_party/ directory: those are copied as they are. The TinyGo
//     project's third_party/skillkit/ is a copy of buddy's skillkit/, kept in
//     sync by scripts/sync-templates.sh.
//   - Files named *.sh.tmpl are written executable.
//   - A language's file replaces the common/ file of the same path.
package templates

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

//go:embed all:common all:tinygo all:rust
var files embed.FS

// Langs lists the languages `buddy skill init --lang` accepts, sorted.
func Langs() []string { return []string{"rust", "tinygo"} }

// Template is one file of a scaffold.
type Template struct {
	Path string // relative to the project root, slash-separated, ending in .tmpl
	Text []byte
}

// Files returns the templates of a language, common/ overlaid with the
// language's own tree, sorted by path.
func Files(lang string) ([]Template, error) {
	if !slices.Contains(Langs(), lang) {
		return nil, fmt.Errorf("no templates for language %q (choose %s)", lang, strings.Join(Langs(), " or "))
	}
	byPath := map[string][]byte{}
	for _, root := range []string{"common", lang} {
		err := fs.WalkDir(files, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			text, err := files.ReadFile(p)
			if err != nil {
				return err
			}
			byPath[strings.TrimPrefix(p, root+"/")] = text
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading templates %s: %w", root, err)
		}
	}
	out := make([]Template, 0, len(byPath))
	for p, text := range byPath {
		out = append(out, Template{Path: p, Text: text})
	}
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Verbatim reports whether the template at path p is copied as it is rather
// than executed.
func Verbatim(p string) bool {
	return strings.HasPrefix(p, "third_party/") || strings.Contains(p, "/third_party/")
}

// Executable reports whether the file made from the template at path p is
// written with its executable bits set.
func Executable(p string) bool { return strings.HasSuffix(p, ".sh.tmpl") }

// Output is the path of the file made from the template at path p.
func Output(p string) string { return strings.TrimSuffix(p, ".tmpl") }
