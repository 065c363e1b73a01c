package skillkit

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// plainByte is plainWord's question for one byte.
func plainByte(c byte) bool {
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

func TestPlainWord(t *testing.T) {
	// Every byte value at every position among plain bytes, and next to a
	// zero byte and a 0xff (borrows and carries between bytes).
	for _, fill := range []byte{'a', 0, 0xff, '"', 0x21} {
		for pos := 0; pos < 8; pos++ {
			for c := 0; c < 256; c++ {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				want := true
				for _, x := range b {
					want = want && plainByte(x)
				}
				if got := plainWord(binary.LittleEndian.Uint64(b[:])); got != want {
					t.Fatalf("plainWord(% x) = %v, want %v", b, got, want)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200000; n++ {
		var b [8]byte
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x70)) // mostly plain
			if r.IntN(16) == 0 {
				b[i] = byte(r.IntN(256))
			}
		}
		want := true
		for _, x := range b {
			want = want && plainByte(x)
		}
		if got := plainWord(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("plainWord(% x) = %v, want %v", b, got, want)
		}
	}
}

// TestAppendJSONStringEveryOffset puts each special byte and rune at every
// offset of a string longer than a word, so that it falls in the 8-byte scan,
// at a word's edge and in the tail.
func TestAppendJSONStringEveryOffset(t *testing.T) {
	specials := []string{"\"", "\\", "<", ">", "&", "\x00", "\n", "\x1f", "\x7f", "é", "€", "😀",
		"\u2028", "\u2029", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "\xef\xbf\xbd"}
	for _, sp := range specials {
		for n := 0; n < 20; n++ {
			for at := 0; at <= n; at++ {
				base := strings.Repeat("x", n)
				s := base[:at] + sp + base[at:]
				want, _ := json.Marshal(s)
				got, valid := appendJSONString([]byte("prefix"), s, false)
				if string(got) != "prefix"+string(want) {
					t.Fatalf("appendJSONString(%q) = %s, want %s", s, got[6:], want)
				}
				if valid != utf8.ValidString(s) {
					t.Fatalf("appendJSONString(%q) valid = %v", s, valid)
				}
			}
		}
	}
}

func TestObjectText(t *testing.T) {
	var o Object
	o.Int("n", 1)
	if !o.Text("content", []byte("line\n<é>")) {
		t.Fatal("valid text refused")
	}
	if o.Text("bad", []byte("ab\xffcd")) {
		t.Fatal("invalid UTF-8 accepted")
	}
	if got := string(o.JSON()); got != `{"n":1,"content":"line\n\u003cé\u003e"}` {
		t.Errorf("object %s", got)
	}
	// A binary blob is refused at its first invalid byte, not escaped whole
	// first (6 bytes out per byte in: a 10 MiB file cost 168 MiB).
	blob := append([]byte("ab\x80"), make([]byte, 1<<20)...)
	for i := range blob[3:] {
		blob[3+i] = 0x80
	}
	if out, valid := appendJSONString(nil, string(blob), true); valid || len(out) > 64 {
		t.Errorf("strict escaping of a binary blob: valid %v, %d bytes written, want false and a few", valid, len(out))
	}
	var empty Object
	if empty.Text("bad", []byte{0xff}) || string(empty.JSON()) != "{}" {
		t.Errorf("an object with only a refused field: %s", empty.JSON())
	}
}

func FuzzObjectText(f *testing.F) {
	for _, s := range []string{"", "plain text of some length", "a\"b<c>&\\", "\xff", "é\u2028"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var o Object
		ok := o.Text("content", b)
		if ok != utf8.Valid(b) {
			t.Fatalf("Text(%q) = %v", b, ok)
		}
		if !ok {
			return
		}
		want, _ := json.Marshal(map[string]string{"content": string(b)})
		if got := o.JSON(); string(got) != string(want) {
			t.Fatalf("Text(%q) = %s, want %s", b, got, want)
		}
	})
}

func TestASCIIEscapesTable(t *testing.T) {
	for c := 0; c < 128; c++ {
		var want byte
		switch {
		case plainByte(byte(c)):
		case c == '"' || c == '\\':
			want = byte(c)
		case c == '\n':
			want = 'n'
		case c == '\r':
			want = 'r'
		case c == '\t':
			want = 't'
		case c == '\b':
			want = 'b'
		case c == '\f':
			want = 'f'
		default:
			want = 'u'
		}
		if asciiEscapes[c] != want {
			t.Errorf("asciiEscapes[%#x] = %q, want %q", c, asciiEscapes[c], want)
		}
	}
}

// TestBlockScans: the 32-byte blocks (TinyGo's scan) answer what bytes one by
// one do, and the prefixes found with them are those found without.
func TestBlockScans(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	plainRef := func(b []byte) bool {
		for _, c := range b {
			if !plainByte(c) {
				return false
			}
		}
		return true
	}
	stringRef := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	for n := 0; n < 100000; n++ {
		size := r.IntN(200)
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x5f))
			if r.IntN(64) == 0 {
				b[i] = byte(r.IntN(256))
			}
		}
		if size >= 32 {
			var blk [32]byte
			copy(blk[:], b)
			if got, want := plainBlock(&blk), plainRef(blk[:]); got != want {
				t.Fatalf("plainBlock(% x) = %v", blk, got)
			}
			if got, want := stringBlock(&blk), stringRef(blk[:]); got != want {
				t.Fatalf("stringBlock(% x) = %v", blk, got)
			}
		}
		start := r.IntN(size + 1)
		if a, c := plainPrefixFrom(string(b), start, true), plainPrefixFrom(string(b), start, false); a != c {
			t.Fatalf("plainPrefix(%q, %d): %d with blocks, %d without", b, start, a, c)
		}
		if a, c := stringPrefixFrom(b, start, true), stringPrefixFrom(b, start, false); a != c {
			t.Fatalf("stringPrefix(%q, %d): %d with blocks, %d without", b, start, a, c)
		}
	}
	// Every byte value at every position of a block.
	for pos := 0; pos < 32; pos++ {
		for c := 0; c < 256; c++ {
			var blk [32]byte
			for i := range blk {
				blk[i] = 'a'
			}
			blk[pos] = byte(c)
			if plainBlock(&blk) != plainByte(byte(c)) {
				t.Fatalf("plainBlock with %#x at %d", c, pos)
			}
			if stringBlock(&blk) != stringRef([]byte{byte(c)}) {
				t.Fatalf("stringBlock with %#x at %d", c, pos)
			}
		}
	}
}
