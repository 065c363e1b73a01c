package llm

import (
	"context"
	"net/http"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/secrets"
)

// Redactors is where a provider finds the redactor of the secrets buddy
// holds now (*secrets.Store).
type Redactors interface {
	Redactor() *secrets.Redactor
}

// Redacting returns p with every secret buddy knows replaced by
// "[secret:NAME]" in what the model sends back: the streamed text (a secret
// split across pieces too: what could be the start of one is held back
// until the next piece or the end), the final text, the tool calls'
// names and arguments, and the error text. A server that echoes the API key
// it was sent, or a token it saw, hands it to no one: not to the page, the
// store, the logs or a tool call.
func Redacting(p agent.Provider, rs Redactors) agent.Provider {
	if rs == nil {
		return p
	}
	return redacting{p: p, rs: rs}
}

type redacting struct {
	p  agent.Provider
	rs Redactors
}

func (r redacting) Stream(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
	red := r.rs.Redactor()
	stream := red.Stream()
	resp, err := r.p.Stream(ctx, req, func(delta string) {
		if out := stream.Write(delta); out != "" && onText != nil {
			onText(out)
		}
	})
	if rest := stream.Flush(); rest != "" && onText != nil {
		onText(rest)
	}
	if err != nil {
		return nil, redactedError(red, err)
	}
	if resp != nil {
		out := *resp
		out.Text = red.Redact(resp.Text)
		out.ToolCalls = make([]agent.ToolCall, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			c.Name, c.Arguments = red.Redact(c.Name), red.Redact(c.Arguments)
			out.ToolCalls[i] = c
		}
		resp = &out
	}
	return resp, nil
}

// redactedError is err with its text redacted; errors.Is and errors.As
// still see err (its kind, a context-exceeded refusal and its figures).
func redactedError(red *secrets.Redactor, err error) error {
	msg := err.Error()
	if r := red.Redact(msg); r != msg {
		return &redactedErr{msg: r, err: err}
	}
	return err
}

type redactedErr struct {
	msg string
	err error
}

func (e *redactedErr) Error() string { return e.msg }
func (e *redactedErr) Unwrap() error { return e.err }

// Key is where a provider reads its API key for each request (the secret
// store, api_key_secret): the key is held for the request, not for the life
// of the process.
type Key func(ctx context.Context) ([]byte, error)

// keyTransport sets the API key header of every request from Key.
type keyTransport struct {
	next           http.RoundTripper
	key            Key
	header, prefix string
}

func (t keyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	v, err := t.key(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set(t.header, t.prefix+string(v))
	clear(v)
	return t.next.RoundTrip(r)
}
