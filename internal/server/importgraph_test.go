package server_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportGraph: the server holds only the gate. If server code could
// import the registry, the runtime or the host functions, it could run a
// skill without asking; this fails the moment any of them is reachable.
func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/buddy-run/buddy/"
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", mod+"internal/server").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	// The list is real: it holds the server and the gate it must use.
	for _, want := range []string{mod + "internal/server", mod + "internal/approval", mod + "internal/catalog"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps lacks %s: %v", want, deps)
		}
	}
	// Each with its subpackages; hostfns alone, since its leaf hostfns/kv
	// only declares what the store implements and runs nothing.
	forbidden := []string{"internal/registry/", "runtime/", "hostfns", "hostfns/fs/", "hostfns/http/"}
	for _, d := range deps {
		p, ok := strings.CutPrefix(d, mod)
		if !ok {
			continue
		}
		for _, f := range forbidden {
			if p == strings.TrimSuffix(f, "/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(p, f)) {
				t.Errorf("internal/server reaches %s: the ungated path to a skill", d)
			}
		}
	}
}
