// Package agent is the tool-call loop: a user message goes to the LLM with
// the history and the skills as tools; the LLM's tool calls go through the
// approval gate; their results go back; until a final answer or the
// iteration cap. It knows providers only through the Provider interface and
// skills only through the gated catalog.
//
//	a := agent.New(agent.Options{Provider: p, Skills: gate, History: st})
//	out := a.Turn(ctx, conversationID, "summarise notes.txt", sink)
//	fmt.Println(out.Reason, out.Text) // final, max_iterations, canceled or error
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// Reasons a turn ends (the done frame's reason).
const (
	ReasonFinal         = "final"
	ReasonMaxIterations = "max_iterations"
	ReasonCanceled      = "canceled"
	ReasonError         = "error"
)

// DefaultSystemPrompt tells the model what buddy is.
const DefaultSystemPrompt = `You are buddy, a personal assistant running on the user's own machine. ` +
	`You can use tools (skills); each runs in a WebAssembly sandbox and can touch only the files, ` +
	`directories and web domains the user granted it. Tools that write files, change memory or reach ` +
	`the network need the user's approval: if the user denies a call, accept it, do not retry the same ` +
	`call, and say what you could not do. Use a tool only when it helps answer the request; ` +
	`prefer reading before writing; never invent file contents or tool results. Answer concisely.`

// Defaults.
const (
	DefaultMaxIterations  = 10
	DefaultMaxResultBytes = 32 << 10
)

// History is where the conversation lives (the store).
type History interface {
	AppendMessage(ctx context.Context, m store.Message) (int64, error)
	Messages(ctx context.Context, conversation string) ([]store.Message, error)
}

// Sink receives what a turn produces, in order, as it happens.
type Sink interface {
	// Delta is a piece of assistant text, streamed.
	Delta(text string)
	// Message is an assistant message once complete: the concatenation of
	// its deltas.
	Message(role, text string)
	// ToolCall announces a call about to go through the gate.
	ToolCall(call catalog.Call)
	// ToolResult reports its result (res nil and err set on failure).
	ToolResult(call catalog.Call, res *catalog.Result, err error, took time.Duration)
}

// Options configure an Agent.
type Options struct {
	Provider Provider
	// Skills is the gated catalog (the approval gate): the tools offered are
	// its ready skills, and every call goes through its Invoke.
	Skills  catalog.Skills
	History History
	// SystemPrompt replaces DefaultSystemPrompt when not "".
	SystemPrompt string
	// MaxIterations caps the model calls of one turn.
	MaxIterations int
	// MaxResultBytes caps a tool result before the model sees it.
	MaxResultBytes int
	// NewCallID names a tool call (the server's call_ ids); a default is used
	// when nil.
	NewCallID func() string
	Logger    *slog.Logger
	// InstructionTokens caps the list of SKILL.md instruction skills in the
	// system prompt (instructions.go); DefaultInstructionTokens when 0.
	InstructionTokens int
}

// Agent runs turns.
type Agent struct{ opts Options }

// New returns an agent.
func New(opts Options) *Agent {
	if opts.SystemPrompt == "" {
		opts.SystemPrompt = DefaultSystemPrompt
	}
	if opts.MaxIterations <= 0 {
		opts.MaxIterations = DefaultMaxIterations
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.NewCallID == nil {
		n := 0
		opts.NewCallID = func() string { n++; return fmt.Sprintf("call_%d", n) }
	}
	return &Agent{opts: opts}
}

// ToolOutcome is one tool call of a turn.
type ToolOutcome struct {
	CallID    string          `json:"call_id"`
	Skill     string          `json:"skill"`
	Arguments json.RawMessage `json:"arguments"`
	OK        bool            `json:"ok"`
	ErrorKind string          `json:"error_kind,omitempty"`
}

// Outcome is how a turn ended.
type Outcome struct {
	Text      string // the last assistant message
	Reason    string
	ToolCalls []ToolOutcome
	Err       error // with ReasonError: what failed (kind unavailable for upstream failures)
}

// Turn runs one user message to its end. It never returns early without a
// reason: a failure is an Outcome with ReasonError and Err.
func (a *Agent) Turn(ctx context.Context, conversation, text string, sink Sink) Outcome {
	var out Outcome
	history, err := a.history(ctx, conversation)
	if err != nil {
		return a.fail(out, err)
	}
	// Writes overlap the work that follows them (the model call, the skill
	// call) instead of delaying it; each later write waits for the one
	// before, so rows keep their order, and the turn never ends before its
	// writes are stored.
	pending := async(func() error {
		_, err := a.opts.History.AppendMessage(context.WithoutCancel(ctx), store.Message{Conversation: conversation, Role: string(RoleUser), Text: text})
		if err != nil {
			return fmt.Errorf("storing the message: %w", err)
		}
		return nil
	})
	defer func() { _ = pending() }()
	history = append(history, Message{Role: RoleUser, Text: text})
	tools, err := a.tools(ctx)
	if err != nil {
		return a.fail(out, err)
	}
	system := a.opts.SystemPrompt + a.skillList(tools)
	for iter := 0; iter < a.opts.MaxIterations; iter++ {
		var streamed strings.Builder
		resp, err := a.opts.Provider.Stream(ctx, Request{System: system, Messages: history, Tools: tools}, func(d string) {
			if d == "" {
				return
			}
			streamed.WriteString(d)
			sink.Delta(d)
		})
		if werr := pending(); werr != nil {
			return a.fail(out, werr)
		}
		if err != nil {
			if ctx.Err() != nil {
				a.keepPartial(ctx, conversation, streamed.String(), errs.New(errs.ErrCanceled, "the turn was canceled before the answer was complete"), sink, &out)
				out.Reason = ReasonCanceled
				return out
			}
			a.keepPartial(ctx, conversation, streamed.String(), err, sink, &out)
			return a.fail(out, err)
		}
		msgText := streamed.String()
		if msgText == "" && resp.Text != "" {
			// A server that did not stream its text: one delta, so that the
			// deltas still add up to the message.
			msgText = resp.Text
			sink.Delta(msgText)
		}
		// Our own call ids: local servers reuse theirs ("call_0").
		calls := make([]ToolCall, len(resp.ToolCalls))
		for i, tc := range resp.ToolCalls {
			calls[i] = ToolCall{ID: a.opts.NewCallID(), Name: tc.Name, Arguments: tc.Arguments}
		}
		if len(calls) == 0 {
			if err := a.storeAssistant(ctx, conversation, msgText, nil); err != nil {
				return a.fail(out, err)
			}
		} else {
			// The tool calls' message is stored while the first call runs.
			pending = async(func() error { return a.storeAssistant(ctx, conversation, msgText, calls) })
		}
		history = append(history, Message{Role: RoleAssistant, Text: msgText, ToolCalls: calls})
		if msgText != "" {
			sink.Message(string(RoleAssistant), msgText)
			out.Text = msgText
		}
		if len(calls) == 0 {
			if msgText == "" {
				sink.Message(string(RoleAssistant), "")
			}
			out.Reason = ReasonFinal
			return out
		}
		for _, tc := range calls {
			res := a.runTool(ctx, conversation, tc, sink, &out, pending)
			history = append(history, res)
			if ctx.Err() != nil {
				out.Reason = ReasonCanceled
				return out
			}
		}
	}
	if err := pending(); err != nil {
		return a.fail(out, err)
	}
	msg := fmt.Sprintf("I stopped after %d rounds of tool calls without a final answer (the limit is [provider] max_iterations = %d).", a.opts.MaxIterations, a.opts.MaxIterations)
	sink.Delta(msg)
	sink.Message(string(RoleAssistant), msg)
	_ = a.storeAssistant(context.WithoutCancel(ctx), conversation, msg, nil)
	out.Text, out.Reason = msg, ReasonMaxIterations
	return out
}

// keepPartial stores and shows the text streamed before a model call
// failed (a cap, an upstream failure, a cancel): the client has seen it, so
// it stays in the conversation, marked as cut by why (the row's error kind
// and detail). Tool calls of a cut answer are neither made nor kept. The
// model sees a cut answer shortened and marked (history).
func (a *Agent) keepPartial(ctx context.Context, conversation, text string, why error, sink Sink, out *Outcome) {
	if text == "" {
		return
	}
	sink.Message(string(RoleAssistant), text)
	out.Text = text
	m := store.Message{Conversation: conversation, Role: string(RoleAssistant), Text: text,
		ErrorKind: string(errs.KindOf(why)), ErrorDetail: why.Error()}
	if _, err := a.opts.History.AppendMessage(context.WithoutCancel(ctx), m); err != nil {
		a.opts.Logger.Error("storing a cut answer", "conversation", conversation, "err", err)
	}
}

// cutAnswer is a cut answer as the model sees it again: at most
// MaxResultBytes of it (on a rune boundary), then a note saying it was cut
// and why. However much was kept, the next turn's request stays small.
func (a *Agent) cutAnswer(text, kind, detail string) string {
	if max := a.opts.MaxResultBytes; len(text) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n[… %d more bytes]", len(text)-cut)
	}
	return text + fmt.Sprintf("\n[this answer was cut short (%s): %s]", kind, clip(detail, 300))
}

func (a *Agent) fail(out Outcome, err error) Outcome {
	out.Reason, out.Err = ReasonError, err
	return out
}

// runTool checks and runs one tool call through the gate, and returns the
// tool message for the model.
// wait returns once the assistant's message that made the call is stored: the
// tool's row goes after it.
func (a *Agent) runTool(ctx context.Context, conversation string, tc ToolCall, sink Sink, out *Outcome, wait func() error) Message {
	reply := Message{Role: RoleTool, ToolCallID: tc.ID, ToolName: tc.Name}
	args := strings.TrimSpace(tc.Arguments)
	if args == "" {
		args = "{}"
	}
	rec := store.Message{Conversation: conversation, Role: string(RoleTool), CallID: tc.ID, Skill: tc.Name}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		// Nothing is called with arguments that are not a JSON object.
		reply.IsError = true
		reply.Content = fmt.Sprintf("Error (invalid_input): the arguments of %s are not a JSON object: %s. Call it again with valid JSON arguments.", tc.Name, clip(args, 200))
		rec.ErrorKind, rec.ErrorDetail = string(errs.KindInvalidInput), reply.Content
		if s, err := json.Marshal(args); err == nil {
			rec.Arguments = json.RawMessage(`{"_unparsed":` + string(s) + `}`)
		}
		out.ToolCalls = append(out.ToolCalls, ToolOutcome{CallID: tc.ID, Skill: tc.Name, Arguments: rec.Arguments, ErrorKind: rec.ErrorKind})
		a.storeTool(ctx, rec, wait)
		return reply
	}
	call := catalog.Call{ID: tc.ID, Conversation: conversation, Skill: a.toolTarget(ctx, tc.Name), Arguments: json.RawMessage(args)}
	// Once, for the gate and for the sink's log line.
	call.ArgumentsHash = catalog.ArgumentsHash(call.Arguments)
	rec.Arguments = call.Arguments
	sink.ToolCall(call)
	start := time.Now()
	res, err := a.opts.Skills.Invoke(ctx, call)
	took := time.Since(start)
	sink.ToolResult(call, res, err, took)
	o := ToolOutcome{CallID: tc.ID, Skill: tc.Name, Arguments: call.Arguments, OK: err == nil}
	if err != nil {
		kind := errs.KindOf(err)
		o.ErrorKind = string(kind)
		rec.ErrorKind, rec.ErrorDetail = string(kind), err.Error()
		reply.IsError = true
		if kind == errs.KindDenied {
			reply.Content = err.Error() // "User denied execution of write_file"
		} else {
			reply.Content = fmt.Sprintf("Error (%s): %s", kind, err.Error())
		}
		rec.DurationUS = took.Microseconds()
	} else {
		rec.OK, rec.Fuel, rec.DurationUS = true, res.Fuel, res.Duration.Microseconds()
		if json.Valid(res.Output) {
			rec.Result = json.RawMessage(res.Output)
		} else {
			rec.ResultText = string(res.Output)
		}
		reply.Content = a.capResult(res.Output)
	}
	out.ToolCalls = append(out.ToolCalls, o)
	a.storeTool(ctx, rec, wait)
	return reply
}

// capResult cuts a result to MaxResultBytes (on a rune boundary), saying so.
func (a *Agent) capResult(b []byte) string {
	max := a.opts.MaxResultBytes
	if len(b) <= max {
		return string(b)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + fmt.Sprintf("\n[result cut: the first %d of %d bytes are shown]", cut, len(b))
}

func (a *Agent) storeTool(ctx context.Context, m store.Message, wait func() error) {
	if err := wait(); err != nil {
		a.opts.Logger.Error("storing the assistant's tool calls", "conversation", m.Conversation, "err", err)
	}
	if _, err := a.opts.History.AppendMessage(context.WithoutCancel(ctx), m); err != nil {
		a.opts.Logger.Error("storing a tool result", "conversation", m.Conversation, "call", m.CallID, "err", err)
	}
}

func (a *Agent) storeAssistant(ctx context.Context, conversation, text string, calls []ToolCall) error {
	m := store.Message{Conversation: conversation, Role: string(RoleAssistant), Text: text}
	if len(calls) > 0 {
		b, err := json.Marshal(calls)
		if err != nil {
			return err
		}
		m.ToolCalls = b
	}
	if _, err := a.opts.History.AppendMessage(context.WithoutCancel(ctx), m); err != nil {
		return fmt.Errorf("storing the assistant's message: %w", err)
	}
	return nil
}

// tools are the ready skills, as the model sees them.
func (a *Agent) tools(ctx context.Context) ([]Tool, error) {
	infos, err := a.opts.Skills.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing skills: %w", err)
	}
	var out []Tool
	for _, i := range infos {
		if !i.Ready() || i.Type == catalog.TypeInstruction {
			continue // offered as skill_NAME (instructions.go)
		}
		desc := i.Description
		if i.Permission != catalog.ReadOnly {
			desc += fmt.Sprintf(" (%s: may need the user's approval)", i.Permission)
		}
		out = append(out, Tool{Name: i.Name, Description: desc, InputSchema: i.InputSchema})
	}
	return append(out, instructionTools(infos, out)...), nil
}

// history rebuilds what the model saw, from the store. Tool results of calls
// that no assistant message made (skills invoked directly by a client) are
// left out: a model only sees results of its own calls.
func (a *Agent) history(ctx context.Context, conversation string) ([]Message, error) {
	rows, err := a.opts.History.Messages(ctx, conversation)
	if err != nil {
		return nil, fmt.Errorf("loading the conversation: %w", err)
	}
	asked := map[string]bool{}
	answered := map[string]bool{}
	var out []Message
	for _, r := range rows {
		switch Role(r.Role) {
		case RoleUser:
			out = append(out, Message{Role: RoleUser, Text: r.Text})
		case RoleAssistant:
			m := Message{Role: RoleAssistant, Text: r.Text}
			if r.ErrorKind != "" {
				m.Text = a.cutAnswer(r.Text, r.ErrorKind, r.ErrorDetail)
			}
			if len(r.ToolCalls) > 0 {
				if err := json.Unmarshal(r.ToolCalls, &m.ToolCalls); err != nil {
					return nil, fmt.Errorf("stored tool calls of the conversation: %w", err)
				}
			}
			for _, tc := range m.ToolCalls {
				asked[tc.ID] = true
			}
			out = append(out, m)
		case RoleTool:
			if !asked[r.CallID] || answered[r.CallID] {
				continue
			}
			answered[r.CallID] = true
			m := Message{Role: RoleTool, ToolCallID: r.CallID, ToolName: r.Skill, IsError: !r.OK}
			switch {
			case !r.OK && r.ErrorKind == string(errs.KindDenied):
				m.Content = r.ErrorDetail
			case !r.OK:
				m.Content = r.ErrorDetail
				if !strings.HasPrefix(m.Content, "Error (") {
					m.Content = fmt.Sprintf("Error (%s): %s", r.ErrorKind, r.ErrorDetail)
				}
			case len(r.Result) > 0:
				m.Content = a.capResult(r.Result)
			default:
				m.Content = a.capResult([]byte(r.ResultText))
			}
			out = append(out, m)
		}
	}
	// A call left without a result (the server stopped mid-call) is
	// answered, so the history stays valid for every provider.
	for i := 0; i < len(out); i++ {
		if out[i].Role != RoleAssistant {
			continue
		}
		j := i + 1
		for j < len(out) && out[j].Role == RoleTool {
			j++
		}
		for _, tc := range out[i].ToolCalls {
			if !answered[tc.ID] {
				answered[tc.ID] = true
				fill := Message{Role: RoleTool, ToolCallID: tc.ID, ToolName: tc.Name, IsError: true, Content: "Error (canceled): the call did not finish"}
				out = append(out[:j], append([]Message{fill}, out[j:]...)...)
				j++
			}
		}
	}
	return out, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ErrNoProvider is returned when a turn is asked for with no provider.
var ErrNoProvider = errs.New(errs.ErrConfig, "no LLM provider is configured: add a [provider] section to buddy.toml (kind = \"openai\" or \"anthropic\", base_url, model; see buddy.example.toml); skills can still be invoked directly")

// async runs f in the background; the function it returns waits for f and
// returns its error (every call returns the same one).
func async(f func() error) func() error {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = f()
	}()
	return func() error {
		<-done
		return err
	}
}
