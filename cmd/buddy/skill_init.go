package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills/scaffold"
	"github.com/buddy-run/buddy/templates"
)

const initUsage = `Usage: buddy skill init NAME --lang tinygo|rust [--dir DIR]

Writes the project of a new skill into DIR (default ./NAME), which must be
absent or empty: its source, skill.toml, a Makefile (build, test), a
README, a .gitignore and test.sh, which runs the built plugin in buddy. The
example skill counts the lines, words and bytes of a file in a granted
directory.
`

// skillInit writes the project of a new skill: `buddy skill init NAME --lang
// tinygo|rust [--dir DIR]` (default ./NAME), then prints the files and what
// to do next.
func (a *app) skillInit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("skill init", flag.ContinueOnError)
	lang := fs.String("lang", "", "language of the project: "+strings.Join(templates.Langs(), " or "))
	dir := fs.String("dir", "", "directory to create (default ./NAME); an existing one must be empty")
	pos, err := parseFlags(fs, args)
	var he *helpError
	if errors.As(err, &he) {
		he.text = initUsage + "\n" + he.text
	}
	if err != nil {
		return err
	}
	if err := wantArgs("skill init", pos, 1, "NAME --lang tinygo|rust [--dir DIR]"); err != nil {
		return err
	}
	name := pos[0]
	if *lang == "" {
		return errs.New(errs.ErrInvalidInput, "--lang is required: "+strings.Join(templates.Langs(), " or "))
	}
	if *dir == "" {
		*dir = name
	}
	files, err := scaffold.Init(*dir, name, *lang)
	if err != nil {
		return err
	}
	w := a.stdout
	fmt.Fprintf(w, "created %s skill %s in %s:\n", *lang, name, *dir)
	for _, f := range files {
		fmt.Fprintf(w, "  %s\n", f)
	}
	build := "make build       # TinyGo → " + name + ".wasm (needs tinygo on PATH)"
	test := "make test        # go test, then " + name + ".wasm in buddy: an allowed and a refused read"
	if *lang == "rust" {
		build = "make build       # cargo → " + name + ".wasm (needs the wasm32-unknown-unknown target)"
		test = "make test        # " + name + ".wasm in buddy: an allowed and a refused read"
	}
	fmt.Fprintf(w, `
Next steps:
  cd %s
  %s
  %s
  buddy skill install %s.wasm
Then grant it a directory in buddy.toml:
  [skills.%s]
  allowed_directories = ["/path/to/documents"]
and run it:
  buddy skill run %s --input '{"path":"notes.txt"}'
See %s for more.
`, shellQuote(*dir), build, test, name, name, name, filepath.Join(*dir, "README.md"))
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+,:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
