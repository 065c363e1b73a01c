package runtime

import (
	"fmt"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/textsafe"
)

// Caps on guest-controlled text in error messages and logs, as shown
// (escaped by textsafe, which marks what it cut).
const (
	maxShownBytes   = 2048 // an error message or trap reason
	maxNameBytes    = 256  // an import's module or field name
	maxLogLineBytes = 4096 // one guest log line
)

// safeLog wraps an Options.Log so that it is handed only escaped, capped
// text: a guest's log line cannot move the cursor, retitle the window, forge
// another line or flood the terminal.
func safeLog(log func(skill string, level Level, msg string)) func(string, Level, string) {
	if log == nil {
		return nil
	}
	return func(skill string, level Level, msg string) {
		log(textsafe.Terminal(skill, maxNameBytes), level, textsafe.Terminal(msg, maxLogLineBytes))
	}
}

// The error kinds of a skill call or load, matched with errors.Is. Typed errors
// below carry the detail and unwrap to one of these. They are the sentinels of
// package errs, re-exported so that callers of the runtime need import only it.
var (
	ErrFuelExhausted = errs.ErrFuelExhausted // the guest ran out of fuel (*FuelError)
	ErrTimeout       = errs.ErrTimeout       // the call passed its deadline (*TimeoutError)
	ErrCanceled      = errs.ErrCanceled      // the caller canceled the call
	ErrMemoryLimit   = errs.ErrMemoryLimit   // the guest hit its memory cap (*MemoryError)
	ErrTrap          = errs.ErrTrap          // the guest trapped (*TrapError)
	ErrForbidden     = errs.ErrForbidden     // an import or capability not granted (*ImportError)
	ErrTooLarge      = errs.ErrTooLarge      // input, output or a host buffer over its cap
	ErrInvalidInput  = errs.ErrInvalidInput  // bad input or a module that is not valid wasm (*ModuleError)
	ErrNotFound      = errs.ErrNotFound      // no such skill or export
	ErrDenied        = errs.ErrDenied        // approval refused
	ErrSkill         = errs.ErrSkill         // the skill reported a failure of its own (*SkillError)
	ErrConfig        = errs.ErrConfig        // a manifest or configuration error
	ErrInternal      = errs.ErrInternal      // a bug in buddy
)

// FuelError is returned when a call uses more fuel than its budget.
type FuelError struct {
	Used   uint64 // fuel consumed when the call was stopped (> Budget)
	Budget uint64
}

func (e *FuelError) Error() string {
	return fmt.Sprintf("used %d of %d fuel", e.Used, e.Budget)
}

// Unwrap makes errors.Is(err, ErrFuelExhausted) hold.
func (e *FuelError) Unwrap() error { return ErrFuelExhausted }

// TimeoutError is returned when a call passes its wall-clock deadline.
type TimeoutError struct {
	Limit time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("call did not finish within %s", e.Limit)
}

// Unwrap makes errors.Is(err, ErrTimeout) hold.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// MemoryError is returned when a guest runs out of its memory cap.
type MemoryError struct {
	Detail string
	CapMB  int
}

func (e *MemoryError) Error() string {
	if e.CapMB > 0 {
		return fmt.Sprintf("%s (cap %d MiB)", e.Detail, e.CapMB)
	}
	return e.Detail
}

// Unwrap makes errors.Is(err, ErrMemoryLimit) hold.
func (e *MemoryError) Unwrap() error { return ErrMemoryLimit }

// TrapError is returned when the guest traps: unreachable, an out-of-bounds
// access, a stack overflow, a division by zero, a broken memory contract.
type TrapError struct {
	Reason string // "unreachable", "out of bounds memory access", "stack overflow", ...
	Stack  string // the wasm stack trace, when wazero gave one
}

func (e *TrapError) Error() string { return textsafe.Terminal(e.Reason, maxShownBytes) }

// Unwrap makes errors.Is(err, ErrTrap) hold.
func (e *TrapError) Unwrap() error { return ErrTrap }

// ImportError is returned at load when a module imports something it may not:
// a host function that is not granted or not declared, a reserved or refused
// namespace, a non-function import, or a signature that does not match.
type ImportError struct {
	Module, Name string
	Reason       string // "not granted", "refused: ...", "signature mismatch: ..."
	// Kind is ErrForbidden for imports outside the grant and ErrInvalidInput for
	// imports that cannot work at all (bad signatures, memories).
	Kind error
}

func (e *ImportError) Error() string {
	return fmt.Sprintf("imports %s.%s, %s", textsafe.Terminal(e.Module, maxNameBytes), textsafe.Terminal(e.Name, maxNameBytes), e.Reason)
}

// Unwrap returns the kind.
func (e *ImportError) Unwrap() error { return e.Kind }

// ModuleError is returned at load for a module that is not usable wasm.
type ModuleError struct {
	Detail string
	Err    error
}

func (e *ModuleError) Error() string {
	if e.Err != nil {
		return textsafe.Terminal(fmt.Sprintf("%s: %v", e.Detail, e.Err), maxShownBytes)
	}
	return textsafe.Terminal(e.Detail, maxShownBytes)
}

// Unwrap makes errors.Is(err, ErrInvalidInput) hold, and exposes the cause.
func (e *ModuleError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidInput, e.Err}
	}
	return []error{ErrInvalidInput}
}

// SkillError is a failure the skill reported itself (Extism error_set, a
// non-zero return code, a WASI exit code). A message starting with a kind name
// ("forbidden: ...", as skillkit writes them) keeps that kind; any other is
// ErrSkill. Message is the guest's text as it sent it; Error shows it escaped
// and capped, as it shows every guest-controlled name or reason.
type SkillError struct {
	Code    uint32 // the export's return code
	Message string
	Kind    error
}

func (e *SkillError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("skill returned code %d", e.Code)
	}
	return textsafe.Terminal(e.Message, maxShownBytes)
}

// Unwrap returns the kind.
func (e *SkillError) Unwrap() error { return e.Kind }
