// Package errs holds buddy's error kinds: the sentinels every layer wraps, their
// stable names (the CLI contract `error: <kind>: <detail>`), their exit codes and
// the status codes a guest reads from a host function.
//
// It is a leaf package so that the runtime, the host functions and the store can
// all speak the same kinds without importing one another:
//
//	if errors.Is(err, errs.ErrForbidden) { ... }
//	fmt.Fprintf(os.Stderr, "error: %s: %v\n", errs.KindOf(err), err)
//	os.Exit(errs.ExitCode(errs.KindOf(err)))
//
// The runtime package re-exports the sentinels; prefer runtime.ErrForbidden in code
// that already imports the runtime.
package errs

import (
	"context"
	"errors"
	"strings"
)

// The sentinels. Each is matched with errors.Is; typed errors elsewhere carry the
// detail (which path, which domain, which import) and unwrap to one of these.
var (
	// ErrFuelExhausted: the guest executed more instructions than its fuel budget.
	ErrFuelExhausted = errors.New("fuel exhausted")
	// ErrTimeout: the call ran past its wall-clock deadline.
	ErrTimeout = errors.New("timeout")
	// ErrCanceled: the caller canceled the call (Ctrl-C, a closed conversation).
	ErrCanceled = errors.New("canceled")
	// ErrMemoryLimit: the guest asked for more memory than its cap.
	ErrMemoryLimit = errors.New("memory limit")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack overflow,
	// a broken memory contract with a host function).
	ErrTrap = errors.New("trap")
	// ErrForbidden: a capability was asked for that was not granted.
	ErrForbidden = errors.New("forbidden")
	// ErrTooLarge: an input, output, file, body or quota was over its cap.
	ErrTooLarge = errors.New("too large")
	// ErrInvalidInput: malformed input (JSON, a module that is not wasm, a bad path).
	ErrInvalidInput = errors.New("invalid input")
	// ErrNotFound: no such skill, file, key or export.
	ErrNotFound = errors.New("not found")
	// ErrDenied: the user (or the absence of one) refused approval.
	ErrDenied = errors.New("denied")
	// ErrConfig: buddy.toml or skill.toml is wrong.
	ErrConfig = errors.New("config")
	// ErrUnavailable: an upstream (a web server, the disk) failed in a way that is
	// not the caller's fault: connection refused, DNS failure, I/O error.
	ErrUnavailable = errors.New("unavailable")
	// ErrSkill: the skill itself reported a failure that names no other kind.
	ErrSkill = errors.New("skill error")
	// ErrInternal: a bug in buddy.
	ErrInternal = errors.New("internal")
	// ErrTampered: the audit log is not as buddy wrote it (a row edited,
	// deleted, inserted or reordered).
	ErrTampered = errors.New("tampered")
)

// Kind is the stable, machine-readable name of an error kind.
type Kind string

// The kinds, in the order of their exit codes. Names and codes are a contract with
// scripts (README "Exit codes"): add, never renumber.
const (
	KindInternal      Kind = "internal"
	KindInvalidInput  Kind = "invalid_input"
	KindConfig        Kind = "config"
	KindNotFound      Kind = "not_found"
	KindForbidden     Kind = "forbidden"
	KindDenied        Kind = "denied"
	KindTooLarge      Kind = "too_large"
	KindTimeout       Kind = "timeout"
	KindFuelExhausted Kind = "fuel_exhausted"
	KindMemoryLimit   Kind = "memory_limit"
	KindTrap          Kind = "trap"
	KindSkill         Kind = "skill_error"
	KindUnavailable   Kind = "unavailable"
	KindCanceled      Kind = "canceled"
	KindTampered      Kind = "tampered"
)

type kindInfo struct {
	kind     Kind
	sentinel error
	exit     int
	status   Status
}

// table lists every kind once. Order matters for KindOf: the first sentinel in
// the chain that matches wins, and more specific kinds come first.
var table = []kindInfo{
	{KindFuelExhausted, ErrFuelExhausted, 9, StatusInternal},
	{KindMemoryLimit, ErrMemoryLimit, 10, StatusTooLarge},
	{KindTimeout, ErrTimeout, 8, StatusTimeout},
	{KindCanceled, ErrCanceled, 130, StatusTimeout},
	{KindTrap, ErrTrap, 11, StatusInvalidInput},
	{KindForbidden, ErrForbidden, 5, StatusForbidden},
	{KindDenied, ErrDenied, 6, StatusDenied},
	{KindTooLarge, ErrTooLarge, 7, StatusTooLarge},
	{KindNotFound, ErrNotFound, 4, StatusNotFound},
	{KindInvalidInput, ErrInvalidInput, 2, StatusInvalidInput},
	{KindConfig, ErrConfig, 3, StatusInternal},
	{KindUnavailable, ErrUnavailable, 13, StatusUnavailable},
	{KindSkill, ErrSkill, 12, StatusInternal},
	{KindTampered, ErrTampered, 14, StatusInternal},
	{KindInternal, ErrInternal, 1, StatusInternal},
}

// Kinds returns every kind in exit-code order, for documentation and tests.
func Kinds() []Kind {
	out := make([]Kind, 0, len(table))
	for code := 1; code <= 255; code++ {
		for _, k := range table {
			if k.exit == code {
				out = append(out, k.kind)
			}
		}
	}
	return out
}

// KindOf names the kind of err. Context errors count as timeout/canceled; an
// error matching no sentinel is internal.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	for _, k := range table {
		if errors.Is(err, k.sentinel) {
			return k.kind
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(err, context.Canceled):
		return KindCanceled
	}
	return KindInternal
}

// Sentinel returns the sentinel error of a kind, or nil for an unknown kind.
func Sentinel(k Kind) error {
	for _, info := range table {
		if info.kind == k {
			return info.sentinel
		}
	}
	return nil
}

// ExitCode is the process exit code for a kind: 0 for none, 1 for unknown kinds.
func ExitCode(k Kind) int {
	if k == "" {
		return 0
	}
	for _, info := range table {
		if info.kind == k {
			return info.exit
		}
	}
	return 1
}

// Status is the one-byte code at the start of every result a buddy host function
// hands a guest (docs/HOST_ABI.md). Values are part of the host ABI: never renumber.
type Status byte

const (
	StatusOK           Status = 0
	StatusForbidden    Status = 1
	StatusNotFound     Status = 2
	StatusTooLarge     Status = 3
	StatusInvalidInput Status = 4
	StatusUnavailable  Status = 5
	StatusDenied       Status = 6
	StatusTimeout      Status = 7
	StatusInternal     Status = 8
)

// StatusOf maps an error to the status a guest sees.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	k := KindOf(err)
	for _, info := range table {
		if info.kind == k {
			return info.status
		}
	}
	return StatusInternal
}

// guestKinds are the kinds a guest may claim for its own failure by starting its
// error message with "<kind>: " (skillkit does this). A guest cannot claim to be a
// timeout or a trap: those only the runtime observes.
var guestKinds = map[Kind]error{
	KindForbidden:    ErrForbidden,
	KindNotFound:     ErrNotFound,
	KindTooLarge:     ErrTooLarge,
	KindInvalidInput: ErrInvalidInput,
	KindUnavailable:  ErrUnavailable,
	KindDenied:       ErrDenied,
}

// GuestKind returns the sentinel a guest's error message claims with a leading
// "<kind>: ", and the message without it; ErrSkill and the whole message otherwise.
func GuestKind(msg string) (error, string) {
	if i := strings.Index(msg, ": "); i > 0 {
		if s, ok := guestKinds[Kind(msg[:i])]; ok {
			return s, msg[i+2:]
		}
	}
	return ErrSkill, msg
}

// KindForStatus is the inverse of StatusOf for the statuses a guest can receive,
// used by skillkit's documentation and tests.
func KindForStatus(s Status) Kind {
	switch s {
	case StatusOK:
		return ""
	case StatusForbidden:
		return KindForbidden
	case StatusNotFound:
		return KindNotFound
	case StatusTooLarge:
		return KindTooLarge
	case StatusInvalidInput:
		return KindInvalidInput
	case StatusUnavailable:
		return KindUnavailable
	case StatusDenied:
		return KindDenied
	case StatusTimeout:
		return KindTimeout
	}
	return KindInternal
}

// Error is an error of a known kind with a detail message, for places that have
// no richer type. errors.Is(e, e.Kind's sentinel) holds.
type Error struct {
	Kind   error // one of the sentinels
	Detail string
	Err    error // optional cause
}

func (e *Error) Error() string {
	// The kind is not repeated when there is a detail: callers print it
	// separately ("error: forbidden: path ../x leaves ...").
	msg := e.Detail
	if msg == "" {
		msg = e.Kind.Error()
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap lets errors.Is match both the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// New returns an *Error of the given kind.
func New(kind error, detail string) error { return &Error{Kind: kind, Detail: detail} }

// Wrap returns an *Error of the given kind around a cause.
func Wrap(kind error, detail string, err error) error {
	return &Error{Kind: kind, Detail: detail, Err: err}
}
