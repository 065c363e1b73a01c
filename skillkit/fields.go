package skillkit

import (
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Reflection-free JSON decoding. encoding/json finds a struct's fields by
// reflection, which under TinyGo costs ~20,000 wasm instructions for a
// one-field input and ~170 per byte of a long string, and linking it (with
// reflect and fmt) makes a built-in ~230 KB where it is otherwise ~20 KB. An
// input type that lists its fields (Fielder) is decoded here instead, with
// encoding/json's rules for the kinds of field there are:
//
//   - the input is one JSON value with only whitespace around it, checked
//     whole (a syntax error anywhere is reported, before any type error);
//   - null at the top leaves every field as it is; an object fills them;
//   - a key matches the field of that name, else the first whose name is
//     equal under Unicode case folding (strings.EqualFold, which is what
//     encoding/json's folding amounts to); unknown keys are skipped, and a
//     repeated key is decoded again (the last value stays);
//   - null leaves a string, int or bool as it is and sets a pointer or slice
//     to nil;
//   - strings are unescaped as encoding/json does it: invalid UTF-8 and lone
//     surrogates become U+FFFD;
//   - an int takes an integer literal in int's range (1.0, 1e3 are refused);
//   - anything else (a number for a string, a string for an int...) is an
//     error.
//
// One difference, on error only: encoding/json writes the fields it could
// before reporting a type error, decodeFields writes none.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// smallRest is the most an escaped string's buffer may overshoot it by
// (decoder.string).
const smallRest = 64 << 10

// Field binds a key of a JSON object input to a variable; make one with
// StringField, StringPtrField, StringsField, IntField, Int64Field or
// BoolField.
type Field struct {
	name string
	kind fieldKind
	str  *string
	strp **string
	strs *[]string
	num  *int
	num6 *int64
	flag *bool
}

type fieldKind uint8

const (
	fieldString fieldKind = iota + 1
	fieldStringPtr
	fieldStrings
	fieldInt
	fieldInt64
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

// StringsField binds key name to a []string variable: an array of strings
// (a null element is ""), or null for nil.
func StringsField(name string, p *[]string) Field {
	return Field{name: name, kind: fieldStrings, strs: p}
}

// IntField binds key name to an int variable. Only integers in int's range
// are taken; 1.0 or 1e3 fail as they do with encoding/json.
func IntField(name string, p *int) Field { return Field{name: name, kind: fieldInt, num: p} }

// Int64Field binds key name to an int64 variable.
func Int64Field(name string, p *int64) Field { return Field{name: name, kind: fieldInt64, num6: p} }

// BoolField binds key name to a bool variable.
func BoolField(name string, p *bool) Field { return Field{name: name, kind: fieldBool, flag: p} }

// Fielder is implemented by (a pointer to) an input type of Handle,
// HandleFields or InputJSON that lists its JSON fields, each bound to the
// struct field that encoding/json would fill for that key:
//
//	type input struct {
//		Path string `json:"path"`
//	}
//
//	func (in *input) JSONFields() []skillkit.Field {
//		return []skillkit.Field{skillkit.StringField("path", &in.Path)}
//	}
//
// The input is then decoded without reflection, to the value encoding/json
// would give. A list that disagrees with the struct tags would make the two
// disagree: keep them side by side.
type Fielder interface {
	JSONFields() []Field
}

// fieldValue is a decoded value waiting for the whole input to be accepted.
type fieldValue struct {
	set  bool
	null bool // a pointer or slice set to nil
	str  string
	strs []string
	num  int64
	flag bool
}

// decodeFields decodes data into fields as encoding/json would decode it into
// the struct they belong to (see the rules above); on error no field has been
// written. One pass checks the syntax and decodes.
func decodeFields(data []byte, fields []Field) error {
	if decodePlain(data, fields) {
		return nil
	}
	return decodeGeneral(data, fields)
}

// decodeGeneral is decodeFields for every input.
func decodeGeneral(data []byte, fields []Field) error {
	d := decoder{data: data}
	vals := make([]fieldValue, len(fields))
	top, err := d.top()
	if err == nil && top {
		if d.data[d.i] != '{' {
			d.typeError(d.kindOf(), "", "an object")
			err = d.skip()
		} else {
			err = d.fieldsObject(fields, vals)
		}
	}
	if err == nil {
		err = d.end()
	}
	if err == nil {
		err = d.err
	}
	if err != nil {
		return err
	}
	for k, v := range vals {
		if !v.set {
			continue
		}
		f := &fields[k]
		switch f.kind {
		case fieldString:
			*f.str = v.str
		case fieldStringPtr:
			if v.null {
				*f.strp = nil
			} else {
				s := v.str
				*f.strp = &s
			}
		case fieldStrings:
			*f.strs = v.strs
		case fieldInt:
			*f.num = int(v.num)
		case fieldInt64:
			*f.num6 = v.num
		case fieldBool:
			*f.flag = v.flag
		}
	}
	return nil
}

// Bounds of what decodePlain takes: more pairs, or a longer input (where
// the general decoder's cold code is a small part of the work, and a late
// escape would have the input scanned twice), go the general way.
const (
	maxPlainPairs = 8
	maxPlainInput = 1 << 10
)

// decodePlain decodes the commonest input, and only it: one object whose
// values are all strings of ASCII without escapes or control characters,
// each under a key that is exactly the name of a string field —
// {"path": "notes.txt"}. It touches a few hundred bytes of code where the
// general decoder's are tens of kilobytes, which a sandbox's fresh call finds
// cold (a built-in's trivial call: 1.3× an import-free echo with the general
// decoder, near 1× without JSON at all). Anything else — another shape, an
// escape, a control or non-ASCII byte, a key that matches only by case or
// not at all, more than maxPlainPairs pairs, an input over maxPlainInput
// bytes — returns false with nothing set, and decodeFields decodes it the
// general way; what it sets is what that would (the last of repeated keys
// wins).
func decodePlain(data []byte, fields []Field) bool {
	type pair struct {
		f          int
		start, end int
	}
	if len(data) > maxPlainInput {
		return false
	}
	var pairs [maxPlainPairs]pair
	n := 0
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			ks, ke, ok := plainString(data, i)
			if !ok {
				return false
			}
			f := -1
			for k := range fields {
				if sameKey(fields[k].name, data[ks:ke]) {
					f = k
					break
				}
			}
			if f < 0 || fields[f].kind != fieldString && fields[f].kind != fieldStringPtr {
				return false
			}
			i = skipSpace(data, ke+1)
			if i >= len(data) || data[i] != ':' {
				return false
			}
			vs, ve, ok := plainString(data, skipSpace(data, i+1))
			if !ok || n == len(pairs) {
				return false
			}
			pairs[n] = pair{f, vs, ve}
			n++
			i = skipSpace(data, ve+1)
			if i >= len(data) {
				return false
			}
			if data[i] == '}' {
				i++
				break
			}
			if data[i] != ',' {
				return false
			}
			i = skipSpace(data, i+1)
		}
	}
	if skipSpace(data, i) != len(data) {
		return false
	}
	for _, p := range pairs[:n] {
		// The input's own bytes, as the general decoder's strings are.
		v := unsafe.String(unsafe.SliceData(data[p.start:]), p.end-p.start)
		if f := &fields[p.f]; f.kind == fieldString {
			*f.str = v
		} else {
			*f.strp = &v
		}
	}
	return true
}

// sameKey reports whether key is name, byte for byte.
func sameKey(name string, key []byte) bool {
	if len(name) != len(key) {
		return false
	}
	for i := range key {
		if name[i] != key[i] {
			return false
		}
	}
	return true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainString reports whether a string without escapes, control characters
// or non-ASCII bytes starts at i, and where its content starts and ends (at
// the closing quote). It scans as the general decoder does (stringPrefix),
// so a long value costs what it costs there.
func plainString(data []byte, i int) (start, end int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, 0, false
	}
	end = stringPrefix(data, i+1)
	if end >= len(data) || data[end] != '"' {
		return 0, 0, false
	}
	return i + 1, end, true
}

// fieldsObject decodes the object at d into vals, by fields.
func (d *decoder) fieldsObject(fields []Field, vals []fieldValue) error {
	more, err := d.open('{')
	for more && err == nil {
		var key string
		if key, err = d.key(); err != nil {
			break
		}
		f := -1
		for k := range fields {
			if fields[k].name == key {
				f = k
				break
			}
		}
		if f < 0 {
			for k := range fields {
				if strings.EqualFold(fields[k].name, key) {
					f = k
					break
				}
			}
		}
		if f < 0 {
			err = d.skip()
		} else {
			err = d.field(&fields[f], &vals[f])
		}
		if err == nil {
			more, err = d.next('}', "object key:value pair")
		}
	}
	return err
}

// field decodes the value at d into v for f.
func (d *decoder) field(f *Field, v *fieldValue) error {
	if d.literal("null") {
		// encoding/json: null leaves a string, int or bool as it is and
		// sets a pointer or a slice to nil.
		if f.kind == fieldStringPtr || f.kind == fieldStrings {
			v.set, v.null, v.strs = true, true, nil
		}
		return nil
	}
	kind := d.kindOf()
	switch f.kind {
	case fieldString, fieldStringPtr:
		if kind != "string" {
			d.typeError(kind, f.name, "a string")
			return d.skip()
		}
		s, err := d.string()
		if err != nil {
			return err
		}
		v.set, v.null, v.str = true, false, s
	case fieldStrings:
		if kind != "array" {
			d.typeError(kind, f.name, "an array of strings")
			return d.skip()
		}
		strs := []string{}
		more, err := d.open('[')
		for more && err == nil {
			switch k := d.kindOf(); {
			case d.literal("null"):
				strs = append(strs, "")
			case k != "string":
				d.typeError(k, f.name+"[]", "a string")
				err = d.skip()
			default:
				var s string
				s, err = d.string()
				strs = append(strs, s)
			}
			if err == nil {
				more, err = d.next(']', "array element")
			}
		}
		if err != nil {
			return err
		}
		v.set, v.null, v.strs = true, false, strs
	case fieldInt, fieldInt64:
		if kind != "number" {
			d.typeError(kind, f.name, "an integer")
			return d.skip()
		}
		start := d.i
		if err := d.number(); err != nil {
			return err
		}
		lit := string(d.data[start:d.i])
		bits := 64
		if f.kind == fieldInt {
			bits = strconv.IntSize
		}
		n, ok := parseInt(lit, bits)
		if !ok {
			d.fail("cannot unmarshal number " + lit + " into " + quote(f.name) + " (an integer of " + strconv.Itoa(bits) + " bits)")
			return nil
		}
		v.set, v.num = true, n
	case fieldBool:
		switch {
		case d.literal("true"):
			v.set, v.flag = true, true
		case d.literal("false"):
			v.set, v.flag = true, false
		default:
			d.typeError(kind, f.name, "a boolean")
			return d.skip()
		}
	}
	return nil
}

// parseInt is strconv.ParseInt(lit, 10, bits) for a valid JSON number: false
// for a fraction, an exponent or a value out of range. (strconv's compares
// error values, which under TinyGo links reflection.)
func parseInt(lit string, bits int) (int64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	limit := uint64(1) << (bits - 1) // |min|; max is limit-1
	var n uint64
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c < '0' || c > '9' || n > (limit+9)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case !neg && n < limit:
		return int64(n), true
	case neg && n < limit:
		return -int64(n), true
	case neg && n == limit:
		return -int64(limit-1) - 1, true
	}
	return 0, false
}

// quote quotes s for a message, as a JSON string.
func quote(s string) string { return string(AppendJSONString(nil, s)) }

// decodeStringMap decodes a JSON object of strings into a map, as
// encoding/json decodes it into a map[string]string (null is "", the last of
// repeated keys stays); null gives a nil map.
func decodeStringMap(data []byte) (map[string]string, error) {
	d := decoder{data: data}
	var m map[string]string
	top, err := d.top()
	if err == nil && top {
		if d.data[d.i] != '{' {
			d.typeError(d.kindOf(), "", "an object of strings")
			err = d.skip()
		} else {
			m = map[string]string{}
			var more bool
			more, err = d.open('{')
			for more && err == nil {
				var key string
				if key, err = d.key(); err != nil {
					break
				}
				switch k := d.kindOf(); {
				case d.literal("null"):
					m[key] = ""
				case k != "string":
					d.typeError(k, key, "a string")
					err = d.skip()
				default:
					var s string
					s, err = d.string()
					m[key] = s
				}
				if err == nil {
					more, err = d.next('}', "object key:value pair")
				}
			}
		}
	}
	if err == nil {
		err = d.end()
	}
	if err == nil {
		err = d.err
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// decoder reads JSON from data at i, checking its syntax as it goes, as
// encoding/json's scanner does: strings may hold any byte but control
// characters (invalid UTF-8 decodes as U+FFFD), escapes and numbers are
// JSON's, nesting is at most 10,000 deep. A syntax error ends decoding; a
// type error is kept (err) and decoding goes on, so that a syntax error
// further on is the one reported, as encoding/json reports it.
type decoder struct {
	data  []byte
	i     int
	depth int   // open objects and arrays
	err   error // the first type error
}

// top skips the whitespace before the input's value and reports whether a
// value other than null follows (null is consumed).
func (d *decoder) top() (bool, error) {
	d.space()
	if d.i >= len(d.data) {
		return false, d.syntax("unexpected end of JSON input")
	}
	return !d.literal("null"), nil
}

// end checks that only whitespace follows the input's value.
func (d *decoder) end() error {
	d.space()
	if d.i < len(d.data) {
		return d.syntax("invalid character " + quoteByte(d.data[d.i]) + " after top-level value")
	}
	return nil
}

// open consumes the opening bracket c ('{' or '[') at d and the whitespace
// after it, and reports whether the object or array has members (if not,
// its closing bracket is consumed too).
func (d *decoder) open(c byte) (bool, error) {
	d.i++
	if d.depth++; d.depth > maxDepth {
		return false, d.syntax("exceeded max depth")
	}
	d.space()
	if d.byte(c + 2) { // '}' or ']'
		d.depth--
		return false, nil
	}
	if d.i >= len(d.data) {
		return false, d.syntax("unexpected end of JSON input")
	}
	return true, nil
}

// key reads an object member's key (unescaped) and the colon after it; d is
// then at the value.
func (d *decoder) key() (string, error) {
	if err := d.expectKey(); err != nil {
		return "", err
	}
	key, err := d.string()
	if err != nil {
		return "", err
	}
	return key, d.colon()
}

// next consumes what follows a member or element: a comma (true: another
// follows) or the closing bracket close (false); after names the member or
// element for the error.
func (d *decoder) next(close byte, after string) (bool, error) {
	d.space()
	if d.byte(close) {
		d.depth--
		return false, nil
	}
	if err := d.comma(after); err != nil {
		return false, err
	}
	if d.i >= len(d.data) {
		return false, d.syntax("unexpected end of JSON input")
	}
	return true, nil
}

// expectKey checks that an object key comes next.
func (d *decoder) expectKey() error {
	if d.i >= len(d.data) {
		return d.syntax("unexpected end of JSON input")
	}
	if d.data[d.i] != '"' {
		return d.syntax("invalid character " + quoteByte(d.data[d.i]) + " looking for beginning of object key string")
	}
	return nil
}

// colon consumes the colon after a key, and the whitespace around it.
func (d *decoder) colon() error {
	d.space()
	if !d.byte(':') {
		if d.i >= len(d.data) {
			return d.syntax("unexpected end of JSON input")
		}
		return d.syntax("invalid character " + quoteByte(d.data[d.i]) + " after object key")
	}
	d.space()
	if d.i >= len(d.data) {
		return d.syntax("unexpected end of JSON input")
	}
	return nil
}

// comma consumes the comma after a member or element (after says which),
// and the whitespace after it.
func (d *decoder) comma(after string) error {
	if !d.byte(',') {
		if d.i >= len(d.data) {
			return d.syntax("unexpected end of JSON input")
		}
		return d.syntax("invalid character " + quoteByte(d.data[d.i]) + " after " + after)
	}
	d.space()
	return nil
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

// literal consumes lit (true, false, null) if it comes next.
func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.i >= len(lit) && string(d.data[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// kindOf names the value at d, as encoding/json's type errors do.
func (d *decoder) kindOf() string {
	switch c := d.data[d.i]; {
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == '"':
		return "string"
	case c == 't' || c == 'f':
		return "bool"
	case c == 'n':
		return "null"
	}
	return "number"
}

// skip consumes one value, checking it.
func (d *decoder) skip() error {
	var stack []byte // the containers skip opened: '{' or '['
	for {
		// A value.
		if d.i >= len(d.data) {
			return d.syntax("unexpected end of JSON input")
		}
		switch c := d.data[d.i]; {
		case c == '{' || c == '[':
			if d.depth+len(stack) >= maxDepth {
				return d.syntax("exceeded max depth")
			}
			stack = append(stack, c)
			d.i++
			d.space()
			if d.byte(c + 2) { // '}' or ']'
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				if err := d.skipKey(); err != nil {
					return err
				}
			}
			continue
		case c == '"':
			if err := d.skipString(); err != nil {
				return err
			}
		case c == 't':
			if !d.literal("true") {
				return d.syntax("invalid literal (expecting true)")
			}
		case c == 'f':
			if !d.literal("false") {
				return d.syntax("invalid literal (expecting false)")
			}
		case c == 'n':
			if !d.literal("null") {
				return d.syntax("invalid literal (expecting null)")
			}
		case c == '-' || c >= '0' && c <= '9':
			if err := d.number(); err != nil {
				return err
			}
		default:
			return d.syntax("invalid character " + quoteByte(c) + " looking for beginning of value")
		}
		// After a value: the end of skip's, a separator or a closing
		// bracket.
		for {
			if len(stack) == 0 {
				return nil
			}
			d.space()
			if d.i >= len(d.data) {
				return d.syntax("unexpected end of JSON input")
			}
			top := stack[len(stack)-1]
			if d.byte(top + 2) {
				stack = stack[:len(stack)-1]
				continue
			}
			if top == '{' {
				if err := d.comma("object key:value pair"); err != nil {
					return err
				}
				if err := d.skipKey(); err != nil {
					return err
				}
			} else if err := d.comma("array element"); err != nil {
				return err
			}
			break
		}
	}
}

// skipKey consumes an object key and its colon, checking them.
func (d *decoder) skipKey() error {
	if err := d.expectKey(); err != nil {
		return err
	}
	if err := d.skipString(); err != nil {
		return err
	}
	return d.colon()
}

// number consumes the number at d, checking it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() error {
	data := d.data
	digits := func() bool {
		start := d.i
		for d.i < len(data) && data[d.i] >= '0' && data[d.i] <= '9' {
			d.i++
		}
		return d.i > start
	}
	bad := func(what string) error {
		if d.i >= len(data) {
			return d.syntax("unexpected end of JSON input")
		}
		return d.syntax("invalid character " + quoteByte(data[d.i]) + " " + what)
	}
	d.byte('-')
	switch {
	case d.byte('0'):
	case d.i < len(data) && data[d.i] >= '1' && data[d.i] <= '9':
		digits()
	default:
		return bad("in numeric literal")
	}
	if d.byte('.') && !digits() {
		return bad("after decimal point in numeric literal")
	}
	if d.byte('e') || d.byte('E') {
		if !d.byte('+') {
			d.byte('-')
		}
		if !digits() {
			return bad("in exponent of numeric literal")
		}
	}
	return nil
}

// string reads the JSON string at d, quotes included, checking it and
// unescaping it as encoding/json does. Without escapes or invalid UTF-8 the
// result shares data's bytes; from the first of those on, the rest is
// decoded into a buffer (unescape).
func (d *decoder) string() (string, error) {
	data := d.data
	start := d.i + 1
	i := start
	// dense: the last byte was non-ASCII: the next run is looked at a byte
	// at a time first, without the block scan's set-up, which text dense
	// with accents would pay at each one.
	dense := false
	for {
		if dense {
			i, dense = densePrefix(data, i)
		} else {
			i = stringPrefix(data, i)
		}
		if i >= len(data) {
			d.i = i
			return "", d.syntax("unexpected end of JSON input")
		}
		switch c := data[i]; {
		case c == '"':
			d.i = i + 1
			return unsafe.String(unsafe.SliceData(data[start:]), i-start), nil
		case c >= 0x80:
			if n := utf8Valid23(data, i); n > 0 {
				i += n
				dense = true
				continue
			}
			if r, size := utf8.DecodeRune(data[i:]); r != utf8.RuneError || size != 1 {
				i += size
				dense = true
				continue
			}
		}
		// An escape, a control character or an invalid byte.
		return d.unescape(unescapeBuf(nil, data, start, i), i)
	}
}

// unescape decodes the rest of the string at d into buf from data[i] on,
// as string does. Runs of bytes kept as they are are appended a byte at a
// time (text dense with escapes, code, has short ones), or, when a whole
// word of 8 is plain, found by stringPrefix and appended at once.
func (d *decoder) unescape(buf []byte, i int) (string, error) {
	data := d.data
	p := unsafe.Pointer(unsafe.SliceData(data))
	for {
		if i+8 <= len(data) && stringWord(load64(unsafe.Add(p, i))) {
			j := stringPrefix(data, i+8)
			buf = append(buf, data[i:j]...)
			i = j
		}
		for i < len(data) && keptByte[data[i]] {
			buf = append(buf, data[i])
			i++
		}
		if i >= len(data) {
			d.i = i
			return "", d.syntax("unexpected end of JSON input")
		}
		switch c := data[i]; {
		case c == '"':
			d.i = i + 1
			return unsafe.String(unsafe.SliceData(buf), len(buf)), nil
		case c == '\\':
			if i+1 >= len(data) {
				d.i = i + 1
				return "", d.syntax("unexpected end of JSON input")
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
				r := hex4(data, i+2)
				if r < 0 {
					d.i = i + 2
					return "", d.syntax("invalid character in \\u hexadecimal character escape")
				}
				i += 6
				if r >= 0xd800 && r < 0xe000 {
					// A high surrogate and an escaped low one make a
					// pair; anything else is U+FFFD, and what follows is
					// read on its own.
					r0 := r
					r = utf8.RuneError
					if r0 < 0xdc00 && i+6 <= len(data) && data[i] == '\\' && data[i+1] == 'u' {
						if lo := hex4(data, i+2); lo >= 0xdc00 && lo < 0xe000 {
							r = 0x10000 + (r0-0xd800)<<10 + (lo - 0xdc00)
							i += 6
						}
					}
				}
				buf = utf8.AppendRune(buf, r)
				continue
			default:
				d.i = i + 1
				return "", d.syntax("invalid character " + quoteByte(e) + " in string escape code")
			}
			buf = append(buf, e)
			i += 2
		case c < 0x20:
			d.i = i
			return "", d.syntax("invalid character " + quoteByte(c) + " in string literal")
		default: // c >= 0x80
			if n := utf8Valid23(data, i); n > 0 {
				buf = append(buf, data[i:i+n]...)
				i += n
				continue
			}
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
				i++
				continue
			}
			buf = append(buf, data[i:i+size]...)
			i += size
		}
	}
}

// keptByte says which bytes a JSON string holds as they are: all but '"',
// '\\', control characters and non-ASCII.
var keptByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// stringWord reports whether all 8 bytes of w are kept as they are in a
// JSON string (stringPrefix's test, a word at a time).
func stringWord(w uint64) bool {
	q := w ^ 0x22*lsbs
	b := w ^ 0x5c*lsbs
	return ((w-0x20*lsbs)&^w|(q-lsbs)&^q|(b-lsbs)&^b|w)&msbs == 0
}

// densePrefix is stringPrefix after a non-ASCII character: up to 16 bytes
// one at a time; a run that goes on is left to stringPrefix, and dense says
// whether the run ended within those 16 bytes.
func densePrefix(data []byte, i int) (int, bool) {
	end := min(i+16, len(data))
	for i < end && keptByte[data[i]] {
		i++
	}
	if i == end && end < len(data) {
		return stringPrefix(data, i), false
	}
	return i, true
}

// utf8Valid23 is the length of the valid 2- or 3-byte UTF-8 sequence at
// data[i] (the common ones: Latin and most scripts; not a surrogate, not
// overlong), or 0 for anything else, which utf8.DecodeRune then decides.
func utf8Valid23(data []byte, i int) int {
	c := data[i]
	switch {
	case c >= 0xc2 && c < 0xe0:
		if i+1 < len(data) && data[i+1]&0xc0 == 0x80 {
			return 2
		}
	case c >= 0xe1 && c < 0xf0 && c != 0xed:
		if i+2 < len(data) && data[i+1]&0xc0 == 0x80 && data[i+2]&0xc0 == 0x80 {
			return 3
		}
	}
	return 0
}

// skipString consumes the string at d, checking it.
func (d *decoder) skipString() error {
	data := d.data
	i := d.i + 1
	for {
		i = stringPrefix(data, i)
		if i >= len(data) {
			d.i = i
			return d.syntax("unexpected end of JSON input")
		}
		switch c := data[i]; {
		case c == '"':
			d.i = i + 1
			return nil
		case c == '\\':
			if i+1 >= len(data) {
				d.i = i + 1
				return d.syntax("unexpected end of JSON input")
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(data, i+2) < 0 {
					d.i = i + 2
					return d.syntax("invalid character in \\u hexadecimal character escape")
				}
				i += 6
			default:
				d.i = i + 1
				return d.syntax("invalid character " + quoteByte(data[i+1]) + " in string escape code")
			}
		case c < 0x20:
			d.i = i
			return d.syntax("invalid character " + quoteByte(c) + " in string literal")
		default: // >= 0x80: any byte (invalid UTF-8 decodes as U+FFFD)
			i++
		}
	}
}

// unescapeBuf appends data[run:i], the bytes kept as they are before an
// escape or an invalid byte at i, to buf; a nil buf is made first, with room
// for the rest of the string as it is (unescaping shortens it; only invalid
// bytes, each 3 bytes out, grow it): the rest of data when that is small,
// else the string's own length, found first, so that a short string before a
// long one does not cost the long one's size (the leaking GC never gives it
// back).
func unescapeBuf(buf, data []byte, run, i int) []byte {
	if buf == nil {
		size := len(data) - run
		if size > smallRest {
			size = stringEnd(data, i) - run
		}
		buf = make([]byte, 0, size)
	}
	return append(buf, data[run:i]...)
}

// hex4 reads 4 hex digits at data[i:], or -1.
func hex4(data []byte, i int) rune {
	if i+4 > len(data) {
		return -1
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
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// stringEnd is the index of the quote that closes the string whose content
// (or an escape in it) starts at data[i], or len(data) if none does.
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
	return len(data)
}

// syntax is a syntax error at d.
func (d *decoder) syntax(msg string) error {
	return &Error{Kind: KindInvalidInput, Message: "input is not valid JSON: " + msg + " (at byte " + strconv.Itoa(d.i) + ")"}
}

// fail keeps msg as the input's error unless one was kept before.
func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = &Error{Kind: KindInvalidInput, Message: "input is not valid JSON: " + msg}
	}
}

// typeError keeps encoding/json's UnmarshalTypeError, in words.
func (d *decoder) typeError(got, field, want string) {
	where := "the input"
	if field != "" {
		where = quote(field)
	}
	d.fail("cannot unmarshal " + got + " into " + where + " (" + want + ")")
}

// quoteByte quotes c as encoding/json's messages do: 'x', or '\x01'.
func quoteByte(c byte) string {
	switch {
	case c == '\'':
		return `'\''`
	case c >= 0x20 && c < 0x7f:
		return "'" + string(rune(c)) + "'"
	}
	return `'\x` + string([]byte{hexDigits[c>>4], hexDigits[c&0xf]}) + "'"
}

// stringPrefix skips the bytes from i on that a JSON string holds as they
// are: all but '"', '\\', control characters and non-ASCII: 32 at a time
// (with blockScan), then 8, then one by one up to the first that is not.
func stringPrefix(data []byte, i int) int { return stringPrefixFrom(data, i, blockScan) }

func stringPrefixFrom(data []byte, i int, blocks bool) int {
	p := unsafe.Pointer(unsafe.SliceData(data))
	if blocks {
		for i+32 <= len(data) && stringBlock((*[32]byte)(unsafe.Add(p, i))) {
			i += 32
		}
	}
	for i+8 <= len(data) && stringWord(load64(unsafe.Add(p, i))) {
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
