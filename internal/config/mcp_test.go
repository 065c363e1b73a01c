package config

import (
	"strings"
	"testing"
)

// TestMCPApproval: [mcp] approval takes exactly the four askers, defaults to
// "elicit", and names the key when wrong.
func TestMCPApproval(t *testing.T) {
	for _, tc := range []struct {
		doc, want, err string
	}{
		{"", MCPApprovalElicit, ""},
		{"[mcp]\n", MCPApprovalElicit, ""},
		{"[mcp]\napproval = \"elicit\"\n", MCPApprovalElicit, ""},
		{"[mcp]\napproval = \"terminal\"\n", MCPApprovalTerminal, ""},
		{"[mcp]\napproval = \"web\"\n", MCPApprovalWeb, ""},
		{"[mcp]\napproval = \"deny\"\n", MCPApprovalDeny, ""},
		{"[mcp]\napproval = \"\"\n", "", `mcp.approval (line 2): "" must be "elicit", "terminal", "web" or "deny"`},
		{"[mcp]\napproval = \"Deny\"\n", "", `mcp.approval (line 2): "Deny" must be`},
		{"[mcp]\napproval = true\n", "", "mcp.approval"},
		{"[mcp]\nask = \"web\"\n", "", "mcp.ask"},
	} {
		c, err := Parse([]byte(tc.doc))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want it to contain %q", tc.doc, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.doc, err)
			continue
		}
		if c.MCP.Approval != tc.want {
			t.Errorf("%q: approval = %q, want %q", tc.doc, c.MCP.Approval, tc.want)
		}
	}
}
