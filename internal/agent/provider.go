package agent

import (
	"context"
	"encoding/json"
)

// Provider is an LLM: one streamed completion per call. Implementations live
// in internal/llm/... and are chosen by cmd/; the loop knows only this.
type Provider interface {
	// Stream sends req and calls onText with each piece of assistant text as
	// it arrives; it returns the whole response once the stream ends. An
	// error means the response is unusable (the turn ends with it).
	Stream(ctx context.Context, req Request, onText func(delta string)) (*Response, error)
}

// ProviderFunc adapts a function to Provider (fakes in tests).
type ProviderFunc func(ctx context.Context, req Request, onText func(string)) (*Response, error)

// Stream calls f.
func (f ProviderFunc) Stream(ctx context.Context, req Request, onText func(string)) (*Response, error) {
	return f(ctx, req, onText)
}

// Request is what the model is sent.
type Request struct {
	System   string
	Messages []Message
	Tools    []Tool
}

// Role of a message in the history.
type Role string

// The roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the history the model sees.
type Message struct {
	Role Role
	// Text of a user or assistant message.
	Text string
	// ToolCalls the assistant made (assistant messages).
	ToolCalls []ToolCall
	// A tool result answers the call with this id (tool messages).
	ToolCallID string
	ToolName   string
	Content    string // the result, or the error text
	IsError    bool
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments as the model wrote them (they may not be valid JSON).
	Arguments string `json:"arguments"`
}

// Tool is a skill offered to the model.
type Tool struct {
	Name        string
	Description string
	InputSchema map[string]any
}

// Response is a completed model response.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	// StopReason as the provider said it ("stop", "tool_calls", "end_turn",
	// "tool_use", "length", "max_tokens", ...).
	StopReason string
}

// schemaOrEmpty is a tool's input schema, or the empty object schema.
func schemaOrEmpty(s map[string]any) map[string]any {
	if s == nil {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return s
}

// SchemaJSON is the schema as JSON, for providers that send it raw.
func SchemaJSON(t Tool) json.RawMessage {
	b, err := json.Marshal(schemaOrEmpty(t.InputSchema))
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

// Schema is the tool's input schema, never nil.
func Schema(t Tool) map[string]any { return schemaOrEmpty(t.InputSchema) }
