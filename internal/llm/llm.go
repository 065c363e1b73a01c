// Package llm holds what the LLM providers (internal/llm/openai,
// internal/llm/anthropic) share: turning an upstream failure into an error of
// kind unavailable whose text says, in plain words, what happened.
package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/buddy-run/buddy/internal/errs"
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
// already arrived (a stream cut midway).
func Upstream(api string, ctx context.Context, err error, status int, providerMsg string, streaming bool) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return errs.Wrap(errs.ErrCanceled, "the model call was canceled", err)
	}
	var detail string
	var ne net.Error
	switch {
	case status != 0:
		detail = (&StatusError{Status: status, Message: clip(providerMsg, 300)}).Error()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		detail = "no complete answer within [provider] timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		detail = "connection refused: is the server running at [provider] base_url?"
	case errors.As(err, &ne) && ne.Timeout():
		detail = "the connection timed out"
	case streaming:
		detail = "the stream broke off midway: " + clip(err.Error(), 300)
	default:
		detail = clip(err.Error(), 300)
	}
	return errs.Wrap(errs.ErrUnavailable, api+": "+detail, err)
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
