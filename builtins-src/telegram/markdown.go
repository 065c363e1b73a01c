package main

import "strings"

// ToHTML renders the model's Markdown in the subset of HTML Telegram
// accepts (parse_mode "HTML"): <b>, <i>, <s>, <code>, <pre>, <a href>,
// <blockquote>. Everything else is text, escaped. Tags are always balanced,
// whatever the input (a streamed answer cut mid-way, a hostile one): an
// inline delimiter becomes a tag only with its closing delimiter on the same
// line, and an open code fence is closed at the end.
//
//	**bold** __bold__ *italic* _italic_ ~~strike~~ `code` [text](https://…)
//	# Heading → bold line; - item / * item → "• item"; > quote → blockquote
//	```lang … ``` → <pre><code class="language-lang">…</code></pre>
func ToHTML(md string) string {
	var b strings.Builder
	b.Grow(len(md) + len(md)/8)
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	inFence, fence := false, ""
	inQuote := false
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if inFence {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				b.WriteString("</code></pre>")
				inFence = false
				if i+1 < len(lines) {
					b.WriteByte('\n')
				}
				continue
			}
			b.WriteString(escape(line))
			if i+1 < len(lines) {
				b.WriteByte('\n')
			}
			continue
		}
		quote, rest := quoted(line)
		if quote != inQuote {
			if quote {
				b.WriteString("<blockquote>")
			} else {
				b.WriteString("</blockquote>")
			}
			inQuote = quote
		}
		if quote {
			line, trimmed = rest, strings.TrimSpace(rest)
		}
		if f, lang, ok := fenceOpen(trimmed); ok && !quote {
			inFence, fence = true, f
			if lang != "" {
				b.WriteString(`<pre><code class="language-` + lang + `">`)
			} else {
				b.WriteString("<pre><code>")
			}
			continue
		}
		switch {
		case isRule(trimmed):
			b.WriteString("———")
		case heading(trimmed) > 0:
			b.WriteString("<b>")
			b.WriteString(inline(strings.TrimSpace(trimmed[heading(trimmed):])))
			b.WriteString("</b>")
		default:
			if indent, item, ok := bullet(line); ok {
				b.WriteString(indent)
				b.WriteString("• ")
				b.WriteString(inline(item))
			} else {
				b.WriteString(inline(line))
			}
		}
		if i+1 < len(lines) {
			if next, _ := quoted(lines[i+1]); inQuote && !next {
				b.WriteString("</blockquote>")
				inQuote = false
			}
			b.WriteByte('\n')
		}
	}
	if inFence {
		b.WriteString("</code></pre>")
	}
	if inQuote {
		b.WriteString("</blockquote>")
	}
	return b.String()
}

// quoted reports a "> " line and its text.
func quoted(line string) (bool, string) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, ">") {
		return false, line
	}
	return true, strings.TrimPrefix(t[1:], " ")
}

// fenceOpen reports a code fence (``` or ~~~, and a language name).
func fenceOpen(t string) (fence, lang string, ok bool) {
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(t, f) {
			n := len(t) - len(strings.TrimLeft(t, f[:1]))
			info := strings.TrimSpace(t[n:])
			if strings.ContainsAny(info, "`") {
				return "", "", false
			}
			if !validLang(info) {
				info = ""
			}
			return t[:n], info, true
		}
	}
	return "", "", false
}

func validLang(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '+' || c == '#') {
			return false
		}
	}
	return true
}

func isRule(t string) bool {
	if len(t) < 3 {
		return false
	}
	for _, c := range []byte{'-', '*', '_'} {
		if strings.Count(t, string(c))+strings.Count(t, " ") == len(t) && strings.Count(t, string(c)) >= 3 {
			return true
		}
	}
	return false
}

// heading is the length of a "# " prefix, or 0.
func heading(t string) int {
	n := 0
	for n < len(t) && n < 6 && t[n] == '#' {
		n++
	}
	if n == 0 || n >= len(t) || t[n] != ' ' {
		return 0
	}
	return n + 1
}

// bullet reports a "- item", "* item" or "+ item" line.
func bullet(line string) (indent, item string, ok bool) {
	t := strings.TrimLeft(line, " \t")
	if len(t) < 2 || (t[0] != '-' && t[0] != '*' && t[0] != '+') || t[1] != ' ' {
		return "", "", false
	}
	return line[:len(line)-len(t)], strings.TrimSpace(t[2:]), true
}

// inline renders one line's emphasis, code spans and links.
func inline(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	renderInline(&b, s, 0)
	return b.String()
}

// maxDepth bounds nested emphasis (each level is a recursion).
const maxDepth = 8

func renderInline(b *strings.Builder, s string, depth int) {
	text := 0 // start of the text not yet written
	flush := func(i int) {
		b.WriteString(escape(s[text:i]))
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_~[]()#+-.!>|", s[i+1]) >= 0:
			flush(i)
			b.WriteString(escape(s[i+1 : i+2]))
			i += 2
			text = i
			continue
		case c == '`':
			n := run(s, i, '`')
			if end := strings.Index(s[i+n:], s[i:i+n]); end >= 0 && run(s, i+n+end, '`') == n {
				flush(i)
				b.WriteString("<code>")
				b.WriteString(escape(strings.TrimSpace(s[i+n : i+n+end])))
				b.WriteString("</code>")
				i += n + end + n
				text = i
				continue
			}
			i += n
			continue
		case c == '[':
			if label, url, n, ok := link(s[i:]); ok {
				flush(i)
				b.WriteString(`<a href="` + escape(url) + `">`)
				if depth < maxDepth {
					renderInline(b, label, depth+1)
				} else {
					b.WriteString(escape(label))
				}
				b.WriteString("</a>")
				i += n
				text = i
				continue
			}
		case (c == '*' || c == '_' || c == '~') && depth < maxDepth:
			if tag, n, inner, ok := emphasis(s, i); ok {
				flush(i)
				b.WriteString("<" + tag + ">")
				renderInline(b, inner, depth+1)
				b.WriteString("</" + tag + ">")
				i += n
				text = i
				continue
			}
			i += run(s, i, c)
			continue
		}
		i++
	}
	flush(len(s))
}

// run is how many c start s[i:].
func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// emphasis reads **x**, __x__, *x*, _x_ or ~~x~~ at s[i:]: the tag, the
// length consumed and the inner text.
func emphasis(s string, i int) (tag string, n int, inner string, ok bool) {
	c := s[i]
	width := run(s, i, c)
	switch {
	case c == '~' && width == 2:
		tag = "s"
	case c == '~':
		return "", 0, "", false
	case width >= 2:
		tag, width = "b", 2
	default:
		tag = "i"
	}
	if c == '_' && i > 0 && isWord(s[i-1]) {
		return "", 0, "", false // snake_case
	}
	open := i + width
	if open >= len(s) || s[open] == ' ' {
		return "", 0, "", false
	}
	delim := s[i : i+width]
	for j := open + 1; j+width <= len(s); j++ {
		if s[j] == '`' { // a code span's delimiters are not ours
			if k := strings.IndexByte(s[j+1:], '`'); k >= 0 {
				j += k + 1
				continue
			}
		}
		if s[j:j+width] != delim || s[j-1] == ' ' || s[j-1] == '\\' {
			continue
		}
		if width == 1 && j+1 < len(s) && s[j+1] == c {
			j++ // part of a double delimiter
			continue
		}
		if c == '_' && j+width < len(s) && isWord(s[j+width]) {
			continue
		}
		return tag, j + width - i, s[open:j], true
	}
	return "", 0, "", false
}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// link reads [label](url) with an http(s) URL; any other scheme stays text.
func link(s string) (label, url string, n int, ok bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth != 0 {
				continue
			}
			if i+1 >= len(s) || s[i+1] != '(' {
				return "", "", 0, false
			}
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				return "", "", 0, false
			}
			u := strings.TrimSpace(s[i+2 : i+2+end])
			lower := strings.ToLower(u)
			if !(strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://")) || strings.ContainsAny(u, " <>\"") {
				return "", "", 0, false
			}
			return s[1:i], u, i + 2 + end + 1, true
		}
	}
	return "", "", 0, false
}
