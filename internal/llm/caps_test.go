package llm

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/buddy-run/buddy/internal/base/errs"
)

func TestEventReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int64
		pass int // bytes passed on before the error; -1: all, no error
	}{
		{name: "events under the cap", in: "data: 12345\n\ndata: 12345\n\n", max: 12, pass: -1},
		{name: "CRLF events under the cap", in: "data: 123\r\n\r\ndata: 123\r\n\r\n", max: 12, pass: -1},
		{name: "one event over the cap", in: "data: 12345\n\ndata: 123456789\n\n", max: 12, pass: 13 + 12},
		{name: "lines without an empty one are one event", in: "data: 1\ndata: 2\ndata: 3\n", max: 12, pass: 12},
		{name: "a lone CR ends no line", in: "data: 1\r\rdata: 2\r\r", max: 12, pass: 12},
		{name: "comments count", in: ": ping\n: ping\n: ping\n\n", max: 12, pass: 12},
		{name: "a body that is not a stream", in: `{"choices":[{"message":{"content":"long"}}]}`, max: 12, pass: 12},
		{name: "empty lines alone", in: strings.Repeat("\n", 100), max: 1, pass: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte per read: the cap holds wherever reads split.
			r := &eventReader{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.in))), max: tc.max}
			got, err := io.ReadAll(r)
			if tc.pass < 0 {
				if err != nil || string(got) != tc.in {
					t.Fatalf("read %q, %v; want all of it", got, err)
				}
				return
			}
			var tl *TooLargeError
			if !errors.As(err, &tl) || tl.What != TooLargeEvent || !errors.Is(err, errs.ErrTooLarge) {
				t.Fatalf("error %v, want an event too large", err)
			}
			if string(got) != tc.in[:tc.pass] {
				t.Errorf("passed %q, want %q", got, tc.in[:tc.pass])
			}
		})
	}
}

func TestErrorBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		err  bool
	}{
		{name: "under the cap", in: "12345"},
		{name: "at the cap", in: "1234567890"},
		{name: "over the cap", in: "12345678901", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &errorBody{rc: io.NopCloser(iotest.HalfReader(strings.NewReader(tc.in))), left: 10,
				err: &TooLargeError{What: TooLargeErrorBody, Max: 10, Status: 500}}
			got, err := io.ReadAll(r)
			if tc.err {
				if !errors.Is(err, errs.ErrTooLarge) || !strings.Contains(err.Error(), "HTTP 500") {
					t.Fatalf("error %v, want too_large naming the status", err)
				}
				return
			}
			if err != nil || string(got) != tc.in {
				t.Fatalf("read %q, %v", got, err)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	o := Options{MaxAnswerBytes: 10, MaxToolCalls: 2}
	for _, tc := range []struct {
		name  string
		steps func(b *Budget) error
		what  string
	}{
		{name: "text and calls share the cap", what: TooLargeArguments, steps: func(b *Budget) error {
			return errors.Join(b.Text(6), b.Call(), b.Arguments("read_file", 5))
		}},
		{name: "reasoning has a cap of its own", steps: func(b *Budget) error {
			return errors.Join(b.Text(10), b.Reasoning(10))
		}},
		{name: "reasoning over", what: TooLargeReasoning, steps: func(b *Budget) error { return b.Reasoning(11) }},
		{name: "text over", what: TooLargeAnswer, steps: func(b *Budget) error { return errors.Join(b.Text(10), b.Text(1)) }},
		{name: "calls over", what: TooLargeToolCalls, steps: func(b *Budget) error { return errors.Join(b.Call(), b.Call(), b.Call()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.steps(o.Budget())
			var tl *TooLargeError
			switch {
			case tc.what == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.what != "" && (!errors.As(err, &tl) || tl.What != tc.what):
				t.Fatalf("error %v, want %s", err, tc.what)
			}
		})
	}
	if b := (Options{}).Budget(); b.maxBytes != DefaultMaxAnswerBytes || b.maxCalls != DefaultMaxToolCalls {
		t.Errorf("defaults %d, %d", b.maxBytes, b.maxCalls)
	}
}
