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

// AppendJSONString appends s as a JSON string, escaping what JSON requires
// (quotes, backslashes, control characters) plus <, > and & and the line
// separators U+2028/U+2029 as encoding/json does. Invalid UTF-8 becomes
// U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
