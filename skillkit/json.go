package skillkit

import (
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// RawJSON is output that is already JSON: Handle writes it as it is, without
// going through encoding/json (whose reflection is slow under TinyGo and
// allocates several copies of a large string).
type RawJSON []byte

// Object builds a JSON object field by field into one buffer:
//
//	var o skillkit.Object
//	o.String("content", text)
//	o.Int("bytes", n)
//	return o.JSON(), nil
type Object struct {
	buf []byte
}

// Grow reserves room for n more bytes (avoids regrowing for a known size).
func (o *Object) Grow(n int) {
	if cap(o.buf)-len(o.buf) < n {
		b := make([]byte, len(o.buf), len(o.buf)+n)
		copy(b, o.buf)
		o.buf = b
	}
}

func (o *Object) key(k string) {
	if len(o.buf) == 0 {
		o.buf = append(o.buf, '{')
	} else {
		o.buf = append(o.buf, ',')
	}
	o.buf = AppendJSONString(o.buf, k)
	o.buf = append(o.buf, ':')
}

// String adds a string field.
func (o *Object) String(k, v string) { o.key(k); o.buf = AppendJSONString(o.buf, v) }

// Bytes adds a string field from bytes, without copying them into a string
// first (invalid UTF-8 becomes U+FFFD).
func (o *Object) Bytes(k string, v []byte) {
	o.key(k)
	o.buf = AppendJSONString(o.buf, unsafe.String(unsafe.SliceData(v), len(v)))
}

// Int adds an integer field.
func (o *Object) Int(k string, v int64) { o.key(k); o.buf = strconv.AppendInt(o.buf, v, 10) }

// Bool adds a boolean field.
func (o *Object) Bool(k string, v bool) { o.key(k); o.buf = strconv.AppendBool(o.buf, v) }

// Strings adds a field holding an array of strings, or null for a nil
// slice (as encoding/json writes a []string).
func (o *Object) Strings(k string, v []string) {
	o.key(k)
	if v == nil {
		o.buf = append(o.buf, "null"...)
		return
	}
	o.buf = append(o.buf, '[')
	for i, s := range v {
		if i > 0 {
			o.buf = append(o.buf, ',')
		}
		o.buf = AppendJSONString(o.buf, s)
	}
	o.buf = append(o.buf, ']')
}

// Raw adds a field whose value is already JSON.
func (o *Object) Raw(k string, v []byte) { o.key(k); o.buf = append(o.buf, v...) }

// JSON closes the object and returns it.
func (o *Object) JSON() RawJSON {
	if len(o.buf) == 0 {
		return RawJSON("{}")
	}
	return RawJSON(append(o.buf, '}'))
}

const hexDigits = "0123456789abcdef"

// asciiEscapes says how AppendJSONString writes each ASCII byte: 0 as it is,
// 'u' as \u00XX, any other letter c as a backslash then c.
const asciiEscapes = "uuuuuuuubtnufruu" +
	"uuuuuuuuuuuuuuuu" +
	"\x00\x00\"\x00\x00\x00u\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00u\x00u\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\\\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// SWAR constants: one bit or value in each of the 8 bytes of a word.
const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// load64 reads 8 bytes at p (any alignment; the byte order does not matter to
// the tests below, which only ask whether some byte matches).
func load64(p unsafe.Pointer) uint64 { return *(*uint64)(p) }

// plainWord reports whether none of the 8 bytes of w needs more than a copy
// into a JSON string: none is below 0x20, at or above 0x80 (UTF-8 to check),
// or one of " & < > \. Each (x - 0x01…) &^ x & 0x80… test below is exact as
// to whether some byte of x is zero.
func plainWord(w uint64) bool { return specialBits(w) == 0 }

// specialBits has the high bit of each byte of w that plainWord refuses set
// (and maybe of bytes above one, as borrows run up: nonzero is exact).
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

// plainPrefix returns how many bytes of s from i on are plain, 8 at a time:
// the result is i plus a multiple of 8, and the word there (if whole) is not
// plain.
func plainPrefix(s string, i int) int { return plainPrefixFrom(s, i, blockScan) }

// plainPrefixFrom is plainPrefix, first skipping whole 32-byte blocks with
// blocks set.
func plainPrefixFrom(s string, i int, blocks bool) int {
	p := unsafe.Pointer(unsafe.StringData(s))
	if blocks {
		for i+32 <= len(s) && plainBlock((*[32]byte)(unsafe.Add(p, i))) {
			i += 32
		}
	}
	for i+16 <= len(s) && specialBits(load64(unsafe.Add(p, i)))|specialBits(load64(unsafe.Add(p, i+8))) == 0 {
		i += 16
	}
	if i+8 <= len(s) && plainWord(load64(unsafe.Add(p, i))) {
		i += 8
	}
	return i
}

// plainBlock reports whether all 32 bytes of b are plain (as plainWord asks
// of 8). Written so that LLVM turns it into a few SIMD instructions (TinyGo
// with simd128: ~1 wasm instruction per byte where the words' arithmetic
// takes ~3); other compilers keep the words (blockScan).
func plainBlock(b *[32]byte) bool {
	var bad byte
	for _, c := range b {
		var x byte
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			x = 1
		}
		bad |= x
	}
	return bad == 0
}

// stringBlock reports whether all 32 bytes of b are held by a JSON string as
// they are (as stringPrefix asks): none is '"', '\\', a control character
// or non-ASCII.
func stringBlock(b *[32]byte) bool {
	var bad byte
	for _, c := range b {
		var x byte
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			x = 1
		}
		bad |= x
	}
	return bad == 0
}

// AppendJSONString appends s as a JSON string, escaping what JSON requires
// (quotes, backslashes, control characters) plus <, > and & and the line
// separators U+2028/U+2029 as encoding/json does. Invalid UTF-8 becomes
// U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	dst, _ = appendJSONString(dst, s, false)
	return dst
}

// Text adds a string field from bytes that must be UTF-8 text, and reports
// whether they were: if not, the object is left as it was. It checks and
// escapes in one pass (utf8.Valid then Bytes would read v twice), and stops
// at the first invalid byte (a binary file is refused without escaping it).
func (o *Object) Text(k string, v []byte) bool {
	n := len(o.buf)
	o.key(k)
	var valid bool
	o.buf, valid = appendJSONString(o.buf, unsafe.String(unsafe.SliceData(v), len(v)), true)
	if !valid {
		o.buf = o.buf[:n]
	}
	return valid
}

// appendJSONString is AppendJSONString, also reporting whether s was valid
// UTF-8; with strict, it returns at the first invalid byte (dst is then
// unfinished: the caller drops it). Runs of bytes that need no escaping are found 8 bytes at a time and
// appended with one copy each; from a word with some byte to escape or check
// on, bytes are written one by one (into room reserved for the longest
// escapes) until a plain word comes again.
func appendJSONString(dst []byte, s string, strict bool) ([]byte, bool) {
	valid := true
	dst = append(dst, '"')
	p := unsafe.Pointer(unsafe.StringData(s))
	start, i := 0, 0
	for {
		i = plainPrefix(s, i)
		if i >= len(s) {
			break
		}
		if start < i {
			dst = append(dst, s[start:i]...)
		}
		for {
			// s[i:end] byte by byte (a rune may run past end): at most 6
			// bytes out per byte in, plus a rune's tail.
			end := min(i+8, len(s))
			dst = grow(dst, 6*(end-i)+8)
			n := len(dst)
			out := dst[:cap(dst)]
			// ASCII bytes are written through a pointer: the room is there
			// (grow), and TinyGo would check the bounds of each store.
			o := unsafe.Pointer(unsafe.SliceData(out))
			for i < end {
				c := *(*byte)(unsafe.Add(p, i))
				if c < utf8.RuneSelf {
					q := unsafe.Add(o, n)
					switch e := asciiEscapes[c]; e {
					case 0:
						*(*byte)(q) = c
						n++
					case 'u':
						*(*byte)(q) = '\\'
						*(*byte)(unsafe.Add(q, 1)) = 'u'
						*(*byte)(unsafe.Add(q, 2)) = '0'
						*(*byte)(unsafe.Add(q, 3)) = '0'
						*(*byte)(unsafe.Add(q, 4)) = hexDigits[c>>4]
						*(*byte)(unsafe.Add(q, 5)) = hexDigits[c&0xf]
						n += 6
					default:
						*(*byte)(q) = '\\'
						*(*byte)(unsafe.Add(q, 1)) = e
						n += 2
					}
					i++
					continue
				}
				r, size := utf8.DecodeRuneInString(s[i:])
				switch {
				case r == utf8.RuneError && size == 1:
					if strict {
						return dst[:n], false
					}
					valid = false
					n += copy(out[n:], `\ufffd`)
				case r == '\u2028' || r == '\u2029':
					out[n], out[n+1], out[n+2], out[n+3], out[n+4], out[n+5] = '\\', 'u', '2', '0', '2', hexDigits[r&0xf]
					n += 6
				default:
					n += copy(out[n:], s[i:i+size])
				}
				i += size
			}
			dst = dst[:n]
			if i >= len(s) || i+8 <= len(s) && plainWord(load64(unsafe.Add(p, i))) {
				break
			}
		}
		start = i
	}
	if start < len(s) {
		dst = append(dst, s[start:]...)
	}
	return append(dst, '"'), valid
}

// grow returns dst with room for n more bytes.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	b := make([]byte, len(dst), 2*cap(dst)+n)
	copy(b, dst)
	return b
}
