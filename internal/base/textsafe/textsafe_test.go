package textsafe_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/textsafe"
)

// hostile are strings a skill, a manifest, a model or a server could send to
// take over a terminal or to make one text look like another.
var hostile = []struct {
	name, in, want string
}{
	{"OSC window title", "a\x1b]0;pwned\x07b", `a\x1b]0;pwned\x07b`},
	{"clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
	{"CR overwrite", "rm -rf /\rls", `rm -rf /\rls`},
	{"newline forges a line", "ok\n[other] info: approved", `ok\n[other] info: approved`},
	{"tab", "a\tb", `a\tb`},
	{"BEL", "ding\a", `ding\x07`},
	{"NUL", "a\x00b", `a\x00b`},
	{"DEL", "a\x7fb", `a\x7fb`},
	{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
	{"C1 NEL", "a\u0085b", `a\u0085b`},
	{"bidi override RLO", "invoice\u202Etxt.exe", `invoice\u202etxt.exe`},
	{"bidi embeddings", "\u202A\u202B\u202C\u202D", `\u202a\u202b\u202c\u202d`},
	{"bidi isolates", "x\u2066y\u2067z\u2068w\u2069", `x\u2066y\u2067z\u2068w\u2069`},
	{"bidi marks", "\u200E\u200F\u061C", `\u200e\u200f\u061c`},
	{"zero width space and BOM", "pa\u200Bth\uFEFF", `pa\u200bth\ufeff`},
	{"line separator", "a\u2028b\u2029c", `a\u2028b\u2029c`},
	{"tag character", "a\U000E0041", `a\U000e0041`},
	{"invalid UTF-8", "a\xffb\xc0", `a\xffb\xc0`},
	{"truncated rune", "é\xc3", `é\xc3`},
	{"overlong ESC", "\xc0\x9b", `\xc0\x9b`},
	{"UTF-8 ESC in C1 form", "\xc2\x9b", `\u009b`},
	{"plain text kept", "notes/todo.txt — café 日本", "notes/todo.txt — café 日本"},
	{"joiners kept", "👨\u200d👩 می\u200cخواهم", "👨\u200d👩 می\u200cخواهم"},
	{"U+FFFD kept", "\uFFFD", "\uFFFD"},
	{"backslash kept", `C:\x1b`, `C:\x1b`},
}

func TestTerminal(t *testing.T) {
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			got := textsafe.Terminal(tc.in, 1000)
			if got != tc.want {
				t.Errorf("Terminal(%q) = %q, want %q", tc.in, got, tc.want)
			}
			assertSafe(t, got, false)
		})
	}
}

func TestBlock(t *testing.T) {
	tests := []struct{ in, want string }{
		{"line one\n\tline two", "line one\n\tline two"},
		{"line\r\nnext", `line\r` + "\nnext"},
		{"a\x1b[31mred\n", `a\x1b[31mred` + "\n"},
		{"\u202Egnp.exe\n", `\u202egnp.exe` + "\n"},
	}
	for _, tc := range tests {
		got := textsafe.Block(tc.in, 1000)
		if got != tc.want {
			t.Errorf("Block(%q) = %q, want %q", tc.in, got, tc.want)
		}
		assertSafe(t, got, true)
	}
}

func TestCap(t *testing.T) {
	big := strings.Repeat("A", 8<<20)
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"8 MB message", big, 100, strings.Repeat("A", 100) + "… [8,388,508 more bytes]"},
		{"8 MB of ESC", strings.Repeat("\x1b", 8<<20), 10, `\x1b\x1b` + "… [8,388,606 more bytes]"},
		{"escape never split", "abcdefg\x1b", 10, "abcdefg… [1 more bytes]"},
		{"rune never split", "abcdefgh日本", 10, "abcdefgh… [6 more bytes]"},
		{"exactly max", "0123456789", 10, "0123456789"},
		{"default cap", big, 0, strings.Repeat("A", textsafe.DefaultMax) + "… [" + textsafe.Bytes(8<<20-textsafe.DefaultMax) + " more bytes]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := textsafe.Terminal(tc.in, tc.max)
			if got != tc.want {
				if len(got) > 200 {
					got = got[:100] + "..." + got[len(got)-100:]
				}
				t.Errorf("Terminal(%d bytes, %d) = %q", len(tc.in), tc.max, got)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 10485760: "10,485,760", -1234: "-1,234"} {
		if got := textsafe.Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// assertSafe fails if s holds a byte or a rune that a terminal would obey
// rather than show.
func assertSafe(t testing.TB, s string, multiline bool) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("output %q is not valid UTF-8", s)
	}
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r == 0x2028 || r == 0x2029 ||
			(unicode.Is(unicode.Cf, r) && r != 0x200c && r != 0x200d) ||
			unicode.Is(unicode.Bidi_Control, r) {
			t.Fatalf("output %q holds %U", s, r)
		}
	}
}

func FuzzTerminal(f *testing.F) {
	for _, tc := range hostile {
		f.Add(tc.in, 64)
	}
	f.Add(strings.Repeat("\x1b[2J", 100), 7)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, max int) {
		max %= 4096
		for _, multiline := range []bool{false, true} {
			out := textsafe.Terminal(s, max)
			if multiline {
				out = textsafe.Block(s, max)
			}
			assertSafe(t, out, multiline)
			limit := max
			if limit <= 0 {
				limit = textsafe.DefaultMax
			}
			if len(out) > limit+len(textsafe.Cut(len(s))) {
				t.Fatalf("%d bytes out for max %d", len(out), max)
			}
			if len(out) > limit && !strings.HasSuffix(out, " more bytes]") {
				t.Fatalf("output over the cap without a marker: %q", out)
			}
			if utf8.ValidString(s) && len(s) <= limit && clean(s, multiline) && out != s {
				t.Fatalf("clean %q changed to %q", s, out)
			}
		}
	})
}

func clean(s string, multiline bool) bool {
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if !textsafe.Safe(r) {
			return false
		}
	}
	return true
}

func ExampleTerminal() {
	fmt.Println(textsafe.Terminal("report\u202Efdp.exe \x1b]0;owned\x07", 100))
	fmt.Println(textsafe.Terminal(strings.Repeat("x", 5000), 8))
	// Output:
	// report\u202efdp.exe \x1b]0;owned\x07
	// xxxxxxxx… [4,992 more bytes]
}
