package llm

import (
	"fmt"
	"testing"

	"github.com/buddy-run/buddy/internal/agent"
)

func TestProviderIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string // the servers' ids
		keep []bool   // which stay as the server gave them
	}{
		{name: "as given", in: []string{"call_abc", "D681PevKs", "toolu_01A"}, keep: []bool{true, true, true}},
		{name: "none given", in: []string{"", ""}, keep: []bool{false, false}},
		{name: "one id for every call", in: []string{"call_0", "call_0", "call_0"}, keep: []bool{true, false, false}},
		{name: "a made-up id never takes a given one", in: []string{"", "x"}, keep: []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]agent.ToolCall, len(tc.in))
			for i, id := range tc.in {
				calls[i] = agent.ToolCall{ProviderID: id, Name: "now"}
			}
			ProviderIDs(calls)
			seen := map[string]bool{}
			for i, c := range calls {
				if seen[c.ProviderID] || c.ProviderID == "" {
					t.Errorf("call %d: ProviderID %q empty or not unique", i, c.ProviderID)
				}
				seen[c.ProviderID] = true
				if kept := c.ProviderID == tc.in[i]; kept != tc.keep[i] {
					t.Errorf("call %d: %q from %q, kept %v", i, c.ProviderID, tc.in[i], kept)
				}
				if !tc.keep[i] && len(c.ProviderID) != 9 {
					t.Errorf("call %d: made-up %q is not nine characters", i, c.ProviderID)
				}
			}
		})
	}
}

func TestCallIDs(t *testing.T) {
	msgs := []agent.Message{
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c_1", ProviderID: "D681PevKs"}, {ID: "c_2"}}},
		{Role: agent.RoleTool, ToolCallID: "c_1"},
		{Role: agent.RoleTool, ToolCallID: "c_2"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c_3", ProviderID: "call_0"}}},
		{Role: agent.RoleTool, ToolCallID: "call_0"}, // the loop put the provider's id there itself
		{Role: agent.RoleTool, ToolCallID: "c_1"},    // a call of an earlier message: as it is
	}
	var ids CallIDs
	var got []string
	for _, m := range msgs {
		switch m.Role {
		case agent.RoleAssistant:
			ids.Calls()
			for _, tc := range m.ToolCalls {
				got = append(got, ids.Call(tc))
			}
		case agent.RoleTool:
			got = append(got, ids.Result(m.ToolCallID))
		}
	}
	if want := "[D681PevKs c_2 D681PevKs c_2 call_0 call_0 c_1]"; fmt.Sprint(got) != want {
		t.Errorf("ids %v, want %s", got, want)
	}
}
