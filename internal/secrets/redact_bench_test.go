package secrets_test

import (
	"strings"
	"testing"
)

// BenchmarkRedact: what redacting costs a frame or a log line of 4 KiB
// (buddy redacts every one when the store holds secrets), with no secret in
// it (the usual case) and with one.
//
//	go test -run '^$' -bench BenchmarkRedact -benchmem -count 6 ./internal/secrets/
func BenchmarkRedact(b *testing.B) {
	r := redactor(b)
	clean := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 4096/45)
	for _, tc := range []struct{ name, text string }{
		{"clean-4KiB", clean},
		{"one-secret-4KiB", clean[:2048] + token + clean[2048:]},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				if out := r.Redact(tc.text); len(out) == 0 {
					b.Fatal("empty")
				}
			}
		})
	}
}
