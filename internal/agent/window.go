package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// The context budget: what is sent must fit the model's window.
//
// A request is the system prompt, the tool schemas, the SKILL.md list, the
// history and the new message. Its size in tokens is estimated from its
// bytes with a factor the provider's own figures calibrate: after every
// answer that reports usage, tokens per byte = prompt tokens ÷ the request's
// bytes (calibration). Before the first report the factor is a conservative
// one token per three bytes; a context-exceeded answer that names its size
// recalibrates too.
//
// The budget is the window minus the answer's reserve ([provider]
// max_tokens) and a margin. The fixed part (system prompt, tools, SKILL.md
// list) may take at most FixedShare of it, else it is trimmed in this order:
// the SKILL.md list and its skill_ tools, then tool descriptions longer than
// shortDescription, then whole tools from the end of the list; what was left
// out is reported (Notice). The history is compacted when the request passes
// CompactAt of the budget (compact.go), down to KeepAfterCompaction. One tool
// result may take at most ResultShare of the budget, one user or assistant
// message MessageShare: a longer one is cut for the model with a note, and
// stays whole in the database.
const (
	// DefaultWindow is the window assumed when it is neither configured
	// nor discovered.
	DefaultWindow = 8192
	// FixedShare of the budget the system prompt and the tools may take.
	FixedShare = 0.5
	// CompactAt is the share of the budget past which the oldest turns
	// are summarised.
	CompactAt = 0.75
	// KeepAfterCompaction is the share of the budget the history kept
	// whole after a compaction aims at.
	KeepAfterCompaction = 0.4
	// ResultShare of the budget one tool result may take.
	ResultShare = 0.25
	// MessageShare of the budget one user or assistant message may take.
	MessageShare = 0.5

	// bytesPerTokenGuess is the estimate before any calibration: three
	// bytes a token is more tokens than English text makes in any common
	// tokenizer, so the first request errs on the small side.
	bytesPerTokenGuess = 3.0
	// perMessageTokens is what a message's role and separators cost.
	perMessageTokens = 8
	// shortDescription is what a long tool description is cut to.
	shortDescription = 160
	// minCut is the least of a text kept when it is cut to fit.
	minCut = 256
)

// calibration is tokens per byte of request, learnt from the provider.
type calibration struct {
	bits atomic.Uint64 // math.Float64bits; 0 = not calibrated
}

// factor is the current tokens per byte.
func (c *calibration) factor() float64 {
	if b := c.bits.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1 / bytesPerTokenGuess
}

// learn records that a request of n bytes was counted as tokens by the
// provider (clamped to sane bounds: a byte is at most one token, and no
// tokenizer packs more than eight bytes a token).
func (c *calibration) learn(n int, tokens int64) {
	if n <= 0 || tokens <= 0 {
		return
	}
	f := min(max(float64(tokens)/float64(n), 1.0/8), 1.0)
	c.bits.Store(math.Float64bits(f))
}

// tokens estimates the tokens of n bytes.
func (c *calibration) tokens(n int) int {
	return int(math.Ceil(float64(n) * c.factor()))
}

// budget is what one request may hold.
type budget struct {
	window  int // the model's context window
	reserve int // the answer's
	tokens  int // window - reserve - margin: what the request may take
}

// newBudget returns the budget of a window with an answer reserve.
func newBudget(window, reserve int) budget {
	if window <= 0 {
		window = DefaultWindow
	}
	if reserve <= 0 || reserve > window/2 {
		reserve = min(1024, window/4)
	}
	margin := max(32, window/50)
	return budget{window: window, reserve: reserve, tokens: max(window-reserve-margin, window/4)}
}

// share is a share of the budget, in tokens.
func (b budget) share(f float64) int { return int(float64(b.tokens) * f) }

// messageBytes is what a message weighs in a request (its text, its tool
// calls, its result), before the per-message cost.
func messageBytes(m Message) int {
	n := len(m.Text) + len(m.Content) + len(m.ToolName)
	for _, tc := range m.ToolCalls {
		n += len(tc.Name) + len(tc.Arguments) + len(tc.ProviderID) + 16
	}
	return n
}

// toolBytes is what a tool weighs in a request (name, description, schema).
func toolBytes(t Tool) int {
	return len(t.Name) + len(t.Description) + len(SchemaJSON(t)) + 16
}

// cutText cuts s to about max bytes for the model: its head and its tail
// on rune boundaries, and a note in the middle saying how much was left out
// and that the whole is kept. what names s ("this message", "this result").
func cutText(s string, max int, what string) string {
	if len(s) <= max {
		return s
	}
	max = maxInt(max, minCut)
	keep := maxInt(max-160, 64) // the note takes about 160 bytes
	if keep >= len(s) {
		return s
	}
	head, tail := keep*2/3, keep/3
	h := head
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	if t < h {
		t = h
	}
	note := fmt.Sprintf("\n[… %s was cut to fit the model's context window: %d of its %d bytes are left out here; the whole is kept in the conversation …]\n", what, t-h, len(s))
	return s[:h] + note + s[t:]
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// fixedPart is the system prompt and the tools of a request, trimmed to fit
// FixedShare of the budget.
type fixedPart struct {
	system  string
	tools   []Tool
	leftOut []string // what was trimmed, in plain words
}

// fitFixed trims the system prompt's SKILL.md list and the tools until
// they fit the fixed share of the budget (window.go's order).
func (a *Agent) fitFixed(base, skillList string, tools []Tool, b budget) fixedPart {
	limit := b.share(FixedShare)
	size := func(system string, ts []Tool) int {
		n := len(system)
		for _, t := range ts {
			n += toolBytes(t)
		}
		return a.cal.tokens(n) + perMessageTokens
	}
	fp := fixedPart{system: base + skillList, tools: tools}
	if size(fp.system, fp.tools) <= limit {
		return fp
	}
	// 1. The SKILL.md list and its skill_ tools.
	if skillList != "" || hasInstructionTools(tools) {
		var kept []Tool
		n := 0
		for _, t := range tools {
			if isInstructionTool(t) {
				n++
				continue
			}
			kept = append(kept, t)
		}
		fp.system, fp.tools = base, kept
		fp.leftOut = append(fp.leftOut, fmt.Sprintf("the list of SKILL.md skills and their %d skill_ tools", n))
		if size(fp.system, fp.tools) <= limit {
			return fp
		}
	}
	// 2. Long descriptions.
	var cut []string
	short := make([]Tool, len(fp.tools))
	for i, t := range fp.tools {
		short[i] = t
		if len(t.Description) > shortDescription {
			short[i].Description = clipRunes(t.Description, shortDescription)
			cut = append(cut, t.Name)
		}
	}
	if len(cut) > 0 {
		fp.tools = short
		fp.leftOut = append(fp.leftOut, "the end of the long descriptions of "+strings.Join(cut, ", "))
		if size(fp.system, fp.tools) <= limit {
			return fp
		}
	}
	// 3. Whole tools, from the end of the list.
	var dropped []string
	for len(fp.tools) > 0 && size(fp.system, fp.tools) > limit {
		last := fp.tools[len(fp.tools)-1]
		dropped = append([]string{last.Name}, dropped...)
		fp.tools = fp.tools[:len(fp.tools)-1]
	}
	if len(dropped) > 0 {
		fp.leftOut = append(fp.leftOut, "the tools "+strings.Join(dropped, ", "))
	}
	return fp
}

// clipRunes cuts s to at most n bytes on a rune boundary, with an ellipsis.
func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// isInstructionTool reports whether t loads a SKILL.md instruction skill.
func isInstructionTool(t Tool) bool {
	return strings.HasPrefix(t.Name, InstructionToolPrefix) && t.InputSchema != nil && sameSchema(t.InputSchema, loadSchema)
}

func hasInstructionTools(ts []Tool) bool {
	for _, t := range ts {
		if isInstructionTool(t) {
			return true
		}
	}
	return false
}

// requestBytes is the size of a request's parts, as the estimate counts it.
func requestBytes(system string, tools []Tool, msgs []Message) int {
	n := len(system)
	for _, t := range tools {
		n += toolBytes(t)
	}
	for _, m := range msgs {
		n += messageBytes(m)
	}
	return n
}

// estimate is the tokens of a request.
func (a *Agent) estimate(system string, tools []Tool, msgs []Message) int {
	return a.cal.tokens(requestBytes(system, tools, msgs)) + perMessageTokens*(len(msgs)+1)
}

// usageJSON is a usage as the store's meta keeps it.
func usageJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
