// Package builtins embeds buddy's built-in skills: the TinyGo-compiled .wasm of
// each directory of builtins-src/ and a copy of its skill.toml, produced by
// `make builtins` (scripts/build-builtins.sh). Building buddy never needs
// TinyGo; `make test` rebuilds these files and fails if they differ.
//
//	for _, b := range builtins.All() {
//		m, err := runtime.ParseManifest(b.Manifest)
//		...
//	}
package builtins

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.wasm *.skill.toml
var files embed.FS

// Builtin is one built-in skill.
type Builtin struct {
	Name     string
	Wasm     []byte
	Manifest []byte // skill.toml
}

// All returns the built-ins, sorted by name.
func All() []Builtin {
	names, _ := fs.Glob(files, "*.wasm")
	slices.Sort(names)
	out := make([]Builtin, 0, len(names))
	for _, n := range names {
		name := strings.TrimSuffix(n, ".wasm")
		if b, ok := Get(name); ok {
			out = append(out, b)
		}
	}
	return out
}

// Get returns the built-in called name.
func Get(name string) (Builtin, bool) {
	wasm, err := files.ReadFile(name + ".wasm")
	if err != nil {
		return Builtin{}, false
	}
	manifest, err := files.ReadFile(name + ".skill.toml")
	if err != nil {
		return Builtin{}, false
	}
	return Builtin{Name: name, Wasm: wasm, Manifest: manifest}, true
}

// Names lists the built-in skill names, sorted.
func Names() []string {
	var out []string
	for _, b := range All() {
		out = append(out, b.Name)
	}
	return out
}
