package secrets

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MinValueBytes is the shortest secret buddy matches: a shorter one would
// match ordinary text (redacting it everywhere, refusing requests that merely
// contain it). The store refuses shorter values; a provider key shorter than
// this from api_key_env is sent but not matched (docs/RATIONALE.md).
const MinValueBytes = 8

// prefixBytes is the window the prefilter hashes at every position: every
// form of a secret is at least MinValueBytes long.
const prefixBytes = MinValueBytes

// filterBits sizes the prefilter: one bit per value of a 16-bit hash of the
// first prefixBytes of a form.
const filterBits = 1 << 16

// Marker is what a secret is replaced with: "[secret:NAME]".
func Marker(name string) string { return "[secret:" + name + "]" }

// Redactor finds and replaces the exact bytes of a set of secrets, raw and in
// their common encodings (JSON and Go string escapes, base64 and base64url at
// every alignment, hex in either case, URL query and path escaping, full
// percent-encoding). It holds no secret: only, for each form, its length,
// a 16-bit hash of its first 8 bytes and an HMAC-SHA256 of the whole under a
// key of its own, made when it was built. A candidate at some position of a
// text is confirmed by the HMAC of the bytes there. It is immutable and safe
// for concurrent use; the nil *Redactor matches nothing.
//
//	r := secrets.NewRedactor(map[string][]byte{"github": token})
//	r.Redact("Authorization: Bearer " + string(token)) // "Authorization: Bearer [secret:github]"
//	r.Find([]byte(base64.StdEncoding.EncodeToString(token))) // ["github"]
type Redactor struct {
	fp     *fingerprinter
	filter []uint64
	index  map[uint16][]int32
	pats   []pattern
	maxLen int
}

// pattern is one form of one secret, as a fingerprint.
type pattern struct {
	name string
	n    int
	mac  [sha256.Size]byte
	pre  uint16
}

// fingerprinter holds the keys fingerprints are made with. A Store keeps
// one for its life, so that the fingerprints of values it was told of once
// (Also) stay valid in every Redactor it builds.
type fingerprinter struct {
	mul  uint64 // odd: the prefilter's multiplicative hash
	macs sync.Pool
}

func newFingerprinter() *fingerprinter {
	var seed [8 + 32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("secrets: no randomness: " + err.Error())
	}
	f := &fingerprinter{mul: binary.LittleEndian.Uint64(seed[:8]) | 1}
	key := slices.Clone(seed[8:])
	f.macs.New = func() any { return hmac.New(sha256.New, key) }
	return f
}

func (f *fingerprinter) prefix(b []byte) uint16 { return prefixOf(f, b) }

// prefixOf is the prefilter's hash of b's first 8 bytes (little-endian),
// for a string or bytes alike.
func prefixOf[T ~string | ~[]byte](f *fingerprinter, b T) uint16 {
	_ = b[7]
	v := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	return uint16((v * f.mul) >> 48)
}

func (f *fingerprinter) mac(b []byte) (out [sha256.Size]byte) {
	m := f.macs.Get().(hash.Hash)
	m.Write(b)
	m.Sum(out[:0])
	m.Reset()
	f.macs.Put(m)
	return out
}

// patterns fingerprints every form of value under name; a value under
// MinValueBytes has none.
func (f *fingerprinter) patterns(name string, value []byte) []pattern {
	if len(value) < MinValueBytes {
		return nil
	}
	var out []pattern
	for _, form := range forms(value) {
		if len(form) < prefixBytes {
			continue
		}
		out = append(out, pattern{name: name, n: len(form), mac: f.mac(form), pre: f.prefix(form)})
		clear(form)
	}
	return out
}

// NewRedactor returns a Redactor for the given secrets by name. Values
// shorter than MinValueBytes are not matched. The caller may clear the
// values afterwards: the Redactor keeps none of their bytes.
func NewRedactor(values map[string][]byte) *Redactor {
	f := newFingerprinter()
	var pats []pattern
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		pats = append(pats, f.patterns(n, values[n])...)
	}
	return build(f, pats)
}

// build indexes patterns (made by f).
func build(f *fingerprinter, pats []pattern) *Redactor {
	r := &Redactor{fp: f, filter: make([]uint64, filterBits/64), index: map[uint16][]int32{}}
	seen := map[[sha256.Size]byte]bool{}
	for _, p := range pats {
		if seen[p.mac] {
			continue // the same form of two names: the first (sorted) names it
		}
		seen[p.mac] = true
		i := int32(len(r.pats))
		r.pats = append(r.pats, p)
		r.filter[p.pre/64] |= 1 << (p.pre % 64)
		r.index[p.pre] = append(r.index[p.pre], i)
		r.maxLen = max(r.maxLen, p.n)
	}
	// Longest first, so that the first confirmed candidate at a position is
	// the longest form there.
	for k, list := range r.index {
		slices.SortFunc(list, func(a, b int32) int { return r.pats[b].n - r.pats[a].n })
		r.index[k] = list
	}
	return r
}

// Empty reports whether r matches nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.pats) == 0 }

// Names are the secrets r matches, sorted.
func (r *Redactor) Names() []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, p := range r.pats {
		if !slices.Contains(out, p.name) {
			out = append(out, p.name)
		}
	}
	slices.Sort(out)
	return out
}

// scan calls fn with every match in b, left to right, never overlapping: at
// each position the longest form that matches.
func (r *Redactor) scan(b []byte, fn func(start, end int, name string)) { scanAny(r, b, fn) }

// scanAny is scan for a string or bytes: a string is read in place, and
// copied only where a candidate's fingerprint is checked.
func scanAny[T ~string | ~[]byte](r *Redactor, b T, fn func(start, end int, name string)) {
	if r.Empty() {
		return
	}
	for i := 0; i+prefixBytes <= len(b); i++ {
		h := prefixOf(r.fp, b[i:])
		if r.filter[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, pi := range r.index[h] {
			p := &r.pats[pi]
			if i+p.n > len(b) || r.fp.mac([]byte(b[i:i+p.n])) != p.mac {
				continue
			}
			fn(i, i+p.n, p.name)
			i += p.n - 1
			break
		}
	}
}

// Find returns the names of the secrets b contains, in any form r knows,
// sorted and distinct; nil when it contains none.
func (r *Redactor) Find(b []byte) []string {
	var out []string
	r.scan(b, func(_, _ int, name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	})
	slices.Sort(out)
	return out
}

// Contains reports whether b contains any secret r knows.
func (r *Redactor) Contains(b []byte) bool { return len(r.Find(b)) > 0 }

// RedactBytes returns b with every secret, in any form r knows, replaced by
// its Marker. When there is none it returns b itself (not a copy).
func (r *Redactor) RedactBytes(b []byte) []byte {
	out, _ := r.redact(b)
	return out
}

// redact is RedactBytes, and whether anything was replaced.
func (r *Redactor) redact(b []byte) ([]byte, bool) {
	out := redactAny(r, b)
	if out == nil {
		return b, false
	}
	return out, true
}

// redactAny is b with every match replaced, or nil when b holds none (so
// that a text without secrets costs no copy).
func redactAny[T ~string | ~[]byte](r *Redactor, b T) []byte {
	var out []byte
	last := 0
	scanAny(r, b, func(start, end int, name string) {
		if out == nil {
			out = make([]byte, 0, len(b))
		}
		out = append(out, b[last:start]...)
		out = append(out, Marker(name)...)
		last = end
	})
	if out == nil {
		return nil
	}
	return append(out, b[last:]...)
}

// Redact is RedactBytes for a string.
func (r *Redactor) Redact(s string) string {
	if r.Empty() || len(s) < prefixBytes {
		return s
	}
	if out := redactAny(r, s); out != nil {
		return string(out)
	}
	return s
}

// Stream redacts text that arrives in pieces (a model's answer, streamed):
// a secret split across two pieces is still replaced. Write returns what can
// be shown now; it holds back at most the longest form's length less one
// byte, which Flush returns at the end. A Stream is not safe for concurrent
// use.
type Stream struct {
	r    *Redactor
	held []byte
}

// Stream starts a Stream.
func (r *Redactor) Stream() *Stream { return &Stream{r: r} }

// Write adds a piece and returns the redacted text that can be shown now.
func (s *Stream) Write(piece string) string {
	if s.r.Empty() {
		return piece
	}
	buf := append(s.held, piece...)
	cut := len(buf) - (s.r.maxLen - 1) // a match starting before cut lies wholly in buf
	if cut <= 0 {
		s.held = buf
		return ""
	}
	var out []byte
	last := 0
	s.r.scan(buf, func(start, end int, name string) {
		if start >= cut {
			return
		}
		out = append(out, buf[last:start]...)
		out = append(out, Marker(name)...)
		last = end
	})
	if last > cut {
		cut = last
	}
	// Never split a UTF-8 sequence between what is shown and what is held.
	for cut > last && cut < len(buf) && !utf8.RuneStart(buf[cut]) {
		cut--
	}
	out = append(out, buf[last:cut]...)
	s.held = append([]byte(nil), buf[cut:]...)
	return string(out)
}

// Flush returns what Write held back, redacted, and resets the Stream.
func (s *Stream) Flush() string {
	b := s.held
	s.held = nil
	return string(s.r.RedactBytes(b))
}

// Writer returns a writer that redacts each Write before passing it on to w:
// for writers that get whole records per Write (slog handlers, line
// loggers). It reports len(p) written when w took the redacted bytes.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if _, err := w.Write(r.RedactBytes(p)); err != nil {
			return 0, err
		}
		return len(p), nil
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// forms are the encodings of v that are matched: v itself, its JSON and Go
// string escapes, base64 and base64url at each of the three alignments (the
// characters that depend on v's bits alone), hex in lower and upper case,
// URL query and path escaping, and every byte percent-encoded in either case.
func forms(v []byte) [][]byte {
	var out [][]byte
	add := func(f []byte) {
		for _, o := range out {
			if bytes.Equal(o, f) {
				return
			}
		}
		out = append(out, f)
	}
	add(slices.Clone(v))
	if j, err := json.Marshal(string(v)); err == nil && utf8.Valid(v) {
		add(j[1 : len(j)-1])
	}
	if q := strconv.Quote(string(v)); len(q) >= 2 {
		add([]byte(q[1 : len(q)-1]))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for k := 0; k < 3; k++ {
			src := append(make([]byte, k), v...)
			e := make([]byte, enc.EncodedLen(len(src)))
			enc.Encode(e, src)
			start := (8*k + 5) / 6        // the first character made of v's bits only
			end := (8 * (k + len(v))) / 6 // past the last
			if end > start {
				add(e[start:end])
			}
		}
	}
	h := []byte(hex.EncodeToString(v))
	add(h)
	add(bytes.ToUpper(h))
	add([]byte(url.QueryEscape(string(v))))
	add([]byte(url.PathEscape(string(v))))
	var lower, upper strings.Builder
	for _, c := range v {
		lower.WriteString("%" + hex.EncodeToString([]byte{c}))
		upper.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	add([]byte(lower.String()))
	add([]byte(upper.String()))
	return out
}
