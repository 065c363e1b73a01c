package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// ContextExceededError is a server's refusal of a request that does not fit
// the model's context window. It matches errs.ErrTooLarge and
// agent.ErrContextExceeded: the agent loop compacts the conversation and
// tries again.
type ContextExceededError struct {
	API     string // the endpoint, as in Upstream's errors
	Status  int    // the HTTP status; 0 for an error event inside a stream
	Message string // the server's own words, cut
	// PromptTokens and WindowTokens are the figures the server gave, 0 when
	// it gave none (llama.cpp's n_prompt_tokens and n_ctx, "maximum context
	// length is N tokens", "N tokens > M maximum", ...).
	PromptTokens int
	WindowTokens int
}

func (e *ContextExceededError) Error() string {
	said := e.Message
	if e.Status != 0 {
		said = fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%s: the request does not fit the model's context window (the server said: %s)", e.API, said)
}

// ContextFigures implements agent.ContextFigures.
func (e *ContextExceededError) ContextFigures() (prompt, window int) {
	return e.PromptTokens, e.WindowTokens
}

var _ agent.ContextFigures = (*ContextExceededError)(nil)

// Is matches errs.ErrTooLarge and agent.ErrContextExceeded.
func (e *ContextExceededError) Is(target error) bool {
	return target == errs.ErrTooLarge || target == agent.ErrContextExceeded
}

// Each server says "this request does not fit the window" in its own words.
// Matched case-insensitively in the message (and, for servers that nest a
// whole error body in it, in the body); each phrase names where it was read.
var overflowPhrases = []string{
	// llama.cpp's llama-server, a prompt over the slot's n_ctx (type
	// exceed_context_size_error, HTTP 400): "request (4390 tokens) exceeds the
	// available context size (4096 tokens), try increasing it"; before late
	// 2025 "the request exceeds the available context size. try increasing
	// the context size or enable context shift" (ggml-org/llama.cpp#15780,
	// #19774). Ollama 0.34 and later return the same text, its whole body
	// nested as a string in its own {"error": "..."}.
	"exceeds the available context size",
	// llama-server (and LM Studio's llama.cpp and MLX engines) when the answer
	// runs into the end of the window, HTTP 500 type server_error or an
	// error event after 200: "Context size has been exceeded."
	// (ggml-org/llama.cpp#19774, lmstudio-bug-tracker#2339).
	"context size has been exceeded",
	// OpenAI ("This model's maximum context length is 128000 tokens. However,
	// your messages resulted in …", code context_length_exceeded) and vLLM,
	// HTTP 400 type BadRequestError ("This model's maximum context length is
	// 4096 tokens. However, you requested …"; "'max_tokens' or
	// 'max_completion_tokens' is too large: 2000. This model's maximum
	// context length is 4096 tokens and your request has 2104 input tokens").
	"maximum context length",
	// vLLM's engine: "The decoder prompt (length 8825) is longer than the
	// maximum model length of 8192."
	"longer than the maximum model length",
	// Ollama 0.12: {"error":"the input length exceeds the context length"}.
	"input length exceeds the context length",
	// LM Studio 0.4.21 and later, an error event after 200: "Input does not
	// fit in context length. The input has 31430 tokens, but the context
	// length only supports 30000 tokens." (lmstudio-bug-tracker#2322).
	"does not fit in context length",
	// LM Studio 0.4: "The number of tokens to keep from the initial prompt is
	// greater than the context length." (lmstudio-bug-tracker#2205).
	"tokens to keep from the initial prompt is greater than the context length",
	// LM Studio 0.3: "Trying to keep the first 15857 tokens when context the
	// overflows. However, the model is loaded with context length of only
	// 4096 tokens, which is not enough." (lmstudio-bug-tracker#237, #546).
	"when context the overflows",
	// LM Studio 0.4.6: "Cannot truncate prompt with n_keep (15028) >= n_ctx
	// (7424)" (anomalyco/opencode#11141).
	"cannot truncate prompt with n_keep",
	// Anthropic, HTTP 400 invalid_request_error: "prompt is too long: 208310
	// tokens > 200000 maximum", and "input length and `max_tokens` exceed
	// context limit: 197626 + 21333 > 200000, decrease input length or
	// `max_tokens` and try again" (anthropics/claude-code#3012).
	"prompt is too long",
	"exceed context limit",
	// OpenAI's Responses API and some proxies put the code in the text.
	"context_length_exceeded",
}

// Structured marks, in the error object itself.
const (
	llamaCppOverflowType = "exceed_context_size_error" // llama.cpp's error.type
	openAIOverflowCode   = "context_length_exceeded"   // OpenAI's error.code
)

// ContextExceeded returns a *ContextExceededError when an error answer says
// the request does not fit the model's context window, else nil. status is
// the HTTP status (0 for an error event inside a 200 stream); body is the
// error body, or the data of the error event, in any of the shapes servers
// use ({"error":{…}}, {"error":"…"}, {"message":…}, plain text).
func ContextExceeded(api string, status int, body []byte) error {
	if len(body) == 0 {
		return nil
	}
	e := parseError(body)
	hit := e.typ == llamaCppOverflowType || e.code == openAIOverflowCode
	text := strings.ToLower(e.message)
	if e.message == "" {
		text = strings.ToLower(string(body))
	}
	for _, p := range overflowPhrases {
		if hit {
			break
		}
		hit = strings.Contains(text, p)
	}
	if !hit {
		return nil
	}
	msg := e.message
	if msg == "" {
		msg = string(body)
	}
	ce := &ContextExceededError{API: api, Status: status, Message: clip(msg, 300),
		PromptTokens: e.promptTokens, WindowTokens: e.window}
	figures(ce, msg)
	return ce
}

// ErrorMessage is the server's own words in an error body of any shape:
// error.message (with error.type before it when there is one), a string
// error, a top-level message or detail, else the body itself.
func ErrorMessage(body []byte) string {
	e := parseError(body)
	switch {
	case e.message != "" && e.typ != "" && !strings.HasPrefix(e.message, e.typ):
		return e.typ + ": " + e.message
	case e.message != "":
		return e.message
	}
	return strings.TrimSpace(string(body))
}

// apiError is what parseError reads of an error body.
type apiError struct {
	message, typ, code   string
	promptTokens, window int
}

// parseError reads the error object of body: {"error":{"message","type",
// "code",...}} (OpenAI, llama.cpp, vLLM since 0.10, Anthropic's
// {"type":"error","error":{…}}), {"error":"…"} (Ollama's own API, LM Studio),
// {"object":"error","message":…} (vLLM before 0.10), {"detail":…}
// (FastAPI). A message that is itself an error body (Ollama nesting
// llama-server's) is read through.
func parseError(body []byte) apiError {
	var e apiError
	var top struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &top) != nil {
		return e
	}
	obj := top
	var inner struct {
		Message       json.RawMessage `json:"message"`
		Type          json.RawMessage `json:"type"`
		Code          json.RawMessage `json:"code"`
		NPromptTokens int             `json:"n_prompt_tokens"`
		NCtx          int             `json:"n_ctx"`
	}
	switch {
	case len(top.Error) > 0 && top.Error[0] == '{' && json.Unmarshal(top.Error, &inner) == nil:
		obj.Message, obj.Type, obj.Code = inner.Message, inner.Type, inner.Code
		e.promptTokens, e.window = inner.NPromptTokens, inner.NCtx
	case len(top.Error) > 0 && top.Error[0] == '"':
		obj.Message, obj.Type, obj.Code = top.Error, nil, nil
	case len(top.Message) == 0:
		obj.Message = top.Detail
	}
	e.message = scalar(obj.Message)
	e.typ = scalar(obj.Type)
	e.code = scalar(obj.Code)
	if nested := strings.TrimSpace(e.message); strings.HasPrefix(nested, "{") {
		if n := parseError([]byte(nested)); n.message != "" {
			if n.typ == "" {
				n.typ = e.typ
			}
			return n
		}
	}
	return e
}

// scalar is a JSON string's text, a number's digits, or the raw JSON of
// anything else (a message given as an object, as Mistral's 422s do).
func scalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	return string(raw)
}

// The figures in the servers' words, when the body gave none as fields.
var (
	windowRe = []*regexp.Regexp{
		regexp.MustCompile(`maximum context length is (\d+)`),
		regexp.MustCompile(`available context size \((\d+) tokens\)`),
		regexp.MustCompile(`tokens > (\d+) maximum`),
		regexp.MustCompile(`maximum model length of (\d+)`),
		regexp.MustCompile(`context length only supports (\d+)`),
		regexp.MustCompile(`context length of only (\d+)`),
	}
	promptRe = []*regexp.Regexp{
		regexp.MustCompile(`^request \((\d+) tokens\)`),
		regexp.MustCompile(`prompt is too long: (\d+) tokens`),
		regexp.MustCompile(`prompt contains at least (\d+) input tokens`),
		regexp.MustCompile(`messages resulted in (\d+) tokens`),
		regexp.MustCompile(`prompt \(length (\d+)\)`),
		regexp.MustCompile(`the input has (\d+) tokens`),
	}
)

func figures(ce *ContextExceededError, msg string) {
	lower := strings.ToLower(msg)
	first := func(res []*regexp.Regexp) int {
		for _, re := range res {
			if m := re.FindStringSubmatch(lower); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil {
					return n
				}
			}
		}
		return 0
	}
	if ce.WindowTokens == 0 {
		ce.WindowTokens = first(windowRe)
	}
	if ce.PromptTokens == 0 {
		ce.PromptTokens = first(promptRe)
	}
}
