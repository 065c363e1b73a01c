package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
)

// An ErrorAnswer keeps the last HTTP error answer (status 400 or more) of
// one model call, as the client of Options.Client read it: the SDKs parse
// one shape of error body and drop the others (a string error, vLLM's
// top-level message, an HTML page of a proxy), and the provider needs the
// server's own words to tell a request that does not fit the model's window
// from any other refusal.
//
//	ctx, answer := llm.KeepErrorAnswer(ctx)
//	... the SDK call with ctx fails ...
//	status, body := answer.Get()
type ErrorAnswer struct {
	mu     sync.Mutex
	status int
	body   []byte
}

// Get is the status and body of the last error answer (0 and nil: none).
func (a *ErrorAnswer) Get() (int, []byte) {
	if a == nil {
		return 0, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status, a.body
}

func (a *ErrorAnswer) set(status int, body []byte) {
	a.mu.Lock()
	a.status, a.body = status, body
	a.mu.Unlock()
}

// answerKey is the context key of the ErrorAnswer of a call.
type answerKey struct{}

// KeepErrorAnswer returns a context whose requests, sent through
// Options.Client, keep their error answer in the returned ErrorAnswer.
func KeepErrorAnswer(ctx context.Context) (context.Context, *ErrorAnswer) {
	a := &ErrorAnswer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

// readErrorAnswer reads an error answer's body within MaxErrorBodyBytes,
// keeps it for the call's ErrorAnswer, and gives the SDK the same bytes
// (and the same failure, past the cap) to read again. An answer that says
// the request does not fit the model's context window is marked
// X-Should-Retry: false, which both SDKs obey: the same request would not
// fit any better (llama.cpp answers some overflows with a 500, which the
// SDKs retry otherwise).
func readErrorAnswer(req *http.Request, res *http.Response) {
	capped := &errorBody{rc: res.Body, left: MaxErrorBodyBytes,
		err: &TooLargeError{What: TooLargeErrorBody, Max: MaxErrorBodyBytes, Status: res.StatusCode}}
	body, err := io.ReadAll(capped)
	_ = res.Body.Close()
	res.Body = &replay{r: bytes.NewReader(body), err: err}
	if err != nil {
		return
	}
	if a, ok := req.Context().Value(answerKey{}).(*ErrorAnswer); ok {
		a.set(res.StatusCode, body)
	}
	if ContextExceeded("", res.StatusCode, body) != nil {
		res.Header.Set("X-Should-Retry", "false")
	}
}

// replay gives back bytes already read, then the error that ended them.
type replay struct {
	r   *bytes.Reader
	err error
}

func (r *replay) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err == io.EOF && r.err != nil {
		return n, r.err
	}
	return n, err
}

func (r *replay) Close() error { return nil }
