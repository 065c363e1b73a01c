package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layers is buddy's call path, top to bottom (docs/RATIONALE.md, "Project
// structure and call path"): a package imports only packages of the layers
// below its own, and of its own layer only where sameLayer allows. A package
// of the module that no layer names fails the test: each new package takes
// its place in the table.
var layers = []struct {
	name     string
	packages []string // import paths relative to the module; "x/" = x and what is under it
}{
	{"composition root", []string{"cmd/"}},
	{"front ends", []string{"internal/front/"}},
	{"scheduler", []string{"internal/scheduler"}},
	{"agent", []string{"internal/agent", "internal/llm/", "internal/budget"}},
	{"gate", []string{"internal/approval", "internal/audit"}},
	{"skills", []string{"internal/skills/"}},
	{"state and configuration", []string{"internal/store", "internal/config", "internal/catalog"}},
	{"runtime", []string{"runtime/"}},
	{"host functions", []string{"hostfns", "hostfns/fs", "hostfns/http"}},
	{"leaves", []string{"internal/base/", "internal/secrets", "hostfns/allow", "hostfns/kv", "builtins-wasm", "templates", "internal/proc/", "internal/testkit/"}},
}

// sameLayer are the imports allowed inside one layer (from → to).
var sameLayer = map[string][]string{
	"internal/llm":             {"internal/agent"},                 // a provider implements the agent's interface
	"internal/llm/openai":      {"internal/agent", "internal/llm"}, //
	"internal/llm/anthropic":   {"internal/agent", "internal/llm"}, //
	"internal/audit":           {"internal/approval"},              // the audit log records the gate's outcomes
	"internal/store":           {"internal/catalog"},               // the store keeps the catalog's state items
	"internal/skills/install":  {},                                 //
	"hostfns":                  {"hostfns/fs", "hostfns/http"},     // the host ABI over its gates
	"internal/llm/llmtest":     {"internal/agent", "internal/llm"}, // a test kit for providers
	"internal/budget":          {"internal/agent"},                 // the meter implements the agent's interface
	"internal/front/server":    {},                                 //
	"internal/front/chat":      {},                                 //
	"internal/front/mcpserver": {},                                 //
}

// layerOf is the layer index of a package (relative path), -1 if none.
func layerOf(p string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, q := range l.packages {
			if (p == strings.TrimSuffix(q, "/") || strings.HasSuffix(q, "/") && strings.HasPrefix(p, q)) && len(q) > bestLen {
				best, bestLen = i, len(q)
			}
		}
	}
	return best
}

// TestLayers: every import of every package of the module points down the
// call path (leaves import only leaves; front ends never reach the registry,
// the runtime or the host functions).
func TestLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/buddy-run/buddy/"
	out, err := exec.CommandContext(t.Context(), "go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from, ok := strings.CutPrefix(fields[0], mod)
		if !ok || strings.HasPrefix(from, "scripts/") {
			continue
		}
		lf := layerOf(from)
		if lf < 0 {
			t.Errorf("%s is in no layer: give it its place in the table (and in docs/RATIONALE.md)", from)
			continue
		}
		for _, imp := range fields[1:] {
			to, ok := strings.CutPrefix(imp, mod)
			if !ok {
				continue
			}
			checked++
			lt := layerOf(to)
			switch {
			case lt < 0:
				t.Errorf("%s imports %s, which is in no layer", from, to)
			case lt < lf:
				t.Errorf("%s (%s) imports %s (%s): an import up the call path", from, layers[lf].name, to, layers[lt].name)
			case lt == lf && layers[lf].name != "leaves" && !slices.Contains(sameLayer[from], to) &&
				!(strings.HasPrefix(to, from+"/") || strings.HasPrefix(from, to+"/")):
				t.Errorf("%s imports %s inside the %s layer: allow it in sameLayer, with why, or move one of them", from, to, layers[lf].name)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d imports checked: the go list output was not read", checked)
	}
}

// TestFrontEndsHoldOnlyTheGate: the front ends, the agent and the gate
// never reach — directly or through any package they import — the
// registry, the runtime or the host functions: the gate is the only way to
// a skill. (TestLayers lets a layer import any layer below it; this closes
// the skip over the gate.)
func TestFrontEndsHoldOnlyTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/buddy-run/buddy/"
	// hostfns alone, not its leaves kv and allow (interfaces and a
	// grammar the store and the configuration share).
	ungated := []string{"internal/skills/", "runtime/", "hostfns", "hostfns/fs/", "hostfns/http/"}
	for _, p := range []string{"internal/front/server", "internal/front/mcpserver", "internal/front/chat", "internal/agent",
		"internal/llm/openai", "internal/llm/anthropic", "internal/approval", "internal/audit"} {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", mod+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, mod+"internal/catalog") && p != "internal/front/chat" {
			t.Fatalf("go list -deps %s lacks internal/catalog: %v", p, deps)
		}
		for _, d := range deps {
			rel, ok := strings.CutPrefix(d, mod)
			if !ok {
				continue
			}
			for _, u := range ungated {
				if rel == strings.TrimSuffix(u, "/") || strings.HasSuffix(u, "/") && strings.HasPrefix(rel, u) {
					t.Errorf("%s reaches %s: an ungated path to a skill", p, rel)
				}
			}
		}
	}
}
