package templates

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
)

func TestFiles(t *testing.T) {
	want := map[string][]string{
		"tinygo": {".gitignore.tmpl", "Makefile.tmpl", "README.md.tmpl", "go.mod.tmpl", "go.sum.tmpl",
			"main.go.tmpl", "main_test.go.tmpl", "skill.toml.tmpl", "test.sh.tmpl",
			"third_party/skillkit/go.mod.tmpl", "third_party/skillkit/skillkit.go.tmpl"},
		"rust": {".cargo/config.toml.tmpl", ".gitignore.tmpl", "Cargo.toml.tmpl", "Makefile.tmpl",
			"README.md.tmpl", "build.sh.tmpl", "skill.toml.tmpl", "src/buddy.rs.tmpl", "src/lib.rs.tmpl", "test.sh.tmpl"},
	}
	for _, lang := range Langs() {
		t.Run(lang, func(t *testing.T) {
			files, err := Files(lang)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, f := range files {
				paths = append(paths, f.Path)
				if !strings.HasSuffix(f.Path, ".tmpl") {
					t.Errorf("%s: template files are named *.tmpl", f.Path)
				}
				if len(f.Text) == 0 {
					t.Errorf("%s is empty", f.Path)
				}
				if Verbatim(f.Path) {
					continue
				}
				if _, err := template.New(f.Path).Parse(string(f.Text)); err != nil {
					t.Errorf("%s: %v", f.Path, err)
				}
			}
			if !slices.IsSorted(paths) {
				t.Errorf("not sorted: %q", paths)
			}
			for _, p := range want[lang] {
				if !slices.Contains(paths, p) {
					t.Errorf("no %s in %q", p, paths)
				}
			}
		})
	}
	if _, err := Files("go"); err == nil || !strings.Contains(err.Error(), "rust or tinygo") {
		t.Errorf("Files(go) = %v, want an error naming the choices", err)
	}
}

func TestConventions(t *testing.T) {
	for p, want := range map[string]bool{
		"third_party/skillkit/skillkit.go.tmpl": true,
		"vendor/third_party/x.tmpl":             true,
		"main.go.tmpl":                          false,
		"third_party.md.tmpl":                   false,
	} {
		if got := Verbatim(p); got != want {
			t.Errorf("Verbatim(%q) = %v, want %v", p, got, want)
		}
	}
	if !Executable("build.sh.tmpl") || Executable("Makefile.tmpl") || Executable("README.md.tmpl") {
		t.Error("only *.sh.tmpl files are executable")
	}
	if got := Output(".cargo/config.toml.tmpl"); got != ".cargo/config.toml" {
		t.Errorf("Output = %q", got)
	}
}

// TestSkillkitCopy checks that the TinyGo scaffold's copy of skillkit, its
// go.sum and its go-pdk requirement match ../skillkit, as
// scripts/sync-templates.sh --check does.
func TestSkillkitCopy(t *testing.T) {
	const fix = "run scripts/sync-templates.sh"
	src := filepath.Join("..", "skillkit")
	dst := filepath.Join("tinygo", "third_party", "skillkit")
	sources, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no skillkit sources in %s: %v", src, err)
	}
	pairs := map[string]string{} // template → source
	for _, s := range sources {
		if !strings.HasSuffix(s, "_test.go") {
			pairs[filepath.Join(dst, filepath.Base(s)+".tmpl")] = s
		}
	}
	pairs[filepath.Join(dst, "go.mod.tmpl")] = filepath.Join(src, "go.mod")
	pairs[filepath.Join(dst, "go.sum.tmpl")] = filepath.Join(src, "go.sum")
	pairs[filepath.Join("tinygo", "go.sum.tmpl")] = filepath.Join(src, "go.sum")
	for tmpl, s := range pairs {
		want, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		// Read through the embedded tree: that is what skill init writes.
		got, err := files.ReadFile(filepath.ToSlash(tmpl))
		if err != nil {
			t.Errorf("%s is missing (copy of %s): %s", tmpl, s, fix)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s: %s", tmpl, s, fix)
		}
	}
	copies, _ := filepath.Glob(filepath.Join(dst, "*.tmpl"))
	for _, c := range copies {
		if _, ok := pairs[c]; !ok {
			t.Errorf("%s has no source in %s: %s", c, src, fix)
		}
	}

	pdk := regexp.MustCompile(`(?m)github\.com/extism/go-pdk\s+(v\S+)`)
	skMod, _ := os.ReadFile(filepath.Join(src, "go.mod"))
	projMod, _ := files.ReadFile("tinygo/go.mod.tmpl")
	version := func(mod []byte) string {
		if m := pdk.FindSubmatch(mod); m != nil {
			return string(m[1])
		}
		return "nothing"
	}
	if got, want := version(projMod), version(skMod); got != want {
		t.Errorf("tinygo/go.mod.tmpl requires go-pdk %s, skillkit/go.mod %s: %s", got, want, fix)
	}
}
