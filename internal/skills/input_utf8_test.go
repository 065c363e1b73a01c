package skills_test

import (
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/skills"
)

// TestValidateInputUTF8: JSON input that is not valid UTF-8 is refused, with
// or without a schema, rather than decoded with U+FFFD in the bad bytes'
// place. Escaped code points (\u00e9, even \ufffd) are valid JSON and pass.
func TestValidateInputUTF8(t *testing.T) {
	schema := builtinSchema(t, "write_file")
	tests := []struct {
		name string
		in   string
		bad  bool
	}{
		{"UTF-8 content", `{"path":"a.txt","content":"café ✓"}`, false},
		{"escaped U+FFFD", `{"path":"a.txt","content":"\ufffd"}`, false},
		{"Latin-1 byte in a value", "{\"path\":\"a.txt\",\"content\":\"caf\xe9\"}", true},
		{"invalid byte in a key", "{\"pa\xffth\":\"a.txt\",\"content\":\"x\"}", true},
		{"truncated sequence at the end", "{\"path\":\"a.txt\",\"content\":\"\xe2\x9c\"}", true},
		{"UTF-16 surrogate encoded in UTF-8", "{\"path\":\"a.txt\",\"content\":\"\xed\xa0\x80\"}", true},
		{"outside any string", "{\"path\":\"a.txt\",\"content\":\"x\"}\xff", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range []map[string]any{schema, nil} {
				err := skills.ValidateInput(s, []byte(tt.in))
				if !tt.bad {
					if err != nil {
						t.Fatalf("ValidateInput = %v", err)
					}
					continue
				}
				if errs.KindOf(err) != errs.KindInvalidInput || !strings.Contains(err.Error(), "input is not valid UTF-8") {
					t.Fatalf("ValidateInput = %v, want invalid_input: not valid UTF-8", err)
				}
			}
		})
	}
}
