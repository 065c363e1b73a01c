package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// llamaCppOverflow is llama-server's answer to a prompt over its slot's
// window (tools/server, exceed_context_size_error).
const llamaCppOverflow = `{"error":{"code":400,"message":"request (4390 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4390,"n_ctx":4096}}`

func TestContextExceeded(t *testing.T) {
	nested, _ := json.Marshal(map[string]string{"error": llamaCppOverflow})
	for _, tc := range []struct {
		name           string
		status         int
		body           string
		match          bool
		says           string // in the error's text
		prompt, window int
	}{
		{name: "llama.cpp", status: 400, body: llamaCppOverflow, match: true,
			says: "HTTP 400: request (4390 tokens) exceeds the available context size (4096 tokens)", prompt: 4390, window: 4096},
		{name: "llama.cpp before late 2025", status: 400,
			body:  `{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}`,
			match: true, prompt: 14429, window: 8192},
		{name: "llama.cpp type only", status: 400, body: `{"error":{"code":400,"message":"too big","type":"exceed_context_size_error"}}`, match: true},
		{name: "llama.cpp, the answer reached the end of the window", status: 500,
			body: `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`, match: true},
		{name: "OpenAI", status: 400,
			body:  `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130511 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			match: true, prompt: 130511, window: 128000},
		{name: "OpenAI code only", status: 400, body: `{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":"context_length_exceeded"}}`, match: true},
		{name: "vLLM", status: 400,
			body:  `{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 0 output tokens and your prompt contains at least 4097 input tokens, for a total of at least 4097 tokens.","type":"BadRequestError","param":"input_tokens","code":400}}`,
			match: true, prompt: 4097, window: 4096},
		{name: "vLLM before 0.10", status: 400,
			body:  `{"object":"error","message":"This model's maximum context length is 6048 tokens. However, you requested 6616 tokens (568 in the messages, 6048 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
			match: true, window: 6048},
		{name: "vLLM engine", status: 400, body: `{"object":"error","message":"The decoder prompt (length 8825) is longer than the maximum model length of 8192. Make sure that max_model_len is no smaller than the number of text tokens.","type":"BadRequestError","code":400}`,
			match: true, prompt: 8825, window: 8192},
		{name: "Ollama 0.34 and later, llama-server's body nested", status: 400, body: string(nested), match: true,
			says: "request (4390 tokens) exceeds", prompt: 4390, window: 4096},
		{name: "Ollama 0.12", status: 400, body: `{"error":"the input length exceeds the context length"}`, match: true},
		{name: "LM Studio 0.4.21 event", body: `{"error":{"message":"Input does not fit in context length. The input has 31430 tokens, but the context length only supports 30000 tokens."},"message":"Input does not fit in context length. The input has 31430 tokens, but the context length only supports 30000 tokens."}`,
			match: true, says: "the server said: Input does not fit", prompt: 31430, window: 30000},
		{name: "LM Studio 0.4", status: 400, body: `{"error":"The number of tokens to keep from the initial prompt is greater than the context length. Try to load the model with a larger context length, or provide a shorter input"}`, match: true},
		{name: "LM Studio 0.3", status: 400, body: `{"error":"Trying to keep the first 15857 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."}`,
			match: true, window: 4096},
		{name: "Anthropic", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
			match: true, says: "prompt is too long", prompt: 208310, window: 200000},
		{name: "Anthropic, input and max_tokens", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 197626 + 21333 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`, match: true},
		{name: "plain text", status: 400, body: "This model's maximum context length is 2048 tokens", match: true, window: 2048},
		// Neighbours that must not match.
		{name: "another 400 in llama-server's envelope", status: 400, body: `{"error":{"code":400,"message":"Multimodal data provided, but model does not support multimodal requests.","type":"invalid_request_error"}}`},
		{name: "another 400 of OpenAI", status: 400, body: `{"error":{"message":"Invalid value for 'max_tokens': must be a positive integer.","type":"invalid_request_error","code":"invalid_value"}}`},
		{name: "a proxy's 413", status: 413, body: "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>"},
		{name: "Anthropic's request_too_large", status: 413, body: `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`},
		{name: "rate limited", status: 429, body: `{"error":{"message":"Rate limit reached for tokens per min","type":"tokens","code":"rate_limit_exceeded"}}`},
		{name: "empty", status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ContextExceeded("the endpoint", tc.status, []byte(tc.body))
			if (err != nil) != tc.match {
				t.Fatalf("ContextExceeded = %v, want a match: %v", err, tc.match)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, agent.ErrContextExceeded) || errs.KindOf(err) != errs.KindTooLarge {
				t.Errorf("%v: not ErrContextExceeded of kind too_large (%s)", err, errs.KindOf(err))
			}
			if !strings.HasPrefix(err.Error(), "the endpoint: the request does not fit the model's context window") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			var ce *ContextExceededError
			if !errors.As(err, &ce) || ce.PromptTokens != tc.prompt || ce.WindowTokens != tc.window {
				t.Errorf("figures %+v, want prompt %d window %d", ce, tc.prompt, tc.window)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, "invalid_request_error: Incorrect API key provided"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error: Overloaded"},
		{`{"error":"model 'llama9' not found"}`, "model 'llama9' not found"},
		{`{"object":"error","message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","param":null,"code":400}`, "BadRequestError: max_tokens must be at least 1, got -186."},
		{`{"detail":"Not Found"}`, "Not Found"},
		{`{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"]}]},"type":"invalid_request_error"}`,
			`invalid_request_error: [{"type":"extra_forbidden","loc":["body","stream_options"]}]`},
		{"<html>502 Bad Gateway</html>\n", "<html>502 Bad Gateway</html>"},
	} {
		if got := ErrorMessage([]byte(tc.body)); got != tc.want {
			t.Errorf("ErrorMessage(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// TestErrorAnswerKept: the client of Options.Client keeps each call's error
// answer, whatever its shape, gives the SDK the same bytes, and marks an
// answer about the context window not to be retried.
func TestErrorAnswerKept(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		noRetry bool
	}{
		{name: "overflow, 500", status: 500, body: `{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}`, noRetry: true},
		{name: "overflow, 400", status: 400, body: llamaCppOverflow, noRetry: true},
		{name: "another error", status: 503, body: `{"error":"loading model"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			ctx, answer := KeepErrorAnswer(t.Context())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			res, err := Options{}.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil || string(body) != tc.body {
				t.Errorf("the SDK reads %q, %v", body, err)
			}
			if status, kept := answer.Get(); status != tc.status || string(kept) != tc.body {
				t.Errorf("kept %d %q", status, kept)
			}
			if got := res.Header.Get("X-Should-Retry") == "false"; got != tc.noRetry {
				t.Errorf("X-Should-Retry %q", res.Header.Get("X-Should-Retry"))
			}
		})
	}
}

// TestErrorAnswerIsTheLastAttempts: an answer kept from an attempt the SDK
// retried is forgotten when the next attempt gets none.
func TestErrorAnswerIsTheLastAttempts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(500)
		fmt.Fprint(w, `{"error":"boom"}`)
	}))
	ctx, answer := KeepErrorAnswer(t.Context())
	client := Options{}.Client()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if status, _ := answer.Get(); status != 500 {
		t.Fatalf("kept %d", status)
	}
	srv.Close() // the next attempt is refused
	if _, err := client.Do(req.Clone(ctx)); err == nil {
		t.Fatal("a closed server answered")
	}
	if status, body := answer.Get(); status != 0 || body != nil {
		t.Errorf("kept %d %q from an earlier attempt", status, body)
	}
}
