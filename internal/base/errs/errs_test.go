package errs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// The CLI contract: names and exit codes never change (README "Exit codes").
func TestContract(t *testing.T) {
	want := []struct {
		kind errs.Kind
		code int
	}{
		{errs.KindInternal, 1}, {errs.KindInvalidInput, 2}, {errs.KindConfig, 3}, {errs.KindNotFound, 4},
		{errs.KindForbidden, 5}, {errs.KindDenied, 6}, {errs.KindTooLarge, 7}, {errs.KindTimeout, 8},
		{errs.KindFuelExhausted, 9}, {errs.KindMemoryLimit, 10}, {errs.KindTrap, 11}, {errs.KindSkill, 12},
		{errs.KindUnavailable, 13}, {errs.KindTampered, 14}, {errs.KindCanceled, 130},
	}
	kinds := errs.Kinds()
	if len(kinds) != len(want) {
		t.Fatalf("Kinds() = %v", kinds)
	}
	seen := map[int]bool{}
	for i, w := range want {
		if kinds[i] != w.kind {
			t.Errorf("Kinds()[%d] = %q, want %q", i, kinds[i], w.kind)
		}
		if got := errs.ExitCode(w.kind); got != w.code {
			t.Errorf("ExitCode(%q) = %d, want %d", w.kind, got, w.code)
		}
		if seen[w.code] {
			t.Errorf("exit code %d used twice", w.code)
		}
		seen[w.code] = true
		if s := errs.Sentinel(w.kind); s == nil || errs.KindOf(s) != w.kind {
			t.Errorf("Sentinel(%q) = %v", w.kind, s)
		}
	}
	if errs.ExitCode("") != 0 || errs.ExitCode("nonsense") != 1 {
		t.Error("ExitCode of no kind / an unknown kind")
	}
}

func TestKindOf(t *testing.T) {
	cases := []struct {
		err  error
		want errs.Kind
	}{
		{nil, ""},
		{errors.New("plain"), errs.KindInternal},
		{fmt.Errorf("wrapped: %w", errs.ErrForbidden), errs.KindForbidden},
		{errs.New(errs.ErrTooLarge, "file x"), errs.KindTooLarge},
		{errs.Wrap(errs.ErrUnavailable, "fetch", errors.New("connection refused")), errs.KindUnavailable},
		{context.DeadlineExceeded, errs.KindTimeout},
		{fmt.Errorf("x: %w", context.Canceled), errs.KindCanceled},
		// A kind wins over a context cause it wraps.
		{errs.Wrap(errs.ErrCanceled, "approval", context.Canceled), errs.KindCanceled},
		// More specific kinds come first.
		{errors.Join(errs.ErrNotFound, errs.ErrForbidden), errs.KindForbidden},
	}
	for _, c := range cases {
		if got := errs.KindOf(c.err); got != c.want {
			t.Errorf("KindOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	if got := errs.New(errs.ErrForbidden, `read "../x": leaves the directory`).Error(); got != `read "../x": leaves the directory` {
		t.Errorf("detail not repeated with the kind: %q", got)
	}
	if got := errs.New(errs.ErrForbidden, "").Error(); got != "forbidden" {
		t.Errorf("no detail: %q", got)
	}
	cause := errors.New("EACCES")
	err := errs.Wrap(errs.ErrForbidden, "open x", cause)
	if got := err.Error(); got != "open x: EACCES" || !errors.Is(err, cause) || !errors.Is(err, errs.ErrForbidden) {
		t.Errorf("wrapped: %q", got)
	}
}

func TestStatuses(t *testing.T) {
	cases := []struct {
		err  error
		want errs.Status
	}{
		{nil, errs.StatusOK},
		{errs.ErrForbidden, errs.StatusForbidden},
		{errs.ErrNotFound, errs.StatusNotFound},
		{errs.ErrTooLarge, errs.StatusTooLarge},
		{errs.ErrInvalidInput, errs.StatusInvalidInput},
		{errs.ErrUnavailable, errs.StatusUnavailable},
		{errs.ErrDenied, errs.StatusDenied},
		{errs.ErrTimeout, errs.StatusTimeout},
		{errors.New("bug"), errs.StatusInternal},
	}
	for _, c := range cases {
		st := errs.StatusOf(c.err)
		if st != c.want {
			t.Errorf("StatusOf(%v) = %d, want %d", c.err, st, c.want)
		}
		if c.err != nil && c.want != errs.StatusInternal && errs.KindForStatus(st) != errs.KindOf(c.err) {
			t.Errorf("KindForStatus(%d) = %q, want %q", st, errs.KindForStatus(st), errs.KindOf(c.err))
		}
	}
}

// A guest may claim only the kinds it can observe.
func TestGuestKind(t *testing.T) {
	cases := []struct {
		msg      string
		want     error
		wantText string
	}{
		{"forbidden: read ../x", errs.ErrForbidden, "read ../x"},
		{"not_found: no key", errs.ErrNotFound, "no key"},
		{"invalid_input: path is required", errs.ErrInvalidInput, "path is required"},
		{"timeout: I am slow", errs.ErrSkill, "timeout: I am slow"},
		{"trap: fake", errs.ErrSkill, "trap: fake"},
		{"internal: x", errs.ErrSkill, "internal: x"},
		{"something broke", errs.ErrSkill, "something broke"},
		{"forbidden:no space", errs.ErrSkill, "forbidden:no space"},
		{"", errs.ErrSkill, ""},
	}
	for _, c := range cases {
		kind, text := errs.GuestKind(c.msg)
		if kind != c.want || text != c.wantText {
			t.Errorf("GuestKind(%q) = %v, %q; want %v, %q", c.msg, kind, text, c.want, c.wantText)
		}
	}
}
