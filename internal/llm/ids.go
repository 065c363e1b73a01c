package llm

import "github.com/buddy-run/buddy/internal/agent"

// Tool calls go back to the server under the server's own ids: several
// OpenAI-compatible servers check the ids of the calls and results they are
// sent against their own format (Mistral's nine letters and digits, via
// vLLM), and a result must answer exactly one call.

// ProviderIDs gives every call of one answer a ProviderID the server can
// take back: the id the server sent, or, when it sent none or the same id
// for an earlier call of the answer, one made up with agent.SynthesizeID.
// ToolCall.ID stays for the agent loop (buddy's own id).
func ProviderIDs(calls []agent.ToolCall) {
	seen := make(map[string]bool, len(calls))
	for i := range calls {
		id := calls[i].ProviderID
		for id == "" || seen[id] {
			id = agent.SynthesizeID(i)
		}
		seen[id] = true
		calls[i].ProviderID = id
	}
}

// CallIDs translates the ids of a history's tool calls and results into
// the ids the server gave them. A request is built in order: Calls for each
// assistant message's calls, then Result for each result that follows.
//
//	var ids llm.CallIDs
//	for _, tc := range m.ToolCalls { id := ids.Call(tc) ... }   // assistant
//	id := ids.Result(m.ToolCallID)                              // tool
type CallIDs struct {
	wire map[string]string // buddy's id -> the provider's, for the last assistant message
}

// Call is the id tc goes back to the server with: its ProviderID, or its ID
// for a call stored before provider ids were kept. The first call of an
// assistant message forgets the previous message's calls.
func (c *CallIDs) Call(tc agent.ToolCall) string {
	id := tc.ProviderID
	if id == "" {
		id = tc.ID
	}
	if c.wire == nil {
		c.wire = map[string]string{}
	}
	if tc.ID != "" {
		c.wire[tc.ID] = id
	}
	return id
}

// Calls starts a new assistant message's calls.
func (c *CallIDs) Calls() { c.wire = nil }

// Result is the id a tool result goes back with: the wire id of the call of
// the last assistant message whose ID it names, else the id as it is (the
// agent loop may already have put the provider's id there).
func (c *CallIDs) Result(toolCallID string) string {
	if id, ok := c.wire[toolCallID]; ok {
		return id
	}
	return toolCallID
}
