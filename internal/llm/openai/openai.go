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
package openai

import (
	"context"
	"errors"
	"sort"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
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
}

var _ agent.Provider = (*Provider)(nil)

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
		option.WithHTTPClient(o.Client()), // caps each event and error body
	}
	return &Provider{client: sdk.NewClient(opts...), opts: o}, nil
}

// Stream implements agent.Provider.
func (p *Provider) Stream(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
	ctx, cancel := p.opts.CallContext(ctx)
	defer cancel()
	stream := p.client.Chat.Completions.NewStreaming(ctx, p.params(req))
	defer stream.Close()
	var (
		budget = p.opts.Budget()
		text   strings.Builder
		calls  = map[int64]*agent.ToolCall{}
		order  []int64
		finish string
		got    bool
		// at maps an upstream tool call index to the key of the call its
		// pieces belong to now (servers that number every call 0).
		at = map[int64]int64{}
	)
	for stream.Next() {
		chunk := stream.Current()
		got = true
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // one choice is asked for; ignore others
			}
			if d := ch.Delta.Content; d != "" {
				if err := budget.Text(len(d)); err != nil {
					return nil, err
				}
				text.WriteString(d)
				onText(d)
			}
			if n := unkept(ch.Delta); n > 0 {
				if err := budget.Reasoning(n); err != nil {
					return nil, err
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				idx, seen := at[tc.Index]
				if !seen {
					idx = tc.Index
				}
				c, ok := calls[idx]
				if ok && tc.ID != "" && c.ID != "" && tc.ID != c.ID {
					// A server that numbers every call 0: a new id is a
					// new call, and the pieces without an id that follow
					// are its own.
					idx = int64(len(order)) + 1<<32
					c, ok = nil, false
				}
				at[tc.Index] = idx
				if !ok {
					if err := budget.Call(); err != nil {
						return nil, err
					}
					c = &agent.ToolCall{}
					calls[idx] = c
					order = append(order, idx)
				}
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Function.Name != "" {
					// Names come whole; a few servers repeat them per chunk.
					if c.Name == "" || c.Name != tc.Function.Name {
						if err := budget.Arguments(c.Name+tc.Function.Name, len(tc.Function.Name)); err != nil {
							return nil, err
						}
						c.Name += tc.Function.Name
					}
				}
				if err := budget.Arguments(c.Name, len(tc.Function.Arguments)); err != nil {
					return nil, err
				}
				c.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		status, msg := 0, ""
		var apiErr *sdk.Error
		if errors.As(err, &apiErr) {
			status, msg = apiErr.StatusCode, apiErr.Message
		}
		return nil, llm.Upstream(api, ctx, err, status, msg, got)
	}
	if !got {
		return nil, llm.Upstream(api, ctx, errors.New("the stream ended without a single chunk"), 0, "", false)
	}
	if finish == "" {
		// Every OpenAI-compatible server ends a choice with a
		// finish_reason: without one, the answer was cut.
		return nil, llm.Upstream(api, ctx, llm.Incomplete("no finish_reason"), 0, "", false)
	}
	resp := &agent.Response{Text: text.String(), StopReason: finish}
	sort.SliceStable(order, func(i, j int) bool { return order[i] < order[j] })
	for _, idx := range order {
		c := calls[idx]
		if c.Name == "" {
			continue
		}
		resp.ToolCalls = append(resp.ToolCalls, *c)
	}
	return resp, nil
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
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleUser:
			params.Messages = append(params.Messages, sdk.UserMessage(m.Text))
		case agent.RoleAssistant:
			am := sdk.ChatCompletionAssistantMessageParam{}
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
						ID:       tc.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
					},
				})
			}
			params.Messages = append(params.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &am})
		case agent.RoleTool:
			params.Messages = append(params.Messages, sdk.ToolMessage(m.Content, m.ToolCallID))
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
