// Package llm holds what the LLM providers (internal/llm/openai,
// internal/llm/anthropic) share: turning an upstream failure into an error of
// kind unavailable whose text says, in plain words, what happened; the caps
// on what a provider may send (caps.go); each call's error answer, read in
// any shape (answer.go); a server's refusal of a request too large for the
// model's window (overflow.go); the server's own tool-call ids (ids.go); and
// the windows of well-known hosted models (window.go).
//
//	ctx, answer := llm.KeepErrorAnswer(ctx)
//	... the SDK's call fails with err ...
//	status, body := answer.Get()
//	if ce := llm.ContextExceeded(api, status, body); ce != nil {
//		return nil, ce // errors.Is(ce, agent.ErrContextExceeded)
//	}
//	return nil, llm.Upstream(api, ctx, err, status, llm.ErrorMessage(body), streaming)
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// StatusError is an HTTP error answer from the provider.
type StatusError struct {
	Status  int
	Message string // the provider's own message, cut
}

func (e *StatusError) Error() string {
	what := ""
	switch {
	case e.Status == 401 || e.Status == 403:
		what = "the API key was refused (check [provider] api_key_env)"
	case e.Status == 404:
		what = "not found (check [provider] base_url and model)"
	case e.Status == 429:
		what = "rate limited, even after retrying"
	case e.Status >= 500:
		what = "the server failed, even after retrying"
	default:
		what = "the request was refused"
	}
	msg := fmt.Sprintf("HTTP %d: %s", e.Status, what)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Upstream wraps a failed model call as errs.ErrUnavailable, saying which
// API failed and how. status is the HTTP status when the provider answered
// with one (0 otherwise); streaming tells whether part of the answer had
// already arrived (a stream cut midway). A cap the answer broke (a
// *TooLargeError from Options.Client) is returned as it is.
func Upstream(api string, ctx context.Context, err error, status int, providerMsg string, streaming bool) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return errs.Wrap(errs.ErrCanceled, "the model call was canceled", err)
	}
	if tl := (*TooLargeError)(nil); errors.As(err, &tl) {
		return tl
	}
	var detail string
	var ne net.Error
	var syntax *json.SyntaxError
	switch {
	case status != 0:
		detail = (&StatusError{Status: status, Message: clip(providerMsg, 300)}).Error()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		detail = "no complete answer within [provider] timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		detail = "connection refused: is the server running at [provider] base_url?"
	case errors.As(err, &ne) && ne.Timeout():
		detail = "the connection timed out"
	case errors.As(err, &syntax):
		detail = "a chunk of the stream is not valid JSON: " + clip(err.Error(), 300)
	case streaming:
		detail = "the stream broke off midway: " + clip(err.Error(), 300)
	default:
		detail = clip(err.Error(), 300)
	}
	// The detail already says what the cause says, in plain words: the
	// cause is kept for errors.Is, not repeated in the text.
	return &upstreamError{msg: api + ": " + detail, cause: err}
}

// Incomplete is the error of a stream that ended cleanly before the
// response was complete (no finish_reason, no message_stop): the server
// stopped or the connection was closed between events.
func Incomplete(what string) error {
	return fmt.Errorf("the stream ended before the answer was complete (%s)", what)
}

// upstreamError is an upstream failure: kind unavailable, its text the
// detail alone.
type upstreamError struct {
	msg   string
	cause error
}

func (e *upstreamError) Error() string   { return e.msg }
func (e *upstreamError) Unwrap() []error { return []error{errs.ErrUnavailable, e.cause} }

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Options configure a provider: the same settings for every API ([provider]
// in buddy.toml), each provider reading them its SDK's way.
type Options struct {
	// BaseURL as the provider's SDK takes it: for OpenAI-compatible
	// endpoints ending in /v1, for Anthropic the API root.
	BaseURL string
	Model   string
	// APIKey is "" for local servers that need none.
	APIKey string
	// KeyFunc, when set, is read for the API key at every request instead
	// of APIKey (the secret store: the key is held for the request only).
	KeyFunc Key
	// Timeout bounds one model call, stream included (0: none).
	Timeout time.Duration
	// Temperature and MaxTokens are sent when set.
	Temperature *float64
	MaxTokens   int64
	// MaxRetries on 429 and 5xx before the first token (honouring
	// Retry-After); 0 means DefaultMaxRetries, a negative value none.
	MaxRetries int
	// MaxAnswerBytes caps one answer's text and tool calls together, and
	// its reasoning apart; 0 means DefaultMaxAnswerBytes (caps.go).
	MaxAnswerBytes int64
	// MaxToolCalls caps the tool calls of one answer; 0 means
	// DefaultMaxToolCalls.
	MaxToolCalls int
	// HTTPClient, if set, is the client to send with; Client wraps it.
	HTTPClient *http.Client
}

// DefaultMaxRetries is how often a refused request is retried by default.
const DefaultMaxRetries = 2

// Check validates o for the provider named kind and fills in the defaults:
// the retries, and a base URL with exactly one trailing slash (the SDKs
// join paths to it).
func (o Options) Check(kind string) (Options, error) {
	if o.BaseURL == "" || o.Model == "" {
		return o, fmt.Errorf("%s provider needs base_url and model", kind)
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	o.MaxRetries = max(o.MaxRetries, 0)
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/") + "/"
	return o, nil
}

// CallContext bounds one model call by Timeout.
func (o Options) CallContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.Timeout > 0 {
		return context.WithTimeout(ctx, o.Timeout)
	}
	return context.WithCancel(ctx)
}
