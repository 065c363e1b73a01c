// Package builtins embeds buddy's built-in skills and channel adapters: the
// TinyGo-compiled .wasm of each directory of builtins-src/ and a copy of its
// skill.toml, produced by `make builtins` (scripts/build-builtins.sh).
// Building buddy never needs TinyGo; `make test` rebuilds these files and
// fails if they differ.
//
//	for _, b := range builtins.All() {         // the skills (tools), never the adapters
//		m, err := runtime.ParseManifest(b.Manifest)
//		...
//	}
//	tg, ok := builtins.Adapter("telegram")     // a channel adapter (docs/CHANNELS.md)
package builtins

import (
	"embed"
	"fmt"
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

// adapters are the built-in channel adapters: plugins buddy serve runs for
// [channels.NAME] (exports parse and render), never skills a model or a
// client can call.
var adapters = []string{"telegram"}

// IsAdapter reports whether name is a built-in channel adapter.
func IsAdapter(name string) bool { return slices.Contains(adapters, name) }

// Adapter returns the built-in channel adapter called name.
func Adapter(name string) (Builtin, bool) {
	if !IsAdapter(name) {
		return Builtin{}, false
	}
	return load(name)
}

// All returns the built-in skills, sorted by name (the channel adapters are
// not skills: see Adapter).
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

// Get returns the built-in skill called name.
func Get(name string) (Builtin, bool) {
	if IsAdapter(name) {
		return Builtin{}, false
	}
	return load(name)
}

func load(name string) (Builtin, bool) {
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

// The memory built-ins share one buddy.toml section and one namespace.
const (
	// MemorySection is the buddy.toml section that enables the memory
	// built-ins ([skills.memory]); no skill may take its name.
	MemorySection = "memory"
	// MemoryNamespace is the memory namespace they share.
	MemoryNamespace = "memory"
)

// memory are the memory built-ins.
var memory = []string{"memory_read", "memory_write", "remember", "recall"}

// IsMemory reports whether name is one of the memory built-ins.
func IsMemory(name string) bool { return slices.Contains(memory, name) }

// Reserved says why no other skill may be called name — it is a built-in's
// name, or the memory built-ins' section — or "" when the name is free. The
// registry, the installer, `skill run FILE.wasm` and `skill init` all refuse
// a reserved name with this text, as forbidden.
func Reserved(name string) string {
	if _, ok := Get(name); ok {
		return fmt.Sprintf("%q is the name of a built-in skill, which no other skill may shadow: pick another name (in skill.toml for a module)", name)
	}
	if IsAdapter(name) {
		return fmt.Sprintf("%q is the name of a built-in channel adapter, which no skill may shadow: pick another name (in skill.toml for a module)", name)
	}
	if name == MemorySection {
		return fmt.Sprintf("%q is reserved for the memory built-ins' section in buddy.toml: pick another name (in skill.toml for a module)", name)
	}
	return ""
}
