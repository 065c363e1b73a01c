// Package secrets is buddy's secret store and its redactor: credentials a
// skill may have sent on its behalf but never reads, and provider API keys.
//
// The store is a file encrypted at rest (AES-256-GCM) in buddy's data
// directory, its key in a separate file; both must be the user's own and
// mode 0600 (a file others can read or write is refused with the chmod that
// fixes it), and a store that does not decrypt is an error, never an empty
// store. Values are decrypted for the request that needs one (Secret) and
// cleared after it, as far as Go allows; what stays in memory for the life
// of the Store is a Redactor, which holds fingerprints of the values, not
// the values.
//
//	st, err := secrets.Open(dataDir)             // errs.ErrConfig: a key others can read, a corrupt store
//	err = st.Set(ctx, "github", token)           // buddy secret set github
//	v, err := st.Secret(ctx, "github")           // for one request; clear(v) after it
//	defer clear(v)
//	line := st.Redact("Bearer " + string(token)) // "Bearer [secret:github]"
//	log := slog.New(slog.NewTextHandler(st.Writer(os.Stderr), nil))
//
// Other packages take what they need of a *Store as a small interface:
// Source (values, for the code that sends them) and Redacting (text out).
package secrets

import (
	"context"
	"regexp"
)

// Source gives the value of a secret to the code that sends it (the HTTP
// host functions, a channel's connection). The caller clears the value
// once the request that used it is sent. A name not in the store is an
// error wrapping errs.ErrNotFound.
type Source interface {
	Secret(ctx context.Context, name string) ([]byte, error)
}

// Redacting replaces every secret buddy knows, raw or encoded, with
// "[secret:NAME]": in log lines, frames, results, rows. A *Store redacts
// with the secrets it holds now; a *Redactor with those it was built from.
type Redacting interface {
	Redact(s string) string
	RedactBytes(b []byte) []byte
}

// The store and a fixed redactor both redact.
var (
	_ Redacting = (*Store)(nil)
	_ Redacting = (*Redactor)(nil)
	_ Source    = (*Store)(nil)
)

// nameRE is the grammar of secret names: a letter, then letters, digits,
// '_' or '-', at most 64 in all (a TOML bare key, an environment variable
// name).
var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// ValidName reports whether s is a valid secret name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// NameRule is the grammar of names, in words, for error messages.
const NameRule = "a letter, then letters, digits, '_' or '-' (at most 64)"

// Nop redacts nothing: for code that runs without a secret store.
var Nop Redacting = (*Redactor)(nil)
