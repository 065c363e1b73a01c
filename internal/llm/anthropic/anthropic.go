// Package anthropic is an agent.Provider for the Anthropic Messages API,
// streamed, with tool_use / tool_result blocks, on the official SDK. What the
// server sends is capped as it arrives (llm.Budget, llm.Options.Client):
// past a cap the call fails with an *llm.TooLargeError. A Response carries
// the token counts of message_start and message_delta in Usage; "prompt is
// too long" is an *llm.ContextExceededError; DiscoverWindow answers from
// llm.KnownWindow.
//
//	p, err := anthropic.New(anthropic.Options{BaseURL: "https://api.anthropic.com", Model: "claude-sonnet-4-5", APIKey: key})
//	resp, err := p.Stream(ctx, req, func(d string) { fmt.Print(d) })
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/llm"
)

// api names the endpoint in errors.
const api = "the Anthropic Messages endpoint"

// DefaultMaxTokens is sent when [provider] max_tokens is not set: the API
// requires a value.
const DefaultMaxTokens = 4096

// Options configure the provider (shared by every provider: llm.Options).
type Options = llm.Options

// Provider talks to one endpoint and model.
type Provider struct {
	client sdk.Client
	opts   Options
}

var (
	_ agent.Provider         = (*Provider)(nil)
	_ agent.WindowDiscoverer = (*Provider)(nil)
)

// DiscoverWindow implements agent.WindowDiscoverer from buddy's table of
// known models (the Messages API says no model's window).
func (p *Provider) DiscoverWindow(context.Context) (agent.Window, error) {
	if n, ok := llm.KnownWindow(p.opts.Model); ok {
		return agent.Window{Tokens: n, Source: llm.KnownWindowSource}, nil
	}
	return agent.Window{}, fmt.Errorf("no context window for model %q: it is not one buddy knows", p.opts.Model)
}

// New returns a provider.
func New(o Options) (*Provider, error) {
	o, err := o.Check("anthropic")
	if err != nil {
		return nil, err
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	opts := []option.RequestOption{
		option.WithBaseURL(o.BaseURL),
		option.WithAPIKey(o.APIKey),
		option.WithMaxRetries(o.MaxRetries),
		option.WithHTTPClient(o.AuthClient("X-Api-Key", "")), // caps each event and error body; the key from KeyFunc
	}
	return &Provider{client: sdk.NewClient(opts...), opts: o}, nil
}

// block is one content block being streamed.
type block struct {
	kind  string // text | tool_use | other
	id    string
	name  string
	text  strings.Builder
	input strings.Builder // tool_use: partial_json pieces
	start any             // tool_use: the input sent whole at block start
}

// Stream implements agent.Provider.
func (p *Provider) Stream(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
	ctx, cancel := p.opts.CallContext(ctx)
	defer cancel()
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	ctx, answer := llm.KeepErrorAnswer(ctx)
	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	blocks := map[int64]*block{}
	budget := p.opts.Budget()
	var (
		stop  string
		usage agent.Usage
	)
	got, stopped := false, false
	for stream.Next() {
		ev := stream.Current()
		got = true
		switch ev.Type {
		case "message_start":
			// The input side, whole: what was read from the cache and
			// written to it are prompt tokens too.
			if u := ev.Message.Usage; ev.Message.JSON.Usage.Valid() {
				usage = agent.Usage{PromptTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
					CompletionTokens: u.OutputTokens, CachedTokens: u.CacheReadInputTokens, Reported: true}
			}
		case "content_block_start":
			b := &block{kind: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			// Every block counts, whole, against the budget: the text or
			// the call it starts with, and what it takes to keep it.
			size := len(ev.ContentBlock.RawJSON())
			var err error
			switch b.kind {
			case "tool_use":
				if err = budget.Call(); err == nil {
					err = budget.Arguments(b.name, size)
				}
				b.start = ev.ContentBlock.Input
			case "thinking", "redacted_thinking":
				err = budget.Reasoning(size)
			default:
				err = budget.Text(size)
			}
			if err != nil {
				return nil, err
			}
			if b.kind == "text" && ev.ContentBlock.Text != "" {
				b.text.WriteString(ev.ContentBlock.Text)
				onText(ev.ContentBlock.Text)
			}
			blocks[ev.Index] = b
		case "content_block_delta":
			b := blocks[ev.Index]
			if b == nil {
				return nil, llm.Upstream(api, ctx, fmt.Errorf("a delta for content block %d, which never started", ev.Index), 0, "", true)
			}
			switch ev.Delta.Type {
			case "text_delta":
				if err := budget.Text(len(ev.Delta.Text)); err != nil {
					return nil, err
				}
				b.text.WriteString(ev.Delta.Text)
				onText(ev.Delta.Text)
			case "input_json_delta":
				if err := budget.Arguments(b.name, len(ev.Delta.PartialJSON)); err != nil {
					return nil, err
				}
				b.input.WriteString(ev.Delta.PartialJSON)
			case "thinking_delta", "signature_delta":
				// Not kept, but read: counted all the same.
				if err := budget.Reasoning(len(ev.Delta.Thinking) + len(ev.Delta.Signature)); err != nil {
					return nil, err
				}
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = string(ev.Delta.StopReason)
			}
			// Its counts are cumulative: output_tokens always, the input
			// side when the API gives it again.
			if u := ev.Usage; ev.JSON.Usage.Valid() {
				usage.Reported = true
				if u.JSON.OutputTokens.Valid() {
					usage.CompletionTokens = u.OutputTokens
				}
				if in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens; u.JSON.InputTokens.Valid() && in > 0 {
					usage.PromptTokens = in
					usage.CachedTokens = u.CacheReadInputTokens
				}
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return nil, failure(ctx, err, answer, got)
	}
	if !got {
		return nil, llm.Upstream(api, ctx, errors.New("the stream ended without a single event"), 0, "", false)
	}
	if !stopped {
		return nil, llm.Upstream(api, ctx, llm.Incomplete("no message_stop"), 0, "", false)
	}
	idx := make([]int64, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	resp := &agent.Response{StopReason: stop, Usage: usage}
	var text strings.Builder
	for _, i := range idx {
		b := blocks[i]
		switch b.kind {
		case "text":
			text.WriteString(b.text.String())
		case "tool_use":
			args := b.input.String()
			if strings.TrimSpace(args) == "" {
				args = "{}"
				if m, ok := b.start.(map[string]any); ok && len(m) > 0 {
					if raw, err := json.Marshal(m); err == nil {
						args = string(raw)
					}
				}
			}
			resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ProviderID: b.id, Name: b.name, Arguments: args})
		}
	}
	resp.Text = text.String()
	llm.ProviderIDs(resp.ToolCalls)
	return resp, nil
}

// failure is the error of a call the SDK ended with err: a request too
// large for the model's window ("prompt is too long", as an HTTP error or an
// error event inside the stream), another HTTP error answer, or an
// upstream failure.
func failure(ctx context.Context, err error, answer *llm.ErrorAnswer, got bool) error {
	status, body := answer.Get()
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode < 400 {
		// An error event inside a stream that began with 200.
		status, body, got = 0, []byte(apiErr.RawJSON()), false
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
	if apiErr != nil && apiErr.StatusCode >= 400 {
		return llm.Upstream(api, ctx, err, apiErr.StatusCode, llm.ErrorMessage([]byte(apiErr.RawJSON())), got)
	}
	return llm.Upstream(api, ctx, err, 0, "", got)
}

// params builds the request body: the history as user and assistant turns,
// tool results as tool_result blocks in the user turn that follows a
// tool_use.
func (p *Provider) params(req agent.Request) (sdk.MessageNewParams, error) {
	params := sdk.MessageNewParams{Model: sdk.Model(p.opts.Model), MaxTokens: p.opts.MaxTokens}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	var (
		results []sdk.ContentBlockParamUnion
		ids     llm.CallIDs // the server's own ids for calls and results
	)
	flush := func() {
		if len(results) > 0 {
			params.Messages = append(params.Messages, sdk.NewUserMessage(results...))
			results = nil
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case agent.RoleUser:
			flush()
			params.Messages = append(params.Messages, sdk.NewUserMessage(sdk.NewTextBlock(m.Text)))
		case agent.RoleAssistant:
			flush()
			ids.Calls()
			var blocks []sdk.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Text))
			}
			for _, tc := range m.ToolCalls {
				var input any = map[string]any{}
				if err := json.Unmarshal([]byte(tc.Arguments), &input); err != nil {
					input = map[string]any{}
				}
				blocks = append(blocks, sdk.NewToolUseBlock(ids.Call(tc), input, tc.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, sdk.NewTextBlock("(no answer)"))
			}
			params.Messages = append(params.Messages, sdk.NewAssistantMessage(blocks...))
		case agent.RoleTool:
			content := m.Content
			if content == "" {
				content = "(empty result)"
			}
			results = append(results, sdk.NewToolResultBlock(ids.Result(m.ToolCallID), content, m.IsError))
		}
	}
	flush()
	for _, t := range req.Tools {
		schema := agent.Schema(t)
		in := sdk.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "properties" && k != "required" && k != "type" {
				in.ExtraFields[k] = v
			}
		}
		tool := sdk.ToolParam{Name: t.Name, Description: sdk.String(t.Description), InputSchema: in}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	if p.opts.Temperature != nil {
		params.Temperature = sdk.Float(*p.opts.Temperature)
	}
	return params, nil
}
