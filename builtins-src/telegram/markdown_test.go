package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestToHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a < b & c > d", "a &lt; b &amp; c &gt; d"},
		{"**bold** and *it* and _it_ and __b__", "<b>bold</b> and <i>it</i> and <i>it</i> and <b>b</b>"},
		{"~~gone~~", "<s>gone</s>"},
		{"snake_case_name stays", "snake_case_name stays"},
		{"2 * 3 * 4", "2 * 3 * 4"},
		{"`a < b` code", "<code>a &lt; b</code> code"},
		{"``x ` y``", "<code>x ` y</code>"},
		{"**unclosed bold", "**unclosed bold"},
		{"[buddy](https://example.com/a?b=1&c=2)", `<a href="https://example.com/a?b=1&amp;c=2">buddy</a>`},
		{"[evil](javascript:alert(1))", "[evil](javascript:alert(1))"},
		{"# Title\ntext", "<b>Title</b>\ntext"},
		{"- one\n- **two**", "• one\n• <b>two</b>"},
		{"> quoted\n> more\nafter", "<blockquote>quoted\nmore</blockquote>\nafter"},
		{"```go\nx := <-c\n```\ndone", "<pre><code class=\"language-go\">x := &lt;-c\n</code></pre>\ndone"},
		{"```\nunclosed <fence>", "<pre><code>unclosed &lt;fence&gt;</code></pre>"},
		{"```\"><script>\ncode\n```", "<pre><code>code\n</code></pre>"},
		{`\*not italic\*`, "*not italic*"},
		{"**bold with `code**` inside**", "<b>bold with <code>code**</code> inside</b>"},
		{"---", "———"},
		{"<b>raw html</b>", "&lt;b&gt;raw html&lt;/b&gt;"},
	}
	for _, tt := range tests {
		if got := ToHTML(tt.in); got != tt.want {
			t.Errorf("ToHTML(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

var tagRE = regexp.MustCompile(`<(/?)([a-z]+)[^>]*>`)

// balanced checks that html's tags are Telegram's and properly nested.
func balanced(html string) (string, bool) {
	allowed := map[string]bool{"b": true, "i": true, "s": true, "code": true, "pre": true, "a": true, "blockquote": true}
	var stack []string
	for _, m := range tagRE.FindAllStringSubmatch(html, -1) {
		if !allowed[m[2]] {
			return "tag " + m[2], false
		}
		if m[1] == "" {
			stack = append(stack, m[2])
			continue
		}
		if len(stack) == 0 || stack[len(stack)-1] != m[2] {
			return "closing " + m[2] + " with open " + strings.Join(stack, ","), false
		}
		stack = stack[:len(stack)-1]
	}
	if len(stack) > 0 {
		return "left open: " + strings.Join(stack, ","), false
	}
	// No stray < or > outside tags.
	rest := tagRE.ReplaceAllString(html, "")
	if strings.ContainsAny(rest, "<>") {
		return "a raw < or >", false
	}
	return "", true
}

func FuzzToHTML(f *testing.F) {
	for _, s := range []string{"**a*b**", "*a **b* c**", "[a](https://x)**", "```\n> q\n", "> a\n```\nb", "_a_b_", "~~a~~~", "[**a](https://x)**", "`a**`b**"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		html := ToHTML(s)
		if why, ok := balanced(html); !ok {
			t.Fatalf("ToHTML(%q) = %q: %s", s, html, why)
		}
	})
}

func TestToHTMLBalancedOnPrefixes(t *testing.T) {
	// A streamed answer is rendered at every edit: every prefix must be valid.
	md := "# Plan\n\nHere is **the plan** with `code` and a [link](https://example.com).\n\n```python\nprint('<hi>')\n```\n\n> note *this*\n- item _one_\n- ~~item~~ two"
	for i := range len(md) + 1 {
		if why, ok := balanced(ToHTML(md[:i])); !ok {
			t.Fatalf("prefix %q: %s", md[:i], why)
		}
	}
}
