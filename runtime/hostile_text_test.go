package runtime_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/buddy-run/buddy/runtime"
)

// noRawControl fails if s holds a byte a terminal would obey: a control
// character, a bidi or other invisible format character, invalid UTF-8.
func noRawControl(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%s is not valid UTF-8: %q", what, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || (unicode.Is(unicode.Cf, r) && r != 0x200c && r != 0x200d) {
			t.Errorf("%s holds a raw %U: %q", what, r, s)
			return
		}
	}
}

// TestGuestTextIsEscaped: what a guest logs and the error it sets reach the
// embedder escaped and capped, whatever bytes the guest wrote.
func TestGuestTextIsEscaped(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	rt := newRuntime(t, runtime.Options{Log: func(skill string, level runtime.Level, msg string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, msg)
	}})

	t.Run("attacks", func(t *testing.T) {
		logs = nil
		mod := load(t, rt, "hostile_text.wasm", manifest("run", nil), nil)
		_, err := mod.Call(t.Context(), nil)
		var se *runtime.SkillError
		if !errors.As(err, &se) || !errors.Is(err, runtime.ErrSkill) {
			t.Fatalf("err = %v, want a SkillError", err)
		}
		if len(se.Message) != 68 {
			t.Errorf("Message holds %d bytes, want the guest's 68 as sent", len(se.Message))
		}
		const want = `\x1b]0;pwned\x07\x1b[2J\rforged\n[other] info: ok \u009b31m \u202etxt.exe \u2066 \xff\xfe\x7f\x00 end`
		if err.Error() != want {
			t.Errorf("error = %q\nwant    %q", err.Error(), want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(logs) != 2 {
			t.Fatalf("%d log lines, want 2: %q", len(logs), logs)
		}
		for _, l := range logs {
			if l != want {
				t.Errorf("log line = %q\nwant        %q", l, want)
			}
		}
	})

	t.Run("8 MiB", func(t *testing.T) {
		logs = nil
		mod := load(t, rt, "hostile_text.wasm", manifest("big", func(r *runtime.Resources) { r.MemoryMB = 64 }), nil)
		_, err := mod.Call(t.Context(), nil)
		if !errors.Is(err, runtime.ErrSkill) {
			t.Fatalf("err = %v, want skill_error", err)
		}
		msg := err.Error()
		noRawControl(t, "the error", msg)
		if len(msg) > 2100 || !strings.HasPrefix(msg, `\x1b[2J\x1b[2J`) || !strings.HasSuffix(msg, " more bytes]") {
			t.Errorf("error of %d bytes: %q…%q", len(msg), msg[:min(len(msg), 40)], msg[max(0, len(msg)-40):])
		}
	})
}

// TestImportNamesAreEscaped: the names a module gives its imports are its own
// text, shown escaped.
func TestImportNamesAreEscaped(t *testing.T) {
	err := &runtime.ImportError{Module: "env\x1b[2J", Name: "f\u202e" + strings.Repeat("x", 10_000), Reason: "not granted", Kind: runtime.ErrForbidden}
	msg := err.Error()
	noRawControl(t, "ImportError", msg)
	if !strings.HasPrefix(msg, `imports env\x1b[2J.f\u202exxx`) || len(msg) > 400 {
		t.Errorf("ImportError = %q", msg)
	}
	for _, e := range []error{
		&runtime.TrapError{Reason: "instantiating: import func[\x1b]0;x\x07]"},
		&runtime.ModuleError{Detail: "export \u2066x", Err: errors.New("\r")},
	} {
		noRawControl(t, "error", e.Error())
	}
}
