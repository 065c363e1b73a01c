package catalog_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestFrontEndsHoldOnlyTheGate: a front end holds the approval gate, never
// the ungated catalog. If the WebSocket server, the MCP server or the agent
// loop could import the registry, the runtime or the host functions, it
// could run a skill without asking; this fails the moment one is reachable.
func TestFrontEndsHoldOnlyTheGate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/buddy-run/buddy/"
	// Each with its subpackages ("x/"), or alone ("x"): hostfns alone, since
	// its leaf hostfns/kv only declares what the store implements.
	ungated := []string{"internal/registry/", "runtime/", "hostfns", "hostfns/fs/", "hostfns/http/"}
	tests := []struct {
		pkg       string
		want      []string // the list is real: it holds these
		forbidden []string
	}{
		{"internal/server", []string{mod + "internal/approval", mod + "internal/catalog"}, ungated},
		{"internal/mcpserver", []string{mod + "internal/approval", mod + "internal/catalog", "github.com/modelcontextprotocol/go-sdk/mcp"},
			append(slices.Clone(ungated), "internal/store/", "internal/server/")},
		{"internal/agent", []string{mod + "internal/catalog"}, ungated},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", mod+tt.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			for _, want := range append([]string{mod + tt.pkg}, tt.want...) {
				if !slices.Contains(deps, want) {
					t.Fatalf("go list -deps lacks %s: %v", want, deps)
				}
			}
			for _, d := range deps {
				p, ok := strings.CutPrefix(d, mod)
				if !ok {
					continue
				}
				for _, f := range tt.forbidden {
					if p == strings.TrimSuffix(f, "/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(p, f)) {
						t.Errorf("%s reaches %s: the ungated path to a skill", tt.pkg, d)
					}
				}
			}
		})
	}
}
