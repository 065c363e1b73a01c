// Package openai is an agent.Provider for any OpenAI-compatible Chat
// Completions endpoint (OpenAI, Ollama, llama.cpp's server, vLLM, LM Studio),
// streamed, with tool calls, on the official SDK.
//
//	p, err := openai.New(openai.Options{BaseURL: "http://127.0.0.1:11434/v1", Model: "llama3.2"})
//	resp, err := p.Stream(ctx, req, func(d string) { fmt.Print(d) })
//
// Tool calls may arrive in pieces across chunks, several per response, in
// one chunk (servers that do not stream them), or with a finish_reason of
// "stop" rather than "tool_calls": all are accepted. What the server sends
// is capped as it arrives (llm.Budget, llm.Options.Client): past a cap the
// call fails with an *llm.TooLargeError.
//
// Every request asks for the server's token counts (stream_options
// include_usage; a server that refuses the option is asked again without it,
// and never again); a Response carries them in Usage. A refusal for a
// request that does not fit the model's window is an
// *llm.ContextExceededError. DiscoverWindow (window.go) asks the server for
// the model's context window.
package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/llm"
)

// api names the endpoint in errors.
const api = "the OpenAI-compatible endpoint"

// Options configure the provider (shared by every provider: llm.Options).
type Options = llm.Options

// Provider talks to one endpoint and model.
type Provider struct {
	client sdk.Client
	opts   Options
	// noUsage is set once the server refused stream_options: it is not
	// sent again.
	noUsage atomic.Bool
	// probeTimeout bounds each question DiscoverWindow asks.
	probeTimeout time.Duration
}

var (
	_ agent.Provider         = (*Provider)(nil)
	_ agent.WindowDiscoverer = (*Provider)(nil)
)

// New returns a provider.
func New(o Options) (*Provider, error) {
	o, err := o.Check("openai")
	if err != nil {
		return nil, err
	}
	key := o.APIKey
	if key == "" {
		key = "none" // local servers ignore it; the SDK wants one
	}
	opts := []option.RequestOption{
		option.WithBaseURL(o.BaseURL),
		option.WithAPIKey(key),
		option.WithMaxRetries(o.MaxRetries),
		option.WithHTTPClient(o.AuthClient("Authorization", "Bearer ")), // caps each event and error body; the key from KeyFunc
	}
	return &Provider{client: sdk.NewClient(opts...), opts: o, probeTimeout: probeTimeout}, nil
}

// Stream implements agent.Provider.
func (p *Provider) Stream(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
	ctx, cancel := p.opts.CallContext(ctx)
	defer cancel()
	params := p.params(req)
	asked := !p.noUsage.Load()
	if asked {
		params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	}
	resp, refused, err := p.stream(ctx, params, onText)
	if refused && asked {
		// A server that validates every field (Mistral's API answers 422
		// "extra_forbidden" for stream_options) is asked again without it:
		// no usage figures rather than no answer.
		p.noUsage.Store(true)
		params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{}
		resp, _, err = p.stream(ctx, params, onText)
	}
	return resp, err
}

// stream makes one call; refused tells that the server refused the request
// for its stream_options.
func (p *Provider) stream(ctx context.Context, params sdk.ChatCompletionNewParams, onText func(string)) (resp *agent.Response, refused bool, err error) {
	ctx, answer := llm.KeepErrorAnswer(ctx)
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var (
		budget = p.opts.Budget()
		text   strings.Builder
		calls  = map[int64]*agent.ToolCall{}
		order  []int64
		finish string
		got    bool
		usage  agent.Usage
		// at maps an upstream tool call index to the key of the call its
		// pieces belong to now (servers that number every call 0).
		at = map[int64]int64{}
	)
	for stream.Next() {
		chunk := stream.Current()
		got = true
		if chunk.JSON.Usage.Valid() {
			// The last chunk (choices empty) when include_usage is asked;
			// some servers send it unasked, or beside the finish_reason.
			u := chunk.Usage
			usage = agent.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
				CachedTokens: u.PromptTokensDetails.CachedTokens, Reported: true}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // one choice is asked for; ignore others
			}
			if d := ch.Delta.Content; d != "" {
				if err := budget.Text(len(d)); err != nil {
					return nil, false, err
				}
				text.WriteString(d)
				onText(d)
			}
			if n := unkept(ch.Delta); n > 0 {
				if err := budget.Reasoning(n); err != nil {
					return nil, false, err
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				idx, seen := at[tc.Index]
				if !seen {
					idx = tc.Index
				}
				c, ok := calls[idx]
				if ok && tc.ID != "" && c.ProviderID != "" && tc.ID != c.ProviderID {
					// A server that numbers every call 0: a new id is a
					// new call, and the pieces without an id that follow
					// are its own.
					idx = int64(len(order)) + 1<<32
					c, ok = nil, false
				}
				at[tc.Index] = idx
				if !ok {
					if err := budget.Call(); err != nil {
						return nil, false, err
					}
					c = &agent.ToolCall{}
					calls[idx] = c
					order = append(order, idx)
				}
				if tc.ID != "" {
					c.ProviderID = tc.ID
				}
				if tc.Function.Name != "" {
					// Names come whole; a few servers repeat them per chunk.
					if c.Name == "" || c.Name != tc.Function.Name {
						if err := budget.Arguments(c.Name+tc.Function.Name, len(tc.Function.Name)); err != nil {
							return nil, false, err
						}
						c.Name += tc.Function.Name
					}
				}
				if err := budget.Arguments(c.Name, len(tc.Function.Arguments)); err != nil {
					return nil, false, err
				}
				c.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, refusedStreamOptions(answer), p.failure(ctx, err, answer, got)
	}
	if !got {
		return nil, false, llm.Upstream(api, ctx, errors.New("the stream ended without a single chunk"), 0, "", false)
	}
	if finish == "" {
		// Every OpenAI-compatible server ends a choice with a
		// finish_reason: without one, the answer was cut.
		return nil, false, llm.Upstream(api, ctx, llm.Incomplete("no finish_reason"), 0, "", false)
	}
	resp = &agent.Response{Text: text.String(), StopReason: finish, Usage: usage}
	sort.SliceStable(order, func(i, j int) bool { return order[i] < order[j] })
	for _, idx := range order {
		c := calls[idx]
		if c.Name == "" {
			continue
		}
		resp.ToolCalls = append(resp.ToolCalls, *c)
	}
	llm.ProviderIDs(resp.ToolCalls)
	return resp, false, nil
}

// failure is the error of a call the SDK ended with err: a request too
// large for the model's window (an HTTP error answer or an error event
// inside the stream, in any server's words), another HTTP error answer
// (its body read whatever its shape), or an upstream failure.
func (p *Provider) failure(ctx context.Context, err error, answer *llm.ErrorAnswer, got bool) error {
	status, body := answer.Get()
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		// An error event after a 200: {"error": …} in a data line.
		status, body, got = 0, se.Event.Data, false
		err = fmt.Errorf("the server sent an error event: %s", llm.ErrorMessage(body))
	}
	if ctx.Err() == nil {
		if ce := llm.ContextExceeded(api, status, body); ce != nil {
			return ce
		}
	}
	if status != 0 {
		return llm.Upstream(api, ctx, err, status, llm.ErrorMessage(body), got)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return llm.Upstream(api, ctx, err, apiErr.StatusCode, apiErr.Message, got)
	}
	return llm.Upstream(api, ctx, err, 0, "", got)
}

// refusedStreamOptions tells whether an error answer refuses the request
// for its stream_options (Mistral's API: 422 extra_forbidden,
// openai/openai-agents-python#442; Azure OpenAI with data_sources: 400
// "Validation error at #/stream_options: Extra inputs are not permitted",
// openai/openai-python#2296).
func refusedStreamOptions(answer *llm.ErrorAnswer) bool {
	status, body := answer.Get()
	return (status == 400 || status == 422) && bytes.Contains(body, []byte("stream_options"))
}

// unkept is the size of the text a delta carries that is neither shown nor
// kept: a refusal, and the reasoning some servers stream beside the content
// (as reasoning_content or reasoning, depending on the server). It counts
// against a budget of its own all the same.
func unkept(d sdk.ChatCompletionChunkChoiceDelta) int {
	n := len(d.Refusal)
	for _, k := range []string{"reasoning_content", "reasoning"} {
		if f, ok := d.JSON.ExtraFields[k]; ok {
			n += len(f.Raw())
		}
	}
	return n
}

// params builds the request body.
func (p *Provider) params(req agent.Request) sdk.ChatCompletionNewParams {
	params := sdk.ChatCompletionNewParams{Model: shared.ChatModel(p.opts.Model)}
	var ids llm.CallIDs // the server's own ids for calls and results
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleUser:
			params.Messages = append(params.Messages, sdk.UserMessage(m.Text))
		case agent.RoleAssistant:
			am := sdk.ChatCompletionAssistantMessageParam{}
			ids.Calls()
			if m.Text != "" || len(m.ToolCalls) == 0 {
				am.Content.OfString = sdk.String(m.Text)
			}
			for _, tc := range m.ToolCalls {
				args := tc.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				am.ToolCalls = append(am.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       ids.Call(tc),
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
					},
				})
			}
			params.Messages = append(params.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &am})
		case agent.RoleTool:
			params.Messages = append(params.Messages, sdk.ToolMessage(m.Content, ids.Result(m.ToolCallID)))
		}
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: sdk.String(t.Description),
			Parameters:  shared.FunctionParameters(agent.Schema(t)),
		}))
	}
	if p.opts.Temperature != nil {
		params.Temperature = sdk.Float(*p.opts.Temperature)
	}
	if p.opts.MaxTokens > 0 {
		params.MaxTokens = sdk.Int(p.opts.MaxTokens)
	}
	return params
}
