package fuel

import (
	"fmt"
	"unicode/utf8"
)

// reader decodes a byte range of the module. Errors carry the absolute offset
// of what failed and the part of the module being read.
type reader struct {
	b    []byte // the whole module
	pos  int    // next byte
	end  int    // end of the current range (section, body)
	what string // part of the module, for errors
	fn   int    // function index for "code of function N", or -1
}

func (r *reader) where() string {
	if r.fn >= 0 {
		return fmt.Sprintf("code of function %d", r.fn)
	}
	return r.what
}

func (r *reader) errAt(off int, sentinel error, format string, args ...any) error {
	return &Error{Where: r.where(), Offset: off, Detail: fmt.Sprintf(format, args...), Err: sentinel}
}

func (r *reader) malformed(off int, format string, args ...any) error {
	return r.errAt(off, ErrMalformed, format, args...)
}

func (r *reader) unsupported(off int, format string, args ...any) error {
	return r.errAt(off, ErrUnsupported, format, args...)
}

func (r *reader) eof() error {
	return r.malformed(r.pos, "unexpected end")
}

func (r *reader) done() bool { return r.pos >= r.end }

func (r *reader) byte() (byte, error) {
	if r.pos >= r.end {
		return 0, r.eof()
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || n > r.end-r.pos {
		return nil, r.eof()
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s, nil
}

func (r *reader) skip(n int) error {
	if n < 0 || n > r.end-r.pos {
		return r.eof()
	}
	r.pos += n
	return nil
}

// u32 reads an unsigned LEB128 of at most 32 bits, strictly (at most 5 bytes,
// no bits above 32).
func (r *reader) u32() (uint32, error) {
	if r.pos < r.end && r.b[r.pos] < 0x80 {
		v := r.b[r.pos]
		r.pos++
		return uint32(v), nil
	}
	start := r.pos
	var v uint32
	for i := 0; i < 5; i++ {
		if r.pos >= r.end {
			return 0, r.eof()
		}
		c := r.b[r.pos]
		r.pos++
		if i == 4 {
			if c&0xf0 != 0 {
				return 0, r.malformed(start, "integer too large or representation too long")
			}
			return v | uint32(c)<<28, nil
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, nil
		}
	}
	panic("unreachable")
}

// signed reads a signed LEB128 of at most bits bits (32, 33 or 64), strictly.
func (r *reader) signed(bits uint) (int64, error) {
	start := r.pos
	maxBytes := int((bits + 6) / 7)
	var v int64
	var shift uint
	for i := 0; i < maxBytes; i++ {
		if r.pos >= r.end {
			return 0, r.eof()
		}
		c := r.b[r.pos]
		r.pos++
		if i == maxBytes-1 {
			// The last byte holds bits [shift, shift+7) of which only those below
			// `bits` are significant; the rest must copy the sign bit and the
			// continuation bit must be clear.
			used := bits - shift // significant bits in this byte, 1..7
			if c&0x80 != 0 {
				return 0, r.malformed(start, "integer representation too long")
			}
			signBit := c >> (used - 1) & 1
			rest := c & 0x7f >> used
			want := byte(0)
			if signBit == 1 {
				want = 0x7f >> used
			}
			if rest != want {
				return 0, r.malformed(start, "integer too large")
			}
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c < 0x80 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
	panic("unreachable")
}

// name reads a length-prefixed UTF-8 string.
// index reads a u32 index and checks it against the number of entries of its
// index space ("table index 3 out of range (2 tables)").
func (r *reader) index(count uint64, what, plural string) (uint32, error) {
	off := r.pos
	v, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(v) >= count {
		return 0, r.malformed(off, "%s index %d out of range (%d %s)", what, v, count, plural)
	}
	return v, nil
}

// numConst skips the immediate of a numeric constant opcode (i32/i64/f32/f64
// .const) and reports whether op was one.
func (r *reader) numConst(op byte) (bool, error) {
	switch op {
	case 0x41:
		_, err := r.signed(32)
		return true, err
	case 0x42:
		_, err := r.signed(64)
		return true, err
	case 0x43:
		return true, r.skip(4)
	case 0x44:
		return true, r.skip(8)
	}
	return false, nil
}

func (r *reader) name() (string, error) {
	off := r.pos
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(int(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", r.malformed(off, "malformed UTF-8 encoding")
	}
	return string(b), nil
}

// count reads a vector length, refusing one that cannot fit in the rest of the
// range (each element takes at least minSize bytes), so a huge count cannot
// make us allocate.
func (r *reader) count(minSize int) (int, error) {
	off := r.pos
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if minSize > 0 && uint64(n)*uint64(minSize) > uint64(r.end-r.pos) {
		return 0, r.malformed(off, "vector length %d too large for its section", n)
	}
	return int(n), nil
}

// Encoding helpers.

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// appendSection appends a section with its id and size.
func appendSection(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = appendU32(b, uint32(len(content)))
	return append(b, content...)
}

func validValType(c byte) bool {
	switch ValueType(c) {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return true
	}
	return false
}

// gcTypeByte reports a type byte of the GC / typed function references /
// exception handling proposals (refused as unsupported rather than malformed).
func gcTypeByte(c byte) bool {
	switch c {
	case 0x63, 0x64, // (ref null ht), (ref ht)
		0x69,                   // exnref
		0x71, 0x72, 0x73, 0x74, // none, noextern, nofunc, noexn
		0x6e, 0x6d, 0x6b, 0x6a, 0x6c, // any, eq, struct, array, i31
		0x5e, 0x5f, 0x50, 0x4e, 0x4f, 0x78, 0x77: // composite / rec / sub, i8, i16
		return true
	}
	return false
}

// valType reads a value type.
func (r *reader) valType() (ValueType, error) {
	off := r.pos
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	if validValType(c) {
		return ValueType(c), nil
	}
	if gcTypeByte(c) {
		return 0, r.unsupported(off, "value type %#x (GC / typed references)", c)
	}
	return 0, r.malformed(off, "invalid value type %#x", c)
}

// refType reads a reference type (funcref or externref).
func (r *reader) refType() (ValueType, error) {
	off := r.pos
	t, err := r.valType()
	if err != nil {
		return 0, err
	}
	if t != FuncRef && t != ExternRef {
		return 0, r.malformed(off, "%v is not a reference type", t)
	}
	return t, nil
}
