package hostfns

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// checkJSONText compares writeJSONText with encoding/json (whose escaping
// skillkit's, and so read_file's output before fs_read_json, matches),
// into a roomy buffer and into every shorter one.
func checkJSONText(t *testing.T, s []byte) {
	t.Helper()
	want, err := json.Marshal(string(s))
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(want)+8)
	n, valid := writeJSONText(dst, s)
	if !utf8.Valid(s) {
		if valid {
			t.Fatalf("%q: reported UTF-8", s)
		}
		return
	}
	if !valid || !bytes.Equal(dst[:n], want) {
		t.Fatalf("%q: wrote %q (valid %v), want %q", s, dst[:n], valid, want)
	}
	for room := range min(len(want), 80) {
		short := make([]byte, room)
		if n, _ := writeJSONText(short, s); n != len(want) || !bytes.Equal(short, want[:room]) {
			t.Fatalf("%q into %d bytes: n %d, wrote %q; want n %d, %q", s, room, n, short, len(want), want[:room])
		}
	}
}

func TestWriteJSONText(t *testing.T) {
	for _, s := range []string{
		"", "a", "plain text of some length, more than thirty-two bytes long",
		"\"quoted\" \\ back", "<a href=\"x\">&amp;</a>", "\x00\x01\x08\x09\x0a\x0b\x0c\x0d\x1f\x7f",
		"é ü 日本 🙂", "line\u2028sep\u2029para", "bad \xff byte", "\xc3", "trunc\xe2\x80",
		string(bytes.Repeat([]byte("0123456789abcdef"), 256)),
		string(bytes.Repeat([]byte("if a < b && c > \"d\" {\n\tprintln(\"é\")\n}\n"), 100)),
	} {
		checkJSONText(t, []byte(s))
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "é", "\u2028", "\u2029", "日", "🙂", "\xff", "0123456789abcdef"}
	for range 2000 {
		var b []byte
		for range r.IntN(100) {
			b = append(b, alphabet[r.IntN(len(alphabet))]...)
		}
		checkJSONText(t, b)
	}
}

func FuzzWriteJSONText(f *testing.F) {
	f.Add([]byte("x<y & \"z\"\n\u2028é\xff"))
	f.Fuzz(func(t *testing.T, s []byte) { checkJSONText(t, s) })
}

func BenchmarkWriteJSONText(b *testing.B) {
	s := bytes.Repeat([]byte("0123456789abcdef"), 256)
	dst := make([]byte, 16<<10)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		writeJSONText(dst, s)
	}
}

// TestPlainRunEveryByte: every byte value at every offset of a 100-byte
// plain string (so in each 32-byte block, the tail and both scans): plainRun
// never runs past a byte that needs escaping or checking, nor stops short of
// one by more than a word, and writeJSONText matches encoding/json.
func TestPlainRunEveryByte(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && jsonEscapes[c] == 0 }
	base := bytes.Repeat([]byte("abcdefghij"), 10)
	for c := range 256 {
		for at := range len(base) {
			s := bytes.Clone(base)
			s[at] = byte(c)
			first := len(s)
			if !plain(byte(c)) {
				first = at
			}
			if j := plainRun(s, 0); j > first || j < first-7 && first < len(s)-len(s)%8 {
				t.Fatalf("byte %#x at %d: plainRun stopped at %d, first non-plain byte at %d", c, at, j, first)
			}
			if useAVX2 {
				want := min(first, len(s)-len(s)%32)
				if first < len(s)-len(s)%32 {
					want = first
				}
				if j := plainRunAVX2(s); j != want {
					t.Fatalf("byte %#x at %d: plainRunAVX2 = %d, want %d", c, at, j, want)
				}
			}
			checkJSONText(t, s)
		}
	}
}
