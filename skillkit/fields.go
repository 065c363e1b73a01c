package skillkit

import (
	"unicode/utf8"
	"unsafe"
)

// Reflection-free input decoding. encoding/json finds a struct's fields by
// reflection, which under TinyGo costs ~20,000 wasm instructions for a
// one-field input and ~170 per byte of a long string. An input type that
// lists its fields (Fielder) is decoded by a small parser instead, which takes
// only the plainest JSON: one object, each key spelled exactly as listed and
// at most once, values of the listed types. Anything else — a key in another
// case, an unknown or repeated key, a null in a string map, a lone
// surrogate, invalid UTF-8, bad syntax — goes to encoding/json as before, so
// every input decodes to the same value, or fails with the same error, either
// way.

// smallRest is the most an escaped string's buffer may overshoot it by
// (decoder.string).
const smallRest = 64 << 10

// stringEnd is the index of the quote that closes the string whose escape
// starts at data[i], or -1.
func stringEnd(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case '\\':
			i += 2
		case '"':
			return i
		default:
			i = stringPrefix(data, i+1)
		}
	}
	return -1
}

// Field binds a key of a JSON object input to a variable; make one with
// StringField, StringPtrField, IntField or BoolField.
type Field struct {
	name string
	kind fieldKind
	str  *string
	strp **string
	num  *int
	flag *bool
}

type fieldKind uint8

const (
	fieldString fieldKind = iota + 1
	fieldStringPtr
	fieldInt
	fieldBool
)

// StringField binds key name to a string variable (a struct field of type
// string tagged `json:"name"`).
func StringField(name string, p *string) Field { return Field{name: name, kind: fieldString, str: p} }

// StringPtrField binds key name to a *string variable, which stays nil when
// the key is absent.
func StringPtrField(name string, p **string) Field {
	return Field{name: name, kind: fieldStringPtr, strp: p}
}

// IntField binds key name to an int variable. Only integers in int's range
// are taken; 1.0 or 1e3 fail as they do with encoding/json.
func IntField(name string, p *int) Field { return Field{name: name, kind: fieldInt, num: p} }

// BoolField binds key name to a bool variable.
func BoolField(name string, p *bool) Field { return Field{name: name, kind: fieldBool, flag: p} }

// Fielder is implemented by (a pointer to) an input type of Handle or
// InputJSON that lists its JSON fields, each bound to the struct field that
// encoding/json would fill for that key:
//
//	type input struct {
//		Path string `json:"path"`
//	}
//
//	func (in *input) JSONFields() []skillkit.Field {
//		return []skillkit.Field{skillkit.StringField("path", &in.Path)}
//	}
//
// The input is then decoded without reflection when it is plain JSON, and by
// encoding/json otherwise, with the same result. A list that disagrees with
// the struct tags would make the two disagree: keep them side by side.
type Fielder interface {
	JSONFields() []Field
}

// fieldValue is a decoded value waiting for the whole input to be accepted.
type fieldValue struct {
	set  bool
	null bool
	str  string
	num  int
	flag bool
}

// decodeFields decodes data, a JSON object, into fields and reports whether
// it could; when it cannot, no field has been written and the caller decodes
// with encoding/json instead.
func decodeFields(data []byte, fields []Field) bool {
	if len(fields) > 64 {
		return false
	}
	vals := make([]fieldValue, len(fields))
	var seen uint64
	ok := walkObject(data, func(key string, escaped bool, d *decoder) bool {
		if escaped {
			return false
		}
		f := -1
		for k := range fields {
			if fields[k].name == key {
				f = k
				break
			}
		}
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		v := &vals[f]
		v.set = true
		if d.literal("null") {
			// encoding/json: null leaves a string, int or bool as it is and
			// sets a pointer to nil.
			v.null = true
			return true
		}
		switch fields[f].kind {
		case fieldString, fieldStringPtr:
			s, ok := d.string()
			v.str = s
			return ok
		case fieldInt:
			n, ok := d.int()
			v.num = n
			return ok
		case fieldBool:
			switch {
			case d.literal("true"):
				v.flag = true
			case d.literal("false"):
			default:
				return false
			}
			return true
		}
		return false
	})
	if !ok {
		return false
	}
	for k, v := range vals {
		if !v.set {
			continue
		}
		f := &fields[k]
		switch f.kind {
		case fieldString:
			if !v.null {
				*f.str = v.str
			}
		case fieldStringPtr:
			if v.null {
				*f.strp = nil
			} else {
				s := v.str
				*f.strp = &s
			}
		case fieldInt:
			if !v.null {
				*f.num = v.num
			}
		case fieldBool:
			if !v.null {
				*f.flag = v.flag
			}
		}
	}
	return true
}

// decodeStringMap decodes a JSON object of strings (no nulls) into a map, as
// encoding/json would; false means it could not, and the caller falls back.
func decodeStringMap(data []byte) (map[string]string, bool) {
	m := map[string]string{}
	ok := walkObject(data, func(key string, escaped bool, d *decoder) bool {
		v, ok := d.string()
		m[key] = v
		return ok
	})
	return m, ok
}

// walkObject parses data as one JSON object with nothing but whitespace
// around it, calling member with each key (unescaped; escaped says whether
// it had escapes) and the decoder positioned at the value, which member must
// consume. It reports false at the first thing it does not take.
func walkObject(data []byte, member func(key string, escaped bool, d *decoder) bool) bool {
	d := &decoder{data: data}
	d.space()
	if !d.byte('{') {
		return false
	}
	d.space()
	if !d.byte('}') {
		for {
			start := d.i
			key, ok := d.string()
			if !ok {
				return false
			}
			escaped := d.i-start-2 != len(key)
			d.space()
			if !d.byte(':') {
				return false
			}
			d.space()
			if !member(key, escaped, d) {
				return false
			}
			d.space()
			if d.byte('}') {
				break
			}
			if !d.byte(',') {
				return false
			}
			d.space()
		}
	}
	d.space()
	return d.i == len(data)
}

// decoder reads JSON tokens from data at i.
type decoder struct {
	data []byte
	i    int
}

func (d *decoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte consumes c if it comes next.
func (d *decoder) byte(c byte) bool {
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

// literal consumes lit (true, false, null) if it comes next. A letter or
// digit right after it is left for the caller's next check to refuse.
func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.i >= len(lit) && string(d.data[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// int reads an integer: -?(0|[1-9][0-9]*) within int's range. What may follow
// (a fraction, an exponent, another digit after 0) is left to the caller's
// next check, which refuses it.
func (d *decoder) int() (int, bool) {
	neg := d.byte('-')
	start := d.i
	var n int64
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		if d.i-start == 18 {
			return 0, false // past what int64 surely holds: let encoding/json say
		}
		n = n*10 + int64(d.data[d.i]-'0')
		d.i++
		if n == 0 {
			break // a leading 0 is the whole integer part
		}
	}
	if d.i == start {
		return 0, false
	}
	if neg {
		n = -n
	}
	if int64(int(n)) != n {
		return 0, false
	}
	return int(n), true
}

// string reads a JSON string, quotes included. Without escapes the result
// shares data's bytes. It refuses control characters, invalid UTF-8, bad
// escapes and lone surrogates, all of which encoding/json either rejects or
// rewrites.
func (d *decoder) string() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	data := d.data
	i, run := d.i, d.i
	// buf is nil until the first escape, then has room for the rest of the
	// string (unescaping only shortens, so buf[n] never goes past it): the
	// rest of data when that is small, else the string's own length, found
	// first, so that a short string before a long one does not cost the
	// long one's size (the leaking GC never gives it back).
	var buf []byte
	n := 0
	for {
		i = stringPrefix(data, i)
		if i >= len(data) {
			return "", false
		}
		switch c := data[i]; {
		case c == '"':
			d.i = i + 1
			if buf == nil {
				return unsafe.String(unsafe.SliceData(data[run:]), i-run), true
			}
			n += copy(buf[n:], data[run:i])
			return unsafe.String(unsafe.SliceData(buf), n), true
		case c == '\\':
			if buf == nil {
				size := len(data) - run
				if size > smallRest {
					end := stringEnd(data, i)
					if end < 0 {
						return "", false
					}
					size = end - run
				}
				buf = make([]byte, size)
			}
			n += copy(buf[n:], data[run:i])
			if i+1 >= len(data) {
				return "", false
			}
			e := data[i+1]
			switch e {
			case '"', '\\', '/':
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			case 'u':
				r, ok := hex4(data, i+2)
				if !ok {
					return "", false
				}
				if r >= 0xd800 && r < 0xe000 {
					// Only a high surrogate followed by an escaped low one.
					lo, ok := rune(0), false
					if r < 0xdc00 && i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						lo, ok = hex4(data, i+8)
					}
					if !ok || lo < 0xdc00 || lo >= 0xe000 {
						return "", false
					}
					r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
					i += 6
				}
				n += utf8.EncodeRune(buf[n:], r)
				i += 6
				run = i
				continue
			default:
				return "", false
			}
			buf[n] = e
			n++
			i += 2
			run = i
		case c < 0x20:
			return "", false
		default: // c >= 0x80
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			i += size
		}
	}
}

// hex4 reads 4 hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// stringPrefix skips, 8 bytes at a time, the bytes from i on that a JSON
// string holds as they are: all but '"', '\\', control characters and
// non-ASCII. It stops at the first word holding one of those (or the tail).
func stringPrefix(data []byte, i int) int {
	p := unsafe.Pointer(unsafe.SliceData(data))
	for i+8 <= len(data) {
		w := load64(unsafe.Add(p, i))
		q := w ^ 0x22*lsbs
		b := w ^ 0x5c*lsbs
		if ((w-0x20*lsbs)&^w|(q-lsbs)&^q|(b-lsbs)&^b|w)&msbs != 0 {
			break
		}
		i += 8
	}
	for i < len(data) {
		if c := data[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			break
		}
		i++
	}
	return i
}
