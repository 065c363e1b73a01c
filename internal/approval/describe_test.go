package approval_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/approval"
)

func TestDescribe(t *testing.T) {
	big := strings.Repeat("A", 10<<20)
	longPath := "/home/u/" + strings.Repeat("d/", 3000) + "secret.txt"
	tests := []struct {
		name  string
		skill string
		args  string
		width int
		want  []string // lines after the header, in order; "*" = anything
	}{
		{
			name: "path first whatever its place",
			args: `{"content":"hello","append":false,"path":"notes/todo.txt"}`,
			want: []string{`path: "notes/todo.txt"`, `content: "hello"`, `append: false`},
		},
		{
			name: "url first",
			args: `{"headers":{"accept":"text/html"},"url":"https://example.test/a?b=1"}`,
			want: []string{`url: "https://example.test/a?b=1"`, `headers.accept: "text/html"`},
		},
		{
			name: "long content folded with its length, path in full",
			args: `{"content":"` + big + `","path":"out.txt"}`,
			want: []string{`path: "out.txt"`, `content: 10,485,760 bytes, first 200: "` + strings.Repeat("A", 200) + `"…`},
		},
		{
			name:  "width chooses the preview",
			args:  `{"text":"0123456789abcdef"}`,
			width: 10,
			want:  []string{`text: 16 bytes, first 10: "0123456789"…`},
		},
		{
			name: "a long target is shown head and tail, never cut away",
			args: `{"path":"` + longPath + `"}`,
			want: []string{`path: 6,018 bytes, first 2,048: "/home/u/` + strings.Repeat("d/", 1020) + `" … 1,922 bytes not shown … last 2,048: "` + strings.Repeat("d/", 1019) + `secret.txt"`},
		},
		{
			name: "target keys by suffix and synonyms",
			args: `{"mode":"w","output_path":"a","baseURL":"http://x.test","dest":"b","target_dir":"c"}`,
			want: []string{`output_path: "a"`, `baseURL: "http://x.test"`, `dest: "b"`, `target_dir: "c"`, `mode: "w"`},
		},
		{
			name: "hostile text escaped",
			args: `{"path":"a\u001b]0;title\u0007\r\u202Egnp.exe","note":"\u009b2J\u2066x"}`,
			want: []string{`path: "a\x1b]0;title\x07\r\u202egnp.exe"`, `note: "\u009b2J\u2066x"`},
		},
		{
			name: "hostile keys escaped",
			args: `{"\u001b[2Jk":1}`,
			want: []string{`\x1b[2Jk: 1`},
		},
		{
			name: "nested objects and arrays",
			args: `{"options":{"mode":"append","dest":{"path":"/tmp/x"}},"files":["a.txt","b.txt"],"n":[1,{"url":"http://y.test"}],"e":{},"z":[]}`,
			want: []string{`options.dest.path: "/tmp/x"`, `files[0]: "a.txt"`, `files[1]: "b.txt"`, `n[1].url: "http://y.test"`,
				`options.mode: "append"`, `n[0]: 1`, `e: {}`, `z: []`},
		},
		{
			name: "a key given twice is shown twice and flagged",
			args: `{"path":"safe.txt","content":"x","path":"/etc/passwd"}`,
			want: []string{`path: "safe.txt"  (key given more than once: the skill may read any of them)`,
				`path: "/etc/passwd"  (key given more than once: the skill may read any of them)`, `content: "x"`},
		},
		{
			name: "case-folded twins are flagged too",
			args: `{"path":"a","PATH":"b"}`,
			want: []string{`path: "a"  (key given more than once: the skill may read any of them)`,
				`PATH: "b"  (key given more than once: the skill may read any of them)`},
		},
		{
			name: "Unicode case-folded twins are flagged and are targets",
			args: `{"src":"a","ſrc":"b"}`,
			want: []string{`src: "a"  (key given more than once: the skill may read any of them)`,
				"ſrc: \"b\"  (key given more than once: the skill may read any of them)"},
		},
		{name: "string input", args: `"hello"`, want: []string{`input: "hello"`}},
		{name: "number input", args: `42`, want: []string{`input: 42`}},
		{name: "array input", args: `["a",true,null]`, want: []string{`input[0]: "a"`, `input[1]: true`, `input[2]: null`}},
		{name: "not JSON", args: "rm -rf \x1b[2J", want: []string{`input (not JSON): "rm -rf \x1b[2J"`}},
		{name: "trailing data is not hidden", args: `{"path":"a"} {"path":"b"}`, want: []string{`input (not JSON): "{\"path\":\"a\"} {\"path\":\"b\"}"`}},
		{name: "empty object", args: `{}`, want: nil},
		{name: "hostile skill name", skill: "w\x1b[2J", args: `{}`, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			skill := tc.skill
			if skill == "" {
				skill = "write_file"
			}
			got := approval.Describe(approval.Request{Skill: skill, Permission: "mutating", Arguments: json.RawMessage(tc.args)}, tc.width)
			assertNoControl(t, got)
			lines := strings.Split(got, "\n")
			header := fmt.Sprintf("%s (mutating) asks to run with:", strings.ReplaceAll(skill, "\x1b", `\x1b`))
			if tc.want == nil {
				header += " no arguments"
			}
			if lines[0] != header {
				t.Errorf("header %q, want %q", lines[0], header)
			}
			if len(lines)-1 != len(tc.want) {
				t.Fatalf("got %d lines, want %d:\n%s", len(lines)-1, len(tc.want), clip(got))
			}
			for i, w := range tc.want {
				if g := strings.TrimPrefix(lines[i+1], "  "); g != w {
					t.Errorf("line %d:\n got %s\nwant %s", i+1, clip(g), clip(w))
				}
			}
		})
	}
}

func TestDescribeBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 200 {
		fmt.Fprintf(&b, `"k%d":"%s",`, i, strings.Repeat("v", 1000))
	}
	for i := range 100 {
		fmt.Fprintf(&b, `"path%d":"/p/%d",`, i, i)
	}
	b.WriteString(`"deep":` + strings.Repeat(`[`, 40) + `"/etc/shadow"` + strings.Repeat(`]`, 40) + `}`)
	got := approval.Describe(approval.Request{Skill: "s", Permission: "mutating", Arguments: json.RawMessage(b.String())}, 0)
	assertNoControl(t, got)
	lines := strings.Split(got, "\n")
	for _, want := range []string{
		`  path0: "/p/0"`, `  path63: "/p/63"`, `  … and 36 more fields (180 bytes) not shown`,
		`  k0: 1,000 bytes, first 200: "` + strings.Repeat("v", 200) + `"…`,
		`  … and 169 more fields (168,063 bytes) not shown`,
	} {
		if !contains(lines, want) {
			t.Errorf("no line %q in\n%s", clip(want), clip(got))
		}
	}
	if len(got) > 20_000 {
		t.Errorf("%d bytes for a 200 KB request", len(got))
	}
	if lines[1] != `  path0: "/p/0"` {
		t.Errorf("targets do not come first: %q", lines[1])
	}
}

func TestDescribeDeep(t *testing.T) {
	args := `{"a":` + strings.Repeat(`{"b":`, 30) + `1` + strings.Repeat(`}`, 30) + `}`
	got := approval.Describe(approval.Request{Skill: "s", Permission: "network", Arguments: json.RawMessage(args)}, 0)
	if !strings.Contains(got, "nested deeper than 16 levels") || strings.Count(got, "\n") != 1 {
		t.Errorf("deep nesting:\n%s", got)
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func assertNoControl(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("invalid UTF-8 in %q", clip(s))
	}
	for _, r := range s {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			t.Fatalf("raw %U in %q", r, clip(s))
		}
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:300] + "…" + s[len(s)-300:]
	}
	return s
}

func FuzzDescribe(f *testing.F) {
	f.Add(`{"path":"a\u001b[2J","content":"x"}`, 20)
	f.Add(`{"a":{"b":[1,2,{"url":"\u202e"}]},"a":null}`, 0)
	f.Add("\xff\x1b", 5)
	f.Fuzz(func(t *testing.T, args string, width int) {
		got := approval.Describe(approval.Request{Skill: "s", Permission: "mutating", Arguments: json.RawMessage(args)}, width%1000)
		assertNoControl(t, got)
		if len(got) > 64*(3*maxTarget)+32*2000+4096 {
			t.Fatalf("%d bytes", len(got))
		}
	})
}

const maxTarget = 4096
