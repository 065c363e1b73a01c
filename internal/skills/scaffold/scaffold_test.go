package scaffold

import (
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime"
	"github.com/buddy-run/buddy/templates"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

// TestGolden renders the project of a skill called "wordy" in each language
// and compares it with testdata/golden/LANG/: FILES.golden lists every file
// with its mode, and PATH.golden holds each rendered file (the verbatim copy
// of skillkit is checked against skillkit/ by package templates instead).
// Rewrite with `go test ./internal/scaffold/ -run TestGolden -update`.
func TestGolden(t *testing.T) {
	for _, lang := range templates.Langs() {
		t.Run(lang, func(t *testing.T) {
			files, err := Render("wordy", lang)
			if err != nil {
				t.Fatal(err)
			}
			root := filepath.Join("testdata", "golden", lang)
			var list strings.Builder
			want := map[string][]byte{}
			for _, f := range files {
				fmt.Fprintf(&list, "%04o %s\n", f.Mode, f.Path)
				if !templates.Verbatim(f.Path) {
					want[filepath.FromSlash(f.Path)+".golden"] = f.Data
				}
			}
			want["FILES.golden"] = []byte(list.String())

			if *update {
				if err := os.RemoveAll(root); err != nil {
					t.Fatal(err)
				}
				for p, data := range want {
					p = filepath.Join(root, p)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			have := map[string]bool{}
			err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				have[rel] = true
				if _, ok := want[rel]; !ok {
					t.Errorf("%s: no longer rendered (rerun with -update)", p)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for rel, data := range want {
				p := filepath.Join(root, rel)
				golden, err := os.ReadFile(p)
				if err != nil {
					t.Errorf("%s: %v (rerun with -update)", p, err)
					continue
				}
				if string(golden) != string(data) {
					t.Errorf("%s differs from the rendered file (rerun with -update if intended):\n%s", p, firstDiff(string(golden), string(data)))
				}
			}
		})
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  golden:   %q\n  rendered: %q", i+1, wl, gl)
		}
	}
	return "(same lines)"
}

// TestRendered checks what a build cannot: skill.toml is a valid manifest
// declaring exactly files_read, Go files are gofmt'ed, nothing is left
// unrendered, and only scripts are executable.
func TestRendered(t *testing.T) {
	for _, lang := range templates.Langs() {
		t.Run(lang, func(t *testing.T) {
			files, err := Render("my_skill", lang)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if strings.Contains(f.Path, ".tmpl") {
					t.Errorf("%s: .tmpl suffix kept", f.Path)
				}
				if wantExec := strings.HasSuffix(f.Path, ".sh"); (f.Mode&0o111 != 0) != wantExec {
					t.Errorf("%s: mode %04o", f.Path, f.Mode)
				}
				if !templates.Verbatim(f.Path) && strings.Contains(string(f.Data), "{{") {
					t.Errorf("%s: contains an unrendered {{", f.Path)
				}
				switch {
				case f.Path == "skill.toml":
					m, err := runtime.ParseManifest(f.Data)
					if err != nil {
						t.Fatalf("skill.toml: %v", err)
					}
					if m.Name != "my_skill" || m.Permission != runtime.ReadOnly || m.Entrypoint != "run" {
						t.Errorf("skill.toml: name %q, permission %q, entrypoint %q", m.Name, m.Permission, m.Entrypoint)
					}
					if want := (runtime.Capabilities{FilesRead: true}); fmt.Sprint(m.Capabilities) != fmt.Sprint(want) {
						t.Errorf("skill.toml: capabilities %+v, want only files_read", m.Capabilities)
					}
				case strings.HasSuffix(f.Path, ".go"):
					formatted, err := format.Source(f.Data)
					if err != nil {
						t.Errorf("%s: %v", f.Path, err)
					} else if string(formatted) != string(f.Data) {
						t.Errorf("%s is not gofmt'ed", f.Path)
					}
				}
			}
		})
	}
}

// Scaffolding creates the directory with the project's files.
func TestInitCreatesFiles(t *testing.T) {
	want := map[string][]string{
		"rust":   {"Cargo.toml", "src/lib.rs", "src/buddy.rs", "skill.toml", "Makefile", "build.sh", "README.md", ".gitignore", "test.sh", ".cargo/config.toml"},
		"tinygo": {"go.mod", "go.sum", "main.go", "main_test.go", "skill.toml", "Makefile", "README.md", ".gitignore", "test.sh", "third_party/skillkit/go.mod"},
	}
	for _, lang := range templates.Langs() {
		t.Run(lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "my_skill")
			files, err := Init(dir, "my_skill", lang)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.IsSorted(files) {
				t.Errorf("files not sorted: %q", files)
			}
			for _, p := range want[lang] {
				p = filepath.Join(dir, filepath.FromSlash(p))
				if !slices.Contains(files, p) {
					t.Errorf("%s not in the returned files %q", p, files)
				}
				if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
					t.Errorf("%s: %v", p, err)
				}
			}
			for _, p := range files {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if exec := st.Mode()&0o100 != 0; exec != strings.HasSuffix(p, ".sh") {
					t.Errorf("%s: mode %v", p, st.Mode())
				}
			}
		})
	}
}

// Scaffolding uses the provided name in the generated files.
func TestInitUsesName(t *testing.T) {
	checks := map[string]map[string][]string{
		"rust": {
			"Cargo.toml": {`name = "note_counter"`},
			"skill.toml": {`name = "note_counter"`},
			"build.sh":   {"release/note_counter.wasm", "note_counter.wasm"},
			"Makefile":   {"note_counter.wasm"},
			"test.sh":    {"./note_counter.wasm", "[skills.note_counter]"},
			"README.md":  {"# note_counter", "buddy skill install note_counter.wasm", "[skills.note_counter]"},
			"src/lib.rs": {"//! note_counter: "},
		},
		"tinygo": {
			"go.mod":     {"module example.com/note_counter"},
			"skill.toml": {`name = "note_counter"`},
			"main.go":    {"// Command note_counter "},
			"Makefile":   {"note_counter.wasm:"},
			"test.sh":    {"./note_counter.wasm", "[skills.note_counter]"},
			"README.md":  {"# note_counter", "buddy skill install note_counter.wasm", "[skills.note_counter]"},
		},
	}
	for _, lang := range templates.Langs() {
		t.Run(lang, func(t *testing.T) {
			dir := t.TempDir() // exists and is empty: allowed
			if _, err := Init(dir, "note_counter", lang); err != nil {
				t.Fatal(err)
			}
			for file, wants := range checks[lang] {
				data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range wants {
					if !strings.Contains(string(data), w) {
						t.Errorf("%s does not contain %q", file, w)
					}
				}
			}
			m, err := runtime.LoadManifest(filepath.Join(dir, "skill.toml"))
			if err != nil || m.Name != "note_counter" {
				t.Errorf("skill.toml: %v, %+v", err, m)
			}
		})
	}
}

func TestNewData(t *testing.T) {
	for name, want := range map[string]Data{
		"wordy":      {Name: "wordy", ModulePath: "example.com/wordy", Crate: "wordy"},
		"serde_json": {Name: "serde_json", ModulePath: "example.com/serde_json", Crate: "serde_json_skill"},
		"std":        {Name: "std", ModulePath: "example.com/std", Crate: "std_skill"},
	} {
		if got := NewData(name); got != want {
			t.Errorf("NewData(%q) = %+v, want %+v", name, got, want)
		}
	}
}

// TestInitRefuses: bad names, unknown languages and existing directories are
// refused with ErrInvalidInput, and nothing is written.
func TestInitRefuses(t *testing.T) {
	tests := []struct {
		name, skill, lang string
		setup             func(t *testing.T, dir string) // prepares the target
		wantMsg           string
		wantKind          error // errs.ErrInvalidInput when nil
	}{
		{name: "empty name", skill: "", lang: "tinygo", wantMsg: "invalid skill name"},
		{name: "uppercase", skill: "Wordy", lang: "tinygo", wantMsg: "invalid skill name"},
		{name: "leading digit", skill: "1wordy", lang: "rust", wantMsg: "invalid skill name"},
		{name: "leading underscore", skill: "_wordy", lang: "rust", wantMsg: "invalid skill name"},
		{name: "dash", skill: "word-count", lang: "rust", wantMsg: "invalid skill name"},
		{name: "space", skill: "word count", lang: "tinygo", wantMsg: "invalid skill name"},
		{name: "path", skill: "../wordy", lang: "tinygo", wantMsg: "invalid skill name"},
		{name: "too long", skill: "a" + strings.Repeat("b", 64), lang: "tinygo", wantMsg: "invalid skill name"},
		{name: "built-in", skill: "read_file", lang: "tinygo", wantMsg: "built-in", wantKind: errs.ErrForbidden},
		{name: "memory section", skill: "memory", lang: "rust", wantMsg: "reserved", wantKind: errs.ErrForbidden},
		{name: "unknown language", skill: "wordy", lang: "go", wantMsg: `unknown language "go": choose rust or tinygo`},
		{name: "no language", skill: "wordy", lang: "", wantMsg: "choose rust or tinygo"},
		{name: "language case", skill: "wordy", lang: "Rust", wantMsg: "unknown language"},
		{
			name: "non-empty directory", skill: "wordy", lang: "tinygo", wantMsg: "not overwritten",
			setup: func(t *testing.T, dir string) {
				mustWrite(t, filepath.Join(dir, "main.go"), "package mine\n")
			},
		},
		{
			name: "directory holding only a dotfile", skill: "wordy", lang: "rust", wantMsg: "not overwritten",
			setup: func(t *testing.T, dir string) {
				mustWrite(t, filepath.Join(dir, ".git"), "gitdir: elsewhere\n")
			},
		},
		{
			name: "a file", skill: "wordy", lang: "rust", wantMsg: "not a directory",
			setup: func(t *testing.T, dir string) {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				mustWrite(t, dir, "not a directory\n")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "project")
			if tt.setup != nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				tt.setup(t, dir)
			}
			before := snapshot(t, parent)
			files, err := Init(dir, tt.skill, tt.lang)
			kind := tt.wantKind
			if kind == nil {
				kind = errs.ErrInvalidInput
			}
			if !errors.Is(err, kind) {
				t.Fatalf("Init = %q, %v; want %v", files, err, kind)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
			if files != nil {
				t.Errorf("files = %q", files)
			}
			if after := snapshot(t, parent); after != before {
				t.Errorf("Init changed the disk:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestInitCleansUp makes a write fail halfway and checks that Init removes
// what it made: the whole tree when it created the directory (and its
// parents), only its own files and directories when the directory existed.
func TestInitCleansUp(t *testing.T) {
	defer func(orig func(string, int, os.FileMode) (*os.File, error)) { openFile = orig }(openFile)
	n := 0
	openFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if n++; n == 4 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("disk full")}
		}
		return os.OpenFile(name, flag, perm)
	}

	t.Run("new directory", func(t *testing.T) {
		n = 0
		parent := t.TempDir()
		_, err := Init(filepath.Join(parent, "a", "b", "project"), "wordy", "rust")
		if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("Init = %v, want the write error", err)
		}
		if s := snapshot(t, parent); s != "" {
			t.Errorf("left behind:\n%s", s)
		}
	})
	t.Run("existing empty directory", func(t *testing.T) {
		n = 0
		parent := t.TempDir()
		dir := filepath.Join(parent, "project")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, parent)
		if _, err := Init(dir, "wordy", "rust"); err == nil {
			t.Fatal("Init succeeded")
		}
		if after := snapshot(t, parent); after != before {
			t.Errorf("left behind:\n%s", after)
		}
	})
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists everything under root with its size.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(&b, "%s %v %d\n", rel, info.Mode(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
