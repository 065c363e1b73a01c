// Package scaffold writes the project of a new skill, for `buddy skill init`:
// the source of a small but real skill (a word count of a file in a granted
// directory), its skill.toml, a Makefile with build and test targets, a
// README, a .gitignore and test.sh, which runs the built plugin in buddy and
// checks one allowed and one refused read. The files come from package
// templates.
//
//	files, err := scaffold.Init("./wordy", "wordy", "tinygo")
//	// files: wordy/.gitignore, wordy/Makefile, wordy/README.md, ...
//
// Init never writes into an existing directory that is not empty, and on
// failure removes whatever it created.
//
// The end-to-end tests (scaffold_e2e_test.go) build each language's project
// with its own build file, install it and run it through the buddy binary.
// They need make, TinyGo (scripts/install-tinygo.sh) and Rust with the wasm32
// target (scripts/install-rust-wasm.sh): a missing toolchain fails them,
// naming the script, unless BUDDY_SKIP_TOOLCHAIN_TESTS=1 turns that into a
// skip; -short skips them altogether.
package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime"
	"github.com/buddy-run/buddy/templates"
)

// Data is what the templates are executed with.
type Data struct {
	Name       string // the skill's name, [a-z][a-z0-9_]{0,63}
	ModulePath string // the Go module path of a TinyGo project
	Crate      string // the Rust package name of a Rust project
}

// NewData returns the template data of a skill name.
func NewData(name string) Data {
	crate := name
	if reservedCrates[name] {
		crate = name + "_skill"
	}
	return Data{Name: name, ModulePath: "example.com/" + name, Crate: crate}
}

// reservedCrates are names a Rust package of the template may not have: the
// standard crates and the crates of its dependency graph (a package cannot
// depend on a crate of its own name).
var reservedCrates = map[string]bool{
	"std": true, "core": true, "alloc": true, "proc_macro": true, "test": true,
	"serde": true, "serde_json": true, "serde_derive": true, "itoa": true, "ryu": true,
}

// openFile is os.OpenFile; tests make it fail.
var openFile = os.OpenFile

// File is one rendered file of a project.
type File struct {
	Path string      // slash-separated, relative to the project directory
	Mode fs.FileMode // 0o644, or 0o755 for scripts
	Data []byte
}

// Check validates a skill name and a language as Init does. The errors wrap
// errs.ErrInvalidInput.
func Check(name, lang string) error {
	if !slices.Contains(templates.Langs(), lang) {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("unknown language %q: choose %s", lang, strings.Join(templates.Langs(), " or ")))
	}
	if !runtime.ValidName(name) {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("invalid skill name %q: use a lowercase letter, then up to 63 lowercase letters, digits or underscores ([a-z][a-z0-9_]{0,63})", name))
	}
	if why := builtins.Reserved(name); why != "" {
		return errs.New(errs.ErrForbidden, why)
	}
	return nil
}

// Render renders the project of a skill without writing anything, files
// sorted by path.
func Render(name, lang string) ([]File, error) {
	if err := Check(name, lang); err != nil {
		return nil, err
	}
	tmpls, err := templates.Files(lang)
	if err != nil {
		return nil, errs.Wrap(errs.ErrInternal, "reading templates", err)
	}
	data := NewData(name)
	out := make([]File, 0, len(tmpls))
	for _, t := range tmpls {
		f := File{Path: templates.Output(t.Path), Mode: 0o644, Data: t.Text}
		if templates.Executable(t.Path) {
			f.Mode = 0o755
		}
		if !templates.Verbatim(t.Path) {
			tmpl, err := template.New(t.Path).Option("missingkey=error").Parse(string(t.Text))
			if err != nil {
				return nil, errs.Wrap(errs.ErrInternal, "parsing template "+t.Path, err)
			}
			var b bytes.Buffer
			if err := tmpl.Execute(&b, data); err != nil {
				return nil, errs.Wrap(errs.ErrInternal, "rendering template "+t.Path, err)
			}
			f.Data = b.Bytes()
		}
		out = append(out, f)
	}
	return out, nil
}

// Init writes the project of a new skill called name, in language lang
// ("tinygo" or "rust"), into dir, and returns the paths of the files it
// created (dir joined with each file's path), sorted.
//
// dir may exist if it is an empty directory: an existing directory with
// anything in it is not written into (errs.ErrInvalidInput), so nothing is
// ever overwritten. On any failure Init removes what it created: dir itself
// and its missing parents if it made them, otherwise the files and
// directories it added.
func Init(dir, name, lang string) (files []string, err error) {
	rendered, err := Render(name, lang)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errs.New(errs.ErrInvalidInput, "no target directory")
	}
	top, err := makeRoot(dir)
	if err != nil {
		return nil, err
	}
	var made []string // what was created inside dir, in order
	defer func() {
		if err == nil {
			return
		}
		if top != "" {
			os.RemoveAll(top)
			return
		}
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
	}()

	for _, f := range rendered {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		dirs, err := mkdirs(dir, filepath.Dir(path))
		made = append(made, dirs...)
		if err != nil {
			return nil, err
		}
		// O_EXCL: a file that appeared since the emptiness check is not replaced.
		w, err := openFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.Mode)
		if err != nil {
			return nil, errs.Wrap(errs.ErrUnavailable, "creating "+path, err)
		}
		made = append(made, path)
		_, werr := w.Write(f.Data)
		if cerr := w.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, errs.Wrap(errs.ErrUnavailable, "writing "+path, werr)
		}
		files = append(files, path)
	}
	return files, nil
}

// makeRoot makes sure dir is an empty directory, creating it (and its missing
// parents) if needed. It returns the topmost directory it created, "" if dir
// already existed.
func makeRoot(dir string) (string, error) {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return "", errs.New(errs.ErrInvalidInput, fmt.Sprintf("%s exists and is not a directory", dir))
	case err == nil:
		entries, err := os.ReadDir(dir)
		if err != nil {
			return "", errs.Wrap(errs.ErrUnavailable, "reading "+dir, err)
		}
		if len(entries) > 0 {
			return "", errs.New(errs.ErrInvalidInput, fmt.Sprintf("%s already exists and is not empty: an existing directory is not overwritten (choose another directory, or remove it)", dir))
		}
		return "", nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", errs.Wrap(errs.ErrUnavailable, "checking "+dir, err)
	}
	top := filepath.Clean(dir)
	for {
		parent := filepath.Dir(top)
		if parent == top {
			break
		}
		if _, err := os.Stat(parent); err == nil {
			break
		}
		top = parent
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		os.RemoveAll(top)
		return "", errs.Wrap(errs.ErrUnavailable, "creating "+dir, err)
	}
	return top, nil
}

// mkdirs creates the directories from root (exclusive) down to dir and
// returns those it created, outermost first.
func mkdirs(root, dir string) ([]string, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return nil, err
	}
	var made []string
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return made, errs.Wrap(errs.ErrUnavailable, "creating "+cur, err)
		}
		made = append(made, cur)
	}
	return made, nil
}
