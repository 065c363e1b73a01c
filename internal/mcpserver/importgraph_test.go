package mcpserver_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportGraph: the MCP server holds only the gate. If it could import
// the registry, the runtime or the host functions, a tools/call could run a
// skill without asking; this fails the moment any of them is reachable.
func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/buddy-run/buddy/"
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", mod+"internal/mcpserver").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{mod + "internal/mcpserver", mod + "internal/approval", mod + "internal/catalog", "github.com/modelcontextprotocol/go-sdk/mcp"} {
		if !slices.Contains(deps, want) {
			t.Fatalf("go list -deps lacks %s: %v", want, deps)
		}
	}
	forbidden := []string{"internal/registry/", "runtime/", "hostfns", "hostfns/fs/", "hostfns/http/", "internal/store/", "internal/server/"}
	for _, d := range deps {
		p, ok := strings.CutPrefix(d, mod)
		if !ok {
			continue
		}
		for _, f := range forbidden {
			if p == strings.TrimSuffix(f, "/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(p, f)) {
				t.Errorf("internal/mcpserver reaches %s: the ungated path to a skill", d)
			}
		}
	}
}
