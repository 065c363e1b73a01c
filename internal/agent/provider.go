package agent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
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
	// ID is buddy's id of the call (call_id in frames and the store).
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments as the model wrote them (they may not be valid JSON).
	Arguments string `json:"arguments"`
	// ProviderID is the provider's own id of the call, sent back with its
	// result: some servers validate their own format (Mistral's nine
	// characters via vLLM). A provider fills it in a Response, and makes one
	// up only when the server sent none (SynthesizeID).
	ProviderID string `json:"provider_id,omitempty"`
}

// Tool is a skill offered to the model.
type Tool struct {
	Name        string
	Description string
	InputSchema map[string]any
}

// Usage is what one request cost, in tokens, as the provider reported it.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	// CachedTokens are prompt tokens served from the provider's cache
	// (OpenAI cached_tokens, Anthropic cache_read_input_tokens); counted in
	// PromptTokens too.
	CachedTokens int64
	// Reported is false when the server sent no figures.
	Reported bool
}

// ErrContextExceeded is wrapped (with errs.ErrTooLarge) by a provider's
// error when the server refused a request for not fitting the model's
// context window: llama.cpp's "exceeds the available context size", OpenAI's
// context_length_exceeded, vLLM's "maximum context length", Anthropic's
// "prompt is too long".
var ErrContextExceeded = errors.New("the request exceeds the model's context window")

// ContextFigures is implemented by a context-exceeded error that carries
// the server's own figures: the refused prompt's tokens and the model's
// window (0 for what the server did not say). The loop learns from them.
type ContextFigures interface {
	ContextFigures() (prompt, window int)
}

// Window is a model's context window as a provider learned it.
type Window struct {
	Tokens int
	// Source says where the figure comes from ("llama.cpp /props n_ctx",
	// "Ollama /api/show num_ctx", "known model", ...).
	Source string
}

// WindowDiscoverer is implemented by providers that can ask their server
// for the model's context window.
type WindowDiscoverer interface {
	// DiscoverWindow asks; an error (or Tokens 0) means it could not say.
	DiscoverWindow(ctx context.Context) (Window, error)
}

// SynthesizeID makes a provider-style tool-call id for a call the server
// sent none for: nine letters and digits, a format every server accepts
// (Mistral's is the strictest). n numbers the calls of one response.
func SynthesizeID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [9]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	b[8] = alphabet[n%len(alphabet)]
	return string(b[:])
}

// Response is a completed model response.
type Response struct {
	Text      string
	ToolCalls []ToolCall
	// StopReason as the provider said it ("stop", "tool_calls", "end_turn",
	// "tool_use", "length", "max_tokens", ...).
	StopReason string
	// Usage is what the request cost.
	Usage Usage
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
