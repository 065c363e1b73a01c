package hostfns

import (
	"encoding/binary"
	"unicode/utf8"
)

// writeJSONText writes s as a JSON string literal into dst, as far as it
// fits, and returns the literal's whole length n (when n > len(dst), dst
// holds only a beginning of it) and whether s is UTF-8 text: at the first
// invalid byte it stops, and n means nothing. The escaping is
// encoding/json's (and skillkit's): quotes, backslashes and control
// characters (\b \t \n \f \r, others \u00XX), plus <, > and & and the line
// separators U+2028 and U+2029; everything else is copied as it is. Runs
// of bytes that need nothing are found 32 and 8 bytes at a time (plainRun)
// and copied at once.
func writeJSONText(dst, s []byte) (n int, valid bool) {
	// put writes b at n as far as dst has room (copy stops at its end),
	// and counts it whole.
	put := func(b []byte) {
		if n < len(dst) {
			copy(dst[n:], b)
		}
		n += len(b)
	}
	var esc [6]byte
	put([]byte{'"'})
	start, i := 0, 0
	for i < len(s) {
		if i = plainRun(s, i); i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			e := jsonEscapes[c]
			if e == 0 {
				i++
				continue
			}
			put(s[start:i])
			if e == 'u' {
				esc = [6]byte{'\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf]}
				put(esc[:])
			} else {
				esc[0], esc[1] = '\\', e
				put(esc[:2])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return n, false
		case r == '\u2028' || r == '\u2029':
			put(s[start:i])
			esc = [6]byte{'\\', 'u', '2', '0', '2', hexDigits[r&0xf]}
			put(esc[:])
			start = i + size
		}
		i += size
	}
	put(s[start:])
	put([]byte{'"'})
	return n, true
}

const hexDigits = "0123456789abcdef"

// jsonEscapes says how writeJSONText writes each ASCII byte: 0 as it is,
// 'u' as \u00XX, any other letter c as a backslash then c.
var jsonEscapes = func() (t [utf8.RuneSelf]byte) {
	for c := range 0x20 {
		t[c] = 'u'
	}
	t['\b'], t['\t'], t['\n'], t['\f'], t['\r'] = 'b', 't', 'n', 'f', 'r'
	t['"'], t['\\'] = '"', '\\'
	t['<'], t['>'], t['&'] = 'u', 'u', 'u'
	return t
}()

// SWAR constants: one bit or value in each of the 8 bytes of a word.
const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// specialBits is nonzero when some byte of w needs more than a copy into a
// JSON string: below 0x20, at or above 0x80 (UTF-8 to check), or one of
// " & < > \ (skillkit's test, json.go). Each (x - 0x01…) &^ x & 0x80… test
// is exact as to whether some byte of x is zero.
func specialBits(w uint64) uint64 {
	ctl := (w - 0x20*lsbs) &^ w       // some byte below 0x20
	qa := (w | 0x04*lsbs) ^ 0x26*lsbs // '"' (0x22) and '&' (0x26) become 0, only they
	qa = (qa - lsbs) &^ qa
	lg := (w | 0x02*lsbs) ^ 0x3e*lsbs // '<' (0x3c) and '>' (0x3e) become 0, only they
	lg = (lg - lsbs) &^ lg
	bs := w ^ 0x5c*lsbs // '\\' becomes 0
	bs = (bs - lsbs) &^ bs
	return (ctl | qa | lg | bs | w) & msbs // w: some byte at or above 0x80
}

// plainRun returns how many bytes of s from i on are plain: with AVX2 32 at
// a time (plainrun_amd64.s), else 32 then 8 at a time (four words per round,
// independent of each other: they overlap in the CPU). Either stops at or
// before the first byte that is not plain.
func plainRun(s []byte, i int) int {
	if useAVX2 && len(s)-i >= 32 {
		i += plainRunAVX2(s[i:])
	}
	for i+32 <= len(s) {
		w := s[i : i+32]
		if specialBits(binary.LittleEndian.Uint64(w))|specialBits(binary.LittleEndian.Uint64(w[8:]))|
			specialBits(binary.LittleEndian.Uint64(w[16:]))|specialBits(binary.LittleEndian.Uint64(w[24:])) != 0 {
			break
		}
		i += 32
	}
	for i+8 <= len(s) && specialBits(binary.LittleEndian.Uint64(s[i:])) == 0 {
		i += 8
	}
	return i
}
