package llm

import (
	"fmt"
	"io"
	"net/http"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
)

// What a provider sends is counted before it is kept or passed on: a model
// (or a server posing as one) that streams without end must not fill memory,
// the database or every later request. Two layers count it:
//
//   - the HTTP client every provider is given (Options.Client) caps each
//     event of a stream and each error body, before the SDK buffers them;
//   - a Budget, one per answer, caps what the provider keeps of the events:
//     the answer's text and tool calls, its reasoning, its number of calls.
//
// Past a cap the call ends with a *TooLargeError (kind too_large).

// Defaults of the caps ([provider] max_answer_bytes and max_tool_calls).
const (
	DefaultMaxAnswerBytes = 1 << 20
	DefaultMaxToolCalls   = 64
	// MaxErrorBodyBytes caps the body of an HTTP error answer: only its
	// first 300 bytes are ever shown.
	MaxErrorBodyBytes = 64 << 10
	// maxEventCeiling bounds one event whatever max_answer_bytes says: the
	// SDKs' own line buffer stops at 32 MiB, with an error that names no cap.
	maxEventCeiling = 16 << 20
)

// What a TooLargeError says was too large.
const (
	TooLargeAnswer    = "answer"     // the answer's text and tool calls
	TooLargeArguments = "arguments"  // ... pushed over by a tool call's arguments
	TooLargeReasoning = "reasoning"  // reasoning or thinking text
	TooLargeToolCalls = "tool_calls" // the number of tool calls
	TooLargeEvent     = "event"      // one event of the stream
	TooLargeErrorBody = "error_body" // the body of an HTTP error answer
)

// TooLargeError is something a provider sent that was over its cap. It
// matches errs.ErrTooLarge; its text says what, which cap, and what to do.
type TooLargeError struct {
	What   string // one of the TooLarge… constants
	Tool   string // TooLargeArguments: the tool the call named
	Max    int64  // the cap, in bytes or (tool_calls) calls
	Status int    // TooLargeErrorBody: the HTTP status
}

func (e *TooLargeError) Error() string {
	size := osfile.Size(e.Max)
	switch e.What {
	case TooLargeAnswer:
		return fmt.Sprintf("the model's answer is over [provider] max_answer_bytes (%s): it was cut there and the turn ended; "+
			"ask for a shorter answer or for one part at a time, or raise max_answer_bytes", size)
	case TooLargeArguments:
		return fmt.Sprintf("the arguments of the model's call of %s took its answer over [provider] max_answer_bytes (%s): "+
			"no call of that answer was made; ask for smaller steps (a long text in parts), or raise max_answer_bytes", e.Tool, size)
	case TooLargeReasoning:
		return fmt.Sprintf("the model's reasoning is over [provider] max_answer_bytes (%s): the turn ended before its answer; "+
			"ask again, or raise max_answer_bytes", size)
	case TooLargeToolCalls:
		return fmt.Sprintf("the model asked for more than [provider] max_tool_calls (%d) tool calls in one answer: none was made; "+
			"ask for fewer at a time, or raise max_tool_calls", e.Max)
	case TooLargeEvent:
		return fmt.Sprintf("one event of the model's stream is over %s (4 × [provider] max_answer_bytes + 64 KiB, at most 16 MiB): "+
			"the turn ended; check that [provider] base_url is a chat API, or raise max_answer_bytes", size)
	case TooLargeErrorBody:
		return fmt.Sprintf("the provider answered HTTP %d with an error body over %s, not read further: check [provider] base_url",
			e.Status, size)
	}
	return fmt.Sprintf("the provider sent %s over %s", e.What, size)
}

// Is matches errs.ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == errs.ErrTooLarge }

// Budget counts what one answer streams against the caps. A provider asks
// it before keeping or passing on each piece; the first error ends the
// answer. Not safe for concurrent use (a stream is read by one goroutine).
type Budget struct {
	maxBytes  int64
	maxCalls  int
	answer    int64 // text, and tool calls' names and arguments
	reasoning int64
	calls     int
}

// Budget returns a budget for one answer.
func (o Options) Budget() *Budget {
	return &Budget{maxBytes: o.maxAnswerBytes(), maxCalls: o.maxToolCalls()}
}

// Text counts n bytes of the answer's text.
func (b *Budget) Text(n int) error {
	b.answer += int64(n)
	if b.answer > b.maxBytes {
		return &TooLargeError{What: TooLargeAnswer, Max: b.maxBytes}
	}
	return nil
}

// Arguments counts n bytes of a tool call (its name, its arguments); tool
// is the call's name as far as it is known.
func (b *Budget) Arguments(tool string, n int) error {
	b.answer += int64(n)
	if b.answer > b.maxBytes {
		if len(tool) > 64 {
			tool = tool[:64] + "…"
		}
		if tool == "" {
			tool = "a tool"
		}
		return &TooLargeError{What: TooLargeArguments, Tool: tool, Max: b.maxBytes}
	}
	return nil
}

// Reasoning counts n bytes of text the provider reads but buddy does not
// keep: reasoning, thinking, a refusal.
func (b *Budget) Reasoning(n int) error {
	b.reasoning += int64(n)
	if b.reasoning > b.maxBytes {
		return &TooLargeError{What: TooLargeReasoning, Max: b.maxBytes}
	}
	return nil
}

// Call counts one more tool call.
func (b *Budget) Call() error {
	b.calls++
	if b.calls > b.maxCalls {
		return &TooLargeError{What: TooLargeToolCalls, Max: int64(b.maxCalls)}
	}
	return nil
}

func (o Options) maxAnswerBytes() int64 {
	if o.MaxAnswerBytes > 0 {
		return o.MaxAnswerBytes
	}
	return DefaultMaxAnswerBytes
}

func (o Options) maxToolCalls() int {
	if o.MaxToolCalls > 0 {
		return o.MaxToolCalls
	}
	return DefaultMaxToolCalls
}

// maxEventBytes caps one event of a stream: room for a whole answer in one
// chunk (servers that do not stream), JSON escaping included.
func (o Options) maxEventBytes() int64 {
	return min(4*o.maxAnswerBytes()+64<<10, maxEventCeiling)
}

// Client is the HTTP client to give the provider's SDK: o.HTTPClient (or a
// default client) whose answers are capped as they are read, an error body
// at MaxErrorBodyBytes and every other body at one event (the bytes up to
// an empty line, as Server-Sent Events end them) of maxEventBytes. An error
// body is read whole (within its cap) before the SDK sees it, and kept for
// the call's ErrorAnswer (answer.go).
func (o Options) Client() *http.Client {
	c := &http.Client{}
	if o.HTTPClient != nil {
		cp := *o.HTTPClient
		c = &cp
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = capTransport{next: next, maxEvent: o.maxEventBytes()}
	return c
}

// AuthClient is Client, with the API key read from KeyFunc at every
// request and sent in header (after prefix) when KeyFunc is set.
func (o Options) AuthClient(header, prefix string) *http.Client {
	c := o.Client()
	if o.KeyFunc != nil {
		c.Transport = keyTransport{next: c.Transport, key: o.KeyFunc, header: header, prefix: prefix}
	}
	return c
}

// capTransport caps the bodies of the answers it returns.
type capTransport struct {
	next     http.RoundTripper
	maxEvent int64
}

func (t capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if a, ok := req.Context().Value(answerKey{}).(*ErrorAnswer); ok {
		a.set(0, nil) // an answer is the last attempt's, not a retried one's
	}
	res, err := t.next.RoundTrip(req)
	if err != nil || res.Body == nil {
		return res, err
	}
	if res.StatusCode >= 400 {
		readErrorAnswer(req, res) // answer.go
	} else {
		res.Body = &eventReader{rc: res.Body, max: t.maxEvent}
	}
	return res, nil
}

// errorBody reads a body up to left bytes, then fails with err unless the
// body ends there.
type errorBody struct {
	rc   io.ReadCloser
	left int64
	err  error
}

func (b *errorBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the cap: the body may still end right here.
		var one [1]byte
		for {
			n, err := b.rc.Read(one[:])
			if n > 0 {
				return 0, b.err
			}
			if err != nil {
				return 0, err
			}
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *errorBody) Close() error { return b.rc.Close() }

// eventReader passes a stream on while no event is over max bytes: an event
// is what comes before an empty line ("\n\n", "\r\n\r\n"), the way the
// SDKs' decoders split Server-Sent Events (a "\r" alone ends no line for
// them, so it ends none here). A body that is not a stream is one event.
type eventReader struct {
	rc    io.ReadCloser
	max   int64
	event int64 // bytes of the current event
	line  int64 // bytes of the current line, "\r" left out
	err   error
}

func (r *eventReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.rc.Read(p)
	for i, c := range p[:n] {
		switch {
		case c == '\n' && r.line == 0:
			r.event = 0 // an empty line ends the event
			continue
		case c == '\n':
			r.line = 0
		case c != '\r':
			r.line++
		}
		r.event++
		if r.event > r.max {
			r.err = &TooLargeError{What: TooLargeEvent, Max: r.max}
			return i, r.err
		}
	}
	return n, err
}

func (r *eventReader) Close() error { return r.rc.Close() }
