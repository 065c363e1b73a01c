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
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
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
	DefaultMaxIterations = 10
	// DefaultMaxResultBytes bounds what of a tool result the agent keeps
	// in memory for the model; the window's share (ResultShare) is what
	// the model is sent of it.
	DefaultMaxResultBytes = 1 << 20
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

	// Window is the model's context window in tokens ([provider]
	// context_tokens, or discovered); DefaultWindow when 0. Reserve is
	// the answer's share of it ([provider] max_tokens), taken off the top
	// (window.go).
	Window, Reserve int
	// Model names the model in usage rows.
	Model string
	// PriceInPerMTok and PriceOutPerMTok, when set, turn tokens into money
	// (dollars per million prompt and completion tokens).
	PriceInPerMTok, PriceOutPerMTok float64
	// Usage, if set, records every model request's usage (the store).
	Usage UsageRecorder
	// OnCompaction, if set, is told of every compaction (the audit log).
	OnCompaction func(ctx context.Context, c Compaction)
	// Meter, if set, is asked before every model request ([budget]):
	// a refusal ends the turn before the request (meter.go).
	Meter Meter
	// Now stamps the usage rows; nil = the store's clock. (A scheduler
	// under a fake clock counts days by it.)
	Now func() time.Time
	// Lean turns see no history: only the turn's own messages, and no
	// SKILL.md list (the heartbeat). Their messages are still stored.
	Lean bool
}

// UsageRecorder keeps a usage row per model request (the store).
type UsageRecorder interface {
	AppendUsage(ctx context.Context, u store.Usage) error
}

// Agent runs turns.
type Agent struct {
	opts Options
	cal  calibration
	hist *histories
	// window is the window a server named when it refused a request as
	// too long (0: none did).
	window atomic.Int64
}

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
	return &Agent{opts: opts, hist: newHistories()}
}

// Budget is the agent's context budget: the window, the answer's reserve,
// and what a request may take.
func (a *Agent) Budget() (window, reserve, request int) {
	b := a.budget()
	return b.window, b.reserve, b.tokens
}

// budget is the budget of the window in force: the configured (or
// discovered) one, or the smaller one a server named when it refused a
// request as too long.
func (a *Agent) budget() budget {
	w := a.opts.Window
	if l := int(a.window.Load()); l > 0 && (w <= 0 || l < w) {
		w = l
	}
	return newBudget(w, a.opts.Reserve)
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
	// Usage is what the turn's model requests cost.
	Usage TurnUsage
}

// TurnUsage is what a turn's model requests cost, summed, and how full the
// window was at its last request.
type TurnUsage struct {
	Requests         int   `json:"requests"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	// Estimated says some figures are buddy's estimate: the provider
	// reported none for at least one request.
	Estimated bool `json:"estimated,omitempty"`
	// ContextTokens is the last request's prompt; WindowTokens the
	// model's window ("3.1k / 8k").
	ContextTokens int64 `json:"context_tokens"`
	WindowTokens  int64 `json:"window_tokens"`
	// CostUSD is set when [provider] prices are.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Turn runs one user message to its end. It never returns early without a
// reason: a failure is an Outcome with ReasonError and Err. Every request
// fits the model's window (window.go): the history is compacted when it
// grows past CompactAt of the budget (compact.go), and a provider's
// context-exceeded answer compacts harder and retries once.
func (a *Agent) Turn(ctx context.Context, conversation, text string, sink Sink) Outcome {
	var out Outcome
	var c *convHistory
	if a.opts.Lean {
		// No history: the turn's own messages only.
		c = &convHistory{loaded: true, asked: map[string]bool{}, answer: map[string]bool{}}
	} else {
		c = a.hist.get(conversation)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !a.opts.Lean {
		if err := a.refresh(ctx, conversation, c); err != nil {
			a.hist.forget(conversation)
			return a.fail(out, err)
		}
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
	turn := []Message{{Role: RoleUser, Text: text}}
	tools, err := a.tools(ctx)
	if err != nil {
		return a.fail(out, err)
	}
	b := a.budget()
	out.Usage.WindowTokens = int64(b.window)
	skills := ""
	if !a.opts.Lean {
		skills = a.skillList(tools)
	}
	var told []string // what the user was told was left out
	fixed := func() fixedPart {
		// Fitted again at every request: the calibration may have
		// learnt that the tools weigh more than guessed.
		fp := a.fitFixed(a.opts.SystemPrompt, skills, tools, b)
		if len(fp.leftOut) > 0 && !slices.Equal(fp.leftOut, told) {
			told = fp.leftOut
			what := "To fit the model's context window (" + fmt.Sprint(b.window) + " tokens), this request leaves out " + strings.Join(fp.leftOut, "; ") + "."
			a.opts.Logger.Warn("left out of the request to fit the window", "conversation", conversation, "window", b.window, "left_out", strings.Join(fp.leftOut, "; "))
			if ns, ok := sink.(Noticer); ok {
				ns.Notice(Notice{Kind: NoticeLeftOut, Text: what, LeftOut: fp.leftOut, WindowTokens: b.window})
			}
		}
		return fp
	}
	wait := func() error { return pending() }
	for iter := 0; iter < a.opts.MaxIterations; iter++ {
		var streamed strings.Builder
		var resp *Response
		for attempt := 0; ; attempt++ {
			req, err := a.fit(ctx, conversation, c, fixed(), turn, b, attempt > 0, wait, sink, &out)
			if err != nil {
				_ = pending()
				return a.fail(out, err)
			}
			streamed.Reset()
			done, err := a.reserve(ctx, conversation, store.UsageTurn, a.estimate(req.System, req.Tools, req.Messages), b, &out)
			if err != nil {
				_ = pending()
				return a.fail(out, err)
			}
			resp, err = a.opts.Provider.Stream(ctx, req, func(d string) {
				if d == "" {
					return
				}
				streamed.WriteString(d)
				sink.Delta(d)
			})
			if err == nil {
				a.account(ctx, conversation, store.UsageTurn, req, resp, b, &out)
			}
			done()
			if werr := pending(); werr != nil {
				return a.fail(out, werr)
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				a.keepPartial(ctx, conversation, streamed.String(), errs.New(errs.ErrCanceled, "the turn was canceled before the answer was complete"), sink, &out)
				out.Reason = ReasonCanceled
				return out
			}
			if errors.Is(err, ErrContextExceeded) && streamed.Len() == 0 {
				if attempt == 0 {
					// The estimate was short, or the window smaller than
					// believed: learn what the server said (or count more
					// tokens a byte), compact harder, try once more.
					a.learnFromRefusal(req, b, err)
					b = a.budget()
					out.Usage.WindowTokens = int64(b.window)
					a.opts.Logger.Warn("the model's window was exceeded: compacting harder and retrying", "conversation", conversation, "window", b.window, "err", err)
					continue
				}
				return a.fail(out, errs.Wrap(errs.ErrTooLarge, fmt.Sprintf(
					"this conversation does not fit the model's context window (%d tokens) even after summarising its earlier messages: "+
						"the newest message, a tool result or the tools are too big for it. Start a new conversation, send a shorter message, "+
						"or raise [provider] context_tokens if the model allows a larger window", b.window), err))
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
		// buddy's own call ids for frames and the store; the provider's
		// go back to it with the results (some servers check their own
		// format).
		calls := make([]ToolCall, len(resp.ToolCalls))
		seen := map[string]bool{}
		for i, tc := range resp.ToolCalls {
			pid := tc.ProviderID
			if pid == "" {
				pid = tc.ID
			}
			if pid == "" || seen[pid] {
				// None, or one a result could not be told apart by
				// (servers that number every call call_0).
				pid = SynthesizeID(i)
			}
			seen[pid] = true
			calls[i] = ToolCall{ID: a.opts.NewCallID(), Name: tc.Name, Arguments: tc.Arguments, ProviderID: pid}
		}
		if len(calls) == 0 {
			if err := a.storeAssistant(ctx, conversation, msgText, nil); err != nil {
				return a.fail(out, err)
			}
		} else {
			// The tool calls' message is stored while the first call runs.
			pending = async(func() error { return a.storeAssistant(ctx, conversation, msgText, calls) })
		}
		turn = append(turn, Message{Role: RoleAssistant, Text: msgText, ToolCalls: calls})
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
			turn = append(turn, res)
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

// learnFromRefusal learns what a context-exceeded answer says: the
// request's real size in tokens (calibration) and the server's window, when
// it gives them (ContextFigures); else that the request took more than the
// window.
func (a *Agent) learnFromRefusal(req Request, b budget, err error) {
	n := requestBytes(req.System, req.Tools, req.Messages)
	prompt, window := 0, 0
	var cf ContextFigures
	if errors.As(err, &cf) {
		prompt, window = cf.ContextFigures()
	}
	if window > 0 && window < b.window {
		a.window.Store(int64(window))
		a.opts.Logger.Warn("the server's context window is smaller than configured or discovered: using the server's",
			"window", window, "was", b.window)
		b = a.budget()
	}
	if prompt <= 0 {
		prompt = int(float64(b.window) * 1.25)
	}
	a.cal.learn(n, int64(prompt))
}

// fit builds a request that fits the budget: the conversation's history
// (compacted when past CompactAt, or always when hard), then this turn's
// messages, each message cut to its share. It fails with errs.ErrTooLarge
// only when even the newest turn, cut, does not fit.
func (a *Agent) fit(ctx context.Context, conversation string, c *convHistory, fp fixedPart, turn []Message, b budget,
	hard bool, wait func() error, sink Sink, out *Outcome) (Request, error) {
	build := func() (Request, int) {
		msgs := append(messagesOf(c.view()), turn...)
		msgs = a.capped(msgs, b)
		system := fp.system + summaryNote(c.summary)
		return Request{System: system, Messages: withProviderIDs(msgs), Tools: fp.tools}, a.estimate(system, fp.tools, msgs)
	}
	req, est := build()
	threshold, keep := b.share(CompactAt), b.share(KeepAfterCompaction)
	if hard {
		threshold, keep = 0, keep/2
	}
	if est > threshold {
		view := c.view()
		fixed := a.estimate(fp.system, fp.tools, nil)
		turnTokens := a.estimate("", nil, turn)
		if cut := a.compactable(view, max(keep-fixed-turnTokens, 0)); cut > 0 {
			if err := a.compact(ctx, conversation, c, view, cut, est, b, wait, sink, out); err != nil {
				return Request{}, err
			}
			req, est = build()
		}
	}
	for level := 1; est > b.tokens && level <= 4; level++ {
		// Still too big: the newest turn itself is. Cut its messages
		// harder, oldest first.
		msgs := a.shrink(req.Messages, b, level)
		req.Messages = msgs
		est = a.estimate(req.System, req.Tools, msgs)
	}
	if est > b.tokens {
		return Request{}, errs.New(errs.ErrTooLarge, fmt.Sprintf(
			"this turn does not fit the model's context window (%d tokens, about %d needed) even with its earlier messages summarised and its results cut: "+
				"start a new conversation or raise [provider] context_tokens if the model allows a larger window", b.window, est))
	}
	return req, nil
}

// capped cuts each message to its share of the budget: a tool result to
// ResultShare, a user or assistant text to MessageShare. The store keeps
// them whole.
func (a *Agent) capped(msgs []Message, b budget) []Message {
	resMax := a.bytesFor(b.share(ResultShare))
	msgMax := a.bytesFor(b.share(MessageShare))
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case RoleTool:
			m.Content = cutText(m.Content, resMax, "this result")
		default:
			m.Text = cutText(m.Text, msgMax, "this message")
		}
		out[i] = m
	}
	return out
}

// shrink cuts every message but the last harder (level 1 to 4: to a half,
// a quarter, ... of its share), for a turn that does not fit otherwise.
func (a *Agent) shrink(msgs []Message, b budget, level int) []Message {
	div := 1 << level
	resMax := a.bytesFor(b.share(ResultShare)) / div
	msgMax := a.bytesFor(b.share(MessageShare)) / div
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		if i < len(msgs)-1 || level >= 3 {
			m.Content = cutText(m.Content, resMax, "this result")
			m.Text = cutText(m.Text, msgMax, "this message")
		}
		out[i] = m
	}
	return out
}

// bytesFor is how many bytes make about tokens tokens.
func (a *Agent) bytesFor(tokens int) int {
	return int(float64(tokens) / a.cal.factor())
}

// withProviderIDs gives each tool result the provider's id of its call.
func withProviderIDs(msgs []Message) []Message {
	ids := map[string]string{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			if tc.ProviderID != "" {
				ids[tc.ID] = tc.ProviderID
			}
		}
	}
	if len(ids) == 0 {
		return msgs
	}
	for i, m := range msgs {
		if m.Role == RoleTool {
			if pid, ok := ids[m.ToolCallID]; ok {
				msgs[i].ToolCallID = pid
			}
		}
	}
	return msgs
}

// account records what a request cost and learns from it: the provider's
// prompt tokens calibrate the estimate; without figures, the estimate is
// recorded as such.
func (a *Agent) account(ctx context.Context, conversation, purpose string, req Request, resp *Response, b budget, out *Outcome) {
	u := resp.Usage
	n := requestBytes(req.System, req.Tools, req.Messages)
	if u.Reported && u.PromptTokens > 0 {
		a.cal.learn(n, u.PromptTokens)
	} else {
		u.PromptTokens = int64(a.estimate(req.System, req.Tools, req.Messages))
		u.CompletionTokens = int64(a.cal.tokens(len(resp.Text)))
		out.Usage.Estimated = true
	}
	cost := int64(float64(u.PromptTokens)*a.opts.PriceInPerMTok + float64(u.CompletionTokens)*a.opts.PriceOutPerMTok) // µ$
	out.Usage.Requests++
	out.Usage.PromptTokens += u.PromptTokens
	out.Usage.CompletionTokens += u.CompletionTokens
	out.Usage.CachedTokens += u.CachedTokens
	out.Usage.CostUSD += float64(cost) / 1e6
	if purpose == store.UsageTurn {
		out.Usage.ContextTokens = u.PromptTokens
	}
	if a.opts.Usage == nil {
		return
	}
	var at time.Time
	if a.opts.Now != nil {
		at = a.opts.Now()
	}
	err := a.opts.Usage.AppendUsage(context.WithoutCancel(ctx), store.Usage{Conversation: conversation, Time: at, Purpose: purpose, Model: a.opts.Model,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens, Reported: u.Reported,
		WindowTokens: int64(b.window), CostMicroUSD: cost})
	if err != nil {
		a.opts.Logger.Error("recording usage", "conversation", conversation, "err", err)
	}
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

// maxCutAnswer is the most of a cut answer the model is sent again.
const maxCutAnswer = 32 << 10

// cutAnswer is a cut answer as the model sees it again: at most
// maxCutAnswer bytes of it (on a rune boundary), then a note saying it was cut
// and why. However much was kept, the next turn's request stays small.
func (a *Agent) cutAnswer(text, kind, detail string) string {
	if max := min(a.opts.MaxResultBytes, maxCutAnswer); len(text) > max {
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
