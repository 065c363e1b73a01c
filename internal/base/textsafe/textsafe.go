// Package textsafe makes untrusted text safe to show on a terminal: text from a
// skill (its logs, its error messages), from a manifest (a description, an
// author), from a model (the arguments of a call) or from upstream (an error a
// server provoked). It is the one sanitizer every front end uses, so that
// "what reaches the terminal" is a one-package review.
//
//	fmt.Fprintf(w, "  %s\n", textsafe.Terminal(m.Description, 1024))  // one line
//	fmt.Fprintf(w, "%s\n", textsafe.Block(schemaJSON, 8192))          // keeps \n and \t
//
// What is escaped, so that it is seen rather than obeyed: every control
// character (C0 including ESC, CR, BEL and, in Terminal, \n and \t; DEL; C1
// U+0080–U+009F, whose U+009B is a one-byte CSI), the invisible format
// characters (Unicode category Cf: bidi embeddings, overrides, isolates and
// marks U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C; zero-width
// spaces; the BOM; tag characters) except the joiners U+200C and U+200D that
// scripts and emoji need, the line and paragraph separators U+2028 and U+2029,
// and every byte that is not valid UTF-8. Escapes are \n, \r, \t, \xNN for a
// byte and \uNNNN or \UNNNNNNNN for a code point. Backslashes are left alone:
// the output is safe, not reversible (a literal `\x1b` and an escaped ESC look
// the same).
//
// Each call caps its output: at most max bytes of escaped text, then a marker
// saying how many bytes of the input were not shown ("… [8,388,500 more
// bytes]"). Work is bounded by max, not by the input's length.
package textsafe

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// DefaultMax is the cap used when a caller passes max ≤ 0.
const DefaultMax = 1024

// Terminal returns s fit for one line of a terminal: every control character,
// newlines and tabs included, and every invisible format character is escaped,
// invalid UTF-8 too, and the result holds at most max bytes of text plus a
// marker saying how much was cut. max ≤ 0 means DefaultMax.
func Terminal(s string, max int) string { return marked(render(s, max, false)) }

// Block is Terminal for multi-line text: \n and \t are kept as they are; every
// other control character (CR included: it would let a line overwrite the
// one before) is escaped.
func Block(s string, max int) string { return marked(render(s, max, true)) }

// Prefix is Terminal without the marker: the escaped text that fits in max
// bytes, and how many bytes of s it leaves out, for callers that say so in
// their own words ("content: 10,485,760 bytes, first 200: ...").
func Prefix(s string, max int) (shown string, rest int) { return render(s, max, false) }

func marked(shown string, rest int) string {
	if rest > 0 {
		return shown + Cut(rest)
	}
	return shown
}

// Bytes formats a byte count with thousands separators: 10485760 →
// "10,485,760".
func Bytes(n int) string {
	s := strconv.Itoa(n)
	neg := false
	if n < 0 {
		neg, s = true, s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Cut returns the marker that replaces n bytes left out: "… [1,024 more bytes]".
func Cut(n int) string { return "… [" + Bytes(n) + " more bytes]" }

// Safe reports whether r may reach a terminal as it is. \n and \t are not safe
// here; Block lets them through itself.
func Safe(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return true // a valid U+FFFD; invalid bytes are handled by the caller
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return false // C0, DEL, C1
	case r == 0x200c, r == 0x200d:
		return true // ZWNJ and ZWJ: Persian, Indic scripts, emoji sequences
	case r == 0x2028, r == 0x2029:
		return false // line and paragraph separators
	case r < 0xad:
		return true
	}
	return !unicode.Is(unicode.Cf, r) && !unicode.Is(unicode.Cs, r)
}

func render(s string, max int, multiline bool) (string, int) {
	if max <= 0 {
		max = DefaultMax
	}
	// Fast path: short and clean text is returned as it is.
	if len(s) <= max && clean(s, multiline) {
		return s, 0
	}
	out := make([]byte, 0, min(len(s), max)+32)
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		var esc []byte
		switch {
		case r == utf8.RuneError && size == 1:
			esc = appendHexByte(nil, s[i])
		case multiline && (r == '\n' || r == '\t'):
		case !Safe(r):
			esc = appendEscape(nil, r)
		}
		n := size
		if esc != nil {
			n = len(esc)
		}
		if len(out)+n > max {
			break
		}
		if esc != nil {
			out = append(out, esc...)
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(out), len(s) - i
}

// clean reports whether s holds nothing to escape.
func clean(s string, multiline bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				if !multiline || (c != '\n' && c != '\t') {
					return false
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !Safe(r) {
			return false
		}
		i += size
	}
	return true
}

func appendEscape(b []byte, r rune) []byte {
	switch r {
	case '\n':
		return append(b, `\n`...)
	case '\r':
		return append(b, `\r`...)
	case '\t':
		return append(b, `\t`...)
	}
	if r < 0x80 {
		return appendHexByte(b, byte(r))
	}
	const hex = "0123456789abcdef"
	if r > 0xffff {
		b = append(b, `\U`...)
		for shift := 28; shift >= 0; shift -= 4 {
			b = append(b, hex[r>>uint(shift)&0xf])
		}
		return b
	}
	b = append(b, `\u`...)
	for shift := 12; shift >= 0; shift -= 4 {
		b = append(b, hex[r>>uint(shift)&0xf])
	}
	return b
}

func appendHexByte(b []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
}
