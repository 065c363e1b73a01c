package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/buddy-run/buddy/internal/store"
)

// The page's Markdown renderer (web/markdown.js) against adversarial text:
// what it shows, and that its work grows linearly with the text. Linearity
// is checked by counting (the renderer's steps, the DOM nodes made), not by
// timing; times are compared only as a ratio, 4n against n in the same run.

// repeatTo repeats s up to about n bytes.
func repeatTo(s string, n int) string { return strings.Repeat(s, max(1, n/len(s))) }

// adversarialParts are the pieces of adversarialMarkdown, about n bytes
// each, in ASCII (the scripted provider cuts deltas at any byte).
func adversarialParts(n int) []string {
	var lengths, lists strings.Builder
	for k := 1; lengths.Len() < n; k++ {
		lengths.WriteString(strings.Repeat("`", k) + "a")
	}
	for i := 0; lists.Len() < n; i++ {
		lists.WriteString(strings.Repeat(" ", i%40) + "- item\n")
	}
	return []string{
		// 0: one long line; 1-4: unclosed *, **, _ and __ all along it
		repeatTo("lorem ipsum dolor ", n),
		repeatTo("*a ", n),
		repeatTo("**a ", n),
		repeatTo("_a ", n),
		repeatTo("__a ", n),
		// 5: one run of backticks; 6: runs of every length, none closed
		"x " + strings.Repeat("`", n/2) + repeatTo(" a", n/2),
		lengths.String(),
		// 7: links never closed; 8: brackets never closed
		repeatTo("[a](", n),
		repeatTo("[a", n),
		// 9: quotes nested as deep as they go; 10: a list indented ever deeper
		strings.Repeat(">", n/2) + repeatTo(" a", n/2),
		strings.TrimSuffix(lists.String(), "\n"),
		// 11: a paragraph of line breaks; 12: newlines; 13: backslashes
		strings.TrimSuffix(repeatTo("a\n", n), "\n"),
		strings.Repeat("\n", n),
		strings.Repeat(`\`, n),
		// 14: a link text too long to be one
		"[" + repeatTo("a *b* ", n-30) + "](https://example.com/)",
	}
}

// adversarialMarkdown is a 192 KB message of every adversarial family.
func adversarialMarkdown() string { return strings.Join(adversarialParts(13000), "\n\n") }

// mixedBlock holds every construct once; mixedMarkdown repeats it to about
// 192 KB. Per block: one h4, four p (one with a <br>), four strong, five em,
// four inline code, one pre, three links (all https), two lists of two
// items, two quotes (one in the other).
const mixedBlock = "## Heading with *em* and `code`\n\n" +
	"A paragraph with **bold**, __bold too__, *italic*, _italic too_, `code`, ``co`de``, a [link](https://example.com/a?b=1 \"title\") and a bare https://example.org/x. URL.\n" +
	"A second line with an ![image](https://example.com/i.png), a [bad link](javascript:alert(1)) and <b>html</b>.\n\n" +
	"- item one with **bold**\n" +
	"- item two with [link](https://example.com/2)\n" +
	"  continued here\n" +
	"1. ordered *em*\n" +
	"2. ordered `code`\n\n" +
	"> quoted **bold**\n" +
	"> > nested quote with _em_\n\n" +
	"```js\nlet x = \"*not em*\" + `not code`;\n<script>window.__pwned = 'pre'</script>\n```\n\n" +
	"Unclosed: *a **b _c __d `e [f](g and a long run of \\\\\\\\\\\\ backslashes.\n\n"

func mixedMarkdown() string { return repeatTo(mixedBlock, 192<<10) }

// codeLines is the body of codeMarkdown: a 192 KB code block, which the
// browser lays out whole at each change while it grows.
func codeLines() string {
	return strings.TrimSuffix(repeatTo("\tif x := f(\"*not em*\", `[not](https://a.link)`); x < 0 { return <b>x</b> }\n", 192<<10), "\n")
}

func codeMarkdown() string { return "The code:\n\n```go\n" + codeLines() + "\n```\n\nAfter the code." }

// installCounters counts, from outside the page's code, the DOM nodes it
// creates and the characters it puts into text.
const installCounters = `(() => {
	if (window.__count) return true;
	const c = window.__count = {nodes: 0, chars: 0};
	for (const m of ["createElement", "createTextNode", "createDocumentFragment"]) {
		const f = Document.prototype[m];
		Document.prototype[m] = function (x) { c.nodes++; if (m === "createTextNode") c.chars += String(x).length; return f.apply(this, arguments); };
	}
	const d = Object.getOwnPropertyDescriptor(Node.prototype, "textContent");
	Object.defineProperty(Node.prototype, "textContent", {get: d.get, set(v) { c.chars += String(v).length; d.set.call(this, v); }, configurable: true, enumerable: d.enumerable});
	return true;
})()`

// TestWebMarkdownStream streams the 192 KB adversarial message, the 192 KB
// mixed one and a 192 KB code block through the real server and checks what
// the page shows, that streaming kept the blocks it had finished, and that
// the history shows the same after a reload.
func TestWebMarkdownStream(t *testing.T) {
	browser := newBrowser(t)
	s := agentStack(t, stackOpts{})
	b := signedIn(t, browser, s)
	b.eval(installCounters, nil)

	// streamed sends cmd and waits for its answer to finish. It returns the
	// nodes and characters the page made meanwhile, how many frames passed,
	// the longest task, how many block elements (p, pre, ul, ol, li,
	// blockquote, h3-h5) left the message, and whether the first block, once
	// finished (a second followed it), stayed the same element to the end.
	type streamStats struct {
		Nodes, Chars, Frames, Final, Removed int
		Took, LongTask                       float64
		Kept                                 bool
	}
	streamed := func(cmd string) streamStats {
		b.eval(`(() => { const c = window.__count; window.__start = {nodes: c.nodes, chars: c.chars, t: performance.now()};
			window.__frames = 0; window.__long = 0; window.__removed = 0; window.__first = null; window.__counting = true;
			const tick = () => { if (!window.__counting) return; window.__frames++;
				const body = document.querySelector("li.msg.assistant.streaming .msg-body");
				if (body && !window.__first && body.children.length >= 2) window.__first = body.firstElementChild;
				requestAnimationFrame(tick); };
			requestAnimationFrame(tick);
			if (!window.__obs) {
				window.__obs = new PerformanceObserver(l => { for (const e of l.getEntries()) window.__long = Math.max(window.__long, e.duration); });
				window.__obs.observe({type: "longtask"});
				new MutationObserver(rs => { for (const r of rs) for (const n of r.removedNodes) if (/^(P|PRE|UL|OL|LI|BLOCKQUOTE|H3|H4|H5)$/.test(n.nodeName)) window.__removed++; })
					.observe(document.getElementById("messages"), {childList: true, subtree: true});
			}
			return true; })()`, nil)
		before := b.str(`String(document.querySelectorAll("li.msg.assistant").length)`)
		b.send(cmd)
		b.wait(fmt.Sprintf(`document.querySelectorAll("li.msg.assistant").length > %s && !document.querySelector("li.msg.assistant.streaming") && !document.getElementById("send").disabled`, before))
		var st streamStats
		b.eval(`(async () => { await new Promise(r => requestAnimationFrame(r)); window.__counting = false; const c = window.__count, s = window.__start;
			const body = [...document.querySelectorAll("li.msg.assistant")].pop().querySelector(".msg-body");
			let final = 0; const w = document.createTreeWalker(body); while (w.nextNode()) final++;
			return {nodes: c.nodes - s.nodes, chars: c.chars - s.chars, frames: window.__frames, final, removed: window.__removed,
				kept: window.__first !== null && body.firstElementChild === window.__first, took: performance.now() - s.t, longTask: window.__long}; })()`, &st)
		return st
	}
	// same reports whether the last answer's elements are what rendering
	// its whole text at once makes.
	same := func(text string) bool {
		var ok bool
		b.eval(fmt.Sprintf(`(() => { const body = [...document.querySelectorAll("li.msg.assistant")].pop().querySelector(".msg-body");
			const d = document.createElement("div"); d.append(BuddyMarkdown.render(%q)); return d.innerHTML === body.innerHTML; })()`, text), &ok)
		return ok
	}
	// Streaming must not lay out the whole message again per delta: finished
	// blocks stay (the first block is the same element at the end; at most
	// the block being written leaves the message at each frame), and the
	// nodes made stay within a small multiple of those shown at the end.
	checkStream := func(t *testing.T, name string, st streamStats, text string) {
		t.Helper()
		t.Logf("BENCH streamed %s (%d bytes, %d frames): %.0f ms to the end of the turn, longest task %.0f ms; %d nodes shown, %d made, %d characters set, %d blocks taken out",
			name, len(text), st.Frames, st.Took, st.LongTask, st.Final, st.Nodes, st.Chars, st.Removed)
		if !st.Kept || st.Removed > 2*st.Frames+20 {
			t.Errorf("%s: the first block kept: %v; %d blocks taken out in %d frames: the message was laid out again", name, st.Kept, st.Removed, st.Frames)
		}
		if st.Nodes > 5*st.Final+5000 {
			t.Errorf("%s: streaming made %d nodes for %d shown", name, st.Nodes, st.Final)
		}
		if !same(text) {
			t.Errorf("%s: the streamed answer differs from the message rendered whole", name)
		}
	}

	t.Run("adversarial", func(t *testing.T) {
		text := adversarialMarkdown()
		if len(text) < 190000 || len(text) > 200000 {
			t.Fatalf("the adversarial message is %d bytes", len(text))
		}
		checkStream(t, "adversarial", streamed("adversarial"), text)
		parts := adversarialParts(13000)
		var got struct {
			Paras  []string
			Depth  int
			Inner  string
			Items  int
			Breaks int
			Ems    int
			Links  []string
		}
		b.eval(`(() => { const body = [...document.querySelectorAll("li.msg.assistant")].pop().querySelector(".msg-body");
			let depth = 0, inner = null; for (let q = body.querySelector(":scope > blockquote"); q; q = q.querySelector(":scope > blockquote")) { depth++; inner = q; }
			const huge = [...body.querySelectorAll(":scope > p")].pop();
			return {paras: [...body.querySelectorAll(":scope > p")].map(p => p.textContent), depth, inner: inner.querySelector(":scope > p").textContent,
				items: body.querySelectorAll("ul > li").length, breaks: Math.max(...[...body.querySelectorAll("p")].map(p => p.querySelectorAll("br").length)),
				ems: huge.querySelectorAll("em").length, links: [...body.querySelectorAll("a")].map(a => a.href)}; })()`, &got)
		// The unclosed families stay text, all of it: each is a paragraph
		// holding exactly its source.
		for _, i := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 13} {
			found := false
			for _, p := range got.Paras {
				found = found || p == parts[i]
			}
			if !found {
				t.Errorf("part %d (%.20q…, %d bytes) is not shown as one paragraph of its text", i, parts[i], len(parts[i]))
			}
		}
		if want := strings.Repeat(">", strings.Count(parts[9], ">")-8) + " a a"; got.Depth != 8 || !strings.HasPrefix(got.Inner, want) {
			t.Errorf("nested quotes: %d deep, innermost paragraph starts %.20q", got.Depth, got.Inner)
		}
		items := 0
		for _, line := range strings.Split(parts[10], "\n") {
			if len(line)-len(strings.TrimLeft(line, " ")) <= 3 {
				items++
			}
		}
		if got.Items != items {
			t.Errorf("the indented list shows %d items, want %d", got.Items, items)
		}
		if want := strings.Count(parts[11], "\n"); got.Breaks != want {
			t.Errorf("the paragraph of line breaks has %d <br>, want %d", got.Breaks, want)
		}
		if want := strings.Count(parts[14], "*b*"); got.Ems != want {
			t.Errorf("the huge link text (not a link: over 1,000 characters) has %d <em>, want %d", got.Ems, want)
		}
		if len(got.Links) != 1 || got.Links[0] != "https://example.com/" {
			t.Errorf("links in the adversarial message: %v, want only the bare URL after the huge link text", got.Links)
		}
		b.pwnedCheck()
	})

	t.Run("mixed", func(t *testing.T) {
		text := mixedMarkdown()
		checkStream(t, "mixed", streamed("mixed"), text)
		blocks := strings.Count(text, mixedBlock)
		var got map[string]int
		b.eval(`(() => { const body = [...document.querySelectorAll("li.msg.assistant")].pop().querySelector(".msg-body");
			const n = (sel) => body.querySelectorAll(sel).length;
			return {h4: n(":scope > h4"), p: n("p"), br: n("br"), strong: n("strong"), em: n("em"), code: n(":not(pre) > code"), pre: n("pre"),
				a: n("a"), https: n('a[href^="https://example."][rel="noopener noreferrer nofollow"][target="_blank"]'), ul: n("ul"), ol: n("ol"), li: n("li"),
				blockquote: n("blockquote"), nested: n("blockquote > blockquote"), img: n("img"), script: document.scripts.length}; })()`, &got)
		want := map[string]int{"h4": 1, "p": 4, "br": 1, "strong": 4, "em": 5, "code": 4, "pre": 1, "a": 3, "https": 3,
			"ul": 1, "ol": 1, "li": 4, "blockquote": 2, "nested": 1}
		for k, per := range want {
			if got[k] != per*blocks {
				t.Errorf("%s: %d, want %d (%d blocks of %d)", k, got[k], per*blocks, blocks, per)
			}
		}
		if got["img"] != 0 || got["script"] != 2 {
			t.Errorf("images %d, scripts %d", got["img"], got["script"])
		}
		var sample struct{ Code, Pre, Para, Link, Second string }
		b.eval(`(() => { const body = [...document.querySelectorAll("li.msg.assistant")].pop().querySelector(".msg-body");
			const p = body.querySelector(":scope > p");
			return {code: [...p.querySelectorAll("code")].map(c => c.textContent).join("|"), pre: body.querySelector("pre code").textContent,
				para: p.textContent, link: p.querySelector("a").textContent + " " + p.querySelector("a").href,
				second: [...body.querySelectorAll(":scope > p")][1].textContent}; })()`, &sample)
		if sample.Code != "code|co`de" || sample.Link != "link https://example.com/a?b=1" ||
			sample.Pre != "let x = \"*not em*\" + `not code`;\n<script>window.__pwned = 'pre'</script>" ||
			!strings.Contains(sample.Para, "![image](https://example.com/i.png), a [bad link](javascript:alert(1)) and <b>html</b>.") ||
			sample.Second != "Unclosed: *a **b _c __d `e [f](g and a long run of \\\\\\\\\\\\ backslashes." {
			t.Errorf("rendered: %+v", sample)
		}
		b.pwnedCheck()
	})

	t.Run("code block", func(t *testing.T) {
		text := codeMarkdown()
		checkStream(t, "code block", streamed("code"), text)
		var got struct {
			Code  string
			After string
			A     int
		}
		b.eval(`(() => { const body = [...document.querySelectorAll("li.msg.assistant")].pop().querySelector(".msg-body");
			return {code: body.querySelector("pre code").textContent, after: body.querySelector(":scope > p:last-child").textContent, a: body.querySelectorAll("a").length}; })()`, &got)
		if got.Code != codeLines() || got.After != "After the code." || got.A != 0 {
			t.Errorf("code block: %d characters (want %d), then %q, %d links", len(got.Code), len(codeLines()), got.After, got.A)
		}
	})

	t.Run("history", func(t *testing.T) {
		var before []string
		b.eval(`[...document.querySelectorAll("li.msg.assistant .msg-body")].map(b => b.innerHTML)`, &before)
		b.run(chromedp.Reload())
		b.wait(`document.body.dataset.ready === "1" && document.querySelectorAll("li.msg.assistant").length === 3`)
		var after []string
		b.eval(`[...document.querySelectorAll("li.msg.assistant .msg-body")].map(b => b.innerHTML)`, &after)
		t.Logf("BENCH opening the conversation with the three 192 KB answers: rendering took %s ms", b.str(`document.body.dataset.renderMs`))
		if len(before) != 3 || len(after) != 3 || before[0] != after[0] || before[1] != after[1] || before[2] != after[2] {
			t.Errorf("the history after a reload differs from what was streamed")
		}
		b.pwnedCheck()
	})
}

// markdownFamilies are the adversarial families the linearity test renders
// at n and 4n characters, as JavaScript: name → (n) => text.
var markdownFamilies = `{
	"long line": (n) => rep("lorem ipsum dolor ", n),
	"unclosed *": (n) => rep("*a ", n),
	"unclosed **": (n) => rep("**a ", n),
	"unclosed _": (n) => rep("_a ", n),
	"unclosed __": (n) => rep("__a ", n),
	"backtick run": (n) => "x " + "` + "`" + `".repeat(n / 2) + rep(" a", n / 2),
	"backtick lengths": (n) => { let s = ""; for (let k = 1; s.length < n; k++) s += "` + "`" + `".repeat(k) + "a"; return s; },
	"unclosed [": (n) => rep("[a", n),
	"unclosed link": (n) => rep("[a](", n),
	"link targets then spaces": (n) => rep("[a](x", n / 4) + " ".repeat(n / 2) + rep("\"t", n / 4),
	"link title unclosed": (n) => rep("[a](x \"t ", n),
	"nested quotes": (n) => ">".repeat(n / 2) + rep(" a", n / 2),
	"quote lines": (n) => rep("> > > > > > > > > > a\n", n),
	"indented list": (n) => { let s = ""; for (let i = 0; s.length < n; i++) s += " ".repeat(i % 40) + "- item\n"; return s; },
	"newlines": (n) => "\n".repeat(n),
	"line breaks": (n) => rep("a\n", n),
	"backslashes": (n) => "\\".repeat(n),
	"huge link text": (n) => "[" + rep("a *b* ", n - 30) + "](https://example.com/)",
	"huge link": (n) => "[" + "a".repeat(900) + "](https://example.com/" + "b".repeat(3000) + ")" + rep(" [x](https://e.com/" + "y".repeat(4000), n),
	"list item with U+2028": (n) => "- " + " ".repeat(n) + "a\u2028b",
	"heading with U+2028": (n) => "# " + " ".repeat(n) + "a\u2028b",
	"bare URLs ending in dots": (n) => rep("http://" + ".".repeat(50) + " ", n),
	"nested emphasis": (n) => rep("**_*__a ", n / 2) + rep("b__*_** ", n / 2),
	"mixed": (n) => rep(` + "`" + strings.ReplaceAll(strings.ReplaceAll(mixedBlock, `\`, `\\`), "`", "\\`") + "`" + `, n),
}`

// TestWebMarkdownLinear renders each adversarial family at n and 4n
// characters in the page, whole and streamed in 100-character pieces, and
// checks that the renderer's steps and the DOM nodes it makes grow about
// 4×, not 16×; render times are logged, not checked.
// It also opens a conversation of N and of 4N messages, and times opening
// the red team's 192 KB answer (logged, not checked).
func TestWebMarkdownLinear(t *testing.T) {
	browser := newBrowser(t)
	s := newStack(t, stackOpts{})
	b := signedIn(t, browser, s)
	b.eval(installCounters, nil)

	const n = 48000
	var results []struct {
		Name             string
		NA, NB           int
		WorkA, WorkB     float64
		NodesA, NodesB   float64
		StreamA, StreamB float64
		TimeA, TimeB     float64
	}
	b.eval(`(async () => {
		const M = window.BuddyMarkdown, c = window.__count, N = `+fmt.Sprint(n)+`;
		const rep = (s, n) => s.repeat(Math.max(1, Math.floor(n / s.length)));
		const fams = `+markdownFamilies+`;
		const whole = (src) => { const w = M.work(), k = c.nodes; M.render(src); return [M.work() - w, c.nodes - k]; };
		const streamed = (src) => { const w = M.work(); const s = new M.Stream(document.createElement("div"));
			for (let i = 0; i < src.length; i += 100) s.push(src.slice(i, i + 100)); s.end(); return M.work() - w; };
		// times renders a and b alternately, five times each, and keeps each
		// one's best; on a busy machine a ratio over the bound is measured
		// again, twice at most.
		const once = (src) => { const t0 = performance.now(); M.render(src); return performance.now() - t0; };
		const times = (a, b) => {
			let ta = Infinity, tb = Infinity;
			for (let round = 0; round < 3; round++) {
				for (let i = 0; i < 5; i++) { ta = Math.min(ta, once(a)); tb = Math.min(tb, once(b)); }
				if (tb <= 8 * Math.max(ta, 5)) break;
			}
			return [ta, tb];
		};
		const out = [];
		for (const [name, f] of Object.entries(fams)) {
			const a = f(N), b = f(4 * N);
			M.render(a); M.render(b);
			const [workA, nodesA] = whole(a), [workB, nodesB] = whole(b);
			const [timeA, timeB] = times(a, b);
			out.push({name, na: a.length, nb: b.length, workA, workB, nodesA, nodesB, streamA: streamed(a), streamB: streamed(b), timeA, timeB});
			await new Promise(r => setTimeout(r, 0));
		}
		return out;
	})()`, &results)
	if len(results) < 20 {
		t.Fatalf("%d families rendered", len(results))
	}
	for _, r := range results {
		t.Logf("BENCH %-26s %6d → %6d chars: steps ×%.2f, nodes ×%.2f (%.0f → %.0f), streamed steps ×%.2f, time %.1f → %.1f ms",
			r.Name, r.NA, r.NB, r.WorkB/r.WorkA, r.NodesB/r.NodesA, r.NodesA, r.NodesB, r.StreamB/r.StreamA, r.TimeA, r.TimeB)
		if r.NB > 200000 || r.NB < 3*r.NA {
			t.Errorf("%s: sizes %d and %d (want 4n, under the 200,000 plain-text limit)", r.Name, r.NA, r.NB)
		}
		if r.WorkB > 5*r.WorkA || r.StreamB > 5*r.StreamA {
			t.Errorf("%s: 4× the text took %.1f× the steps (streamed: %.1f×), not about 4×", r.Name, r.WorkB/r.WorkA, r.StreamB/r.StreamA)
		}
		if r.NodesB > 5*r.NodesA+10 {
			t.Errorf("%s: 4× the text made %.1f× the nodes", r.Name, r.NodesB/r.NodesA)
		}
		// Render times are logged above, not checked: on a shared machine
		// a timed assertion fails with the load, not with the code (the
		// step and node counters are what prove linearity).
	}

	// Opening a conversation: N messages, then 4N; then the red team's 192 KB
	// answer, three times.
	ctx := t.Context()
	now := time.Now().UTC()
	keep := func(id, title string, msgs []store.Message) {
		t.Helper()
		if err := s.st.CreateConversation(ctx, store.Conversation{ID: id, Title: title, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			m.Conversation = id
			if _, err := s.st.AppendMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// open opens the conversation titled title from the list and returns
	// the nodes made and the page's own figure for rendering it.
	open := func(title string) (nodes, ms float64) {
		t.Helper()
		var r struct{ Nodes, MS float64 }
		b.eval(fmt.Sprintf(`(async () => { const k = window.__count.nodes; delete document.body.dataset.renderMs;
			[...document.querySelectorAll("#conv-list button.open")].find(b => b.title === %q).click();
			while (document.body.dataset.renderMs === undefined) await new Promise(r => setTimeout(r, 10));
			return {nodes: window.__count.nodes - k, ms: Number(document.body.dataset.renderMs)}; })()`, title), &r)
		return r.Nodes, r.MS
	}
	pairs := func(n int) []store.Message {
		var msgs []store.Message
		for i := range n {
			msgs = append(msgs,
				store.Message{Role: "user", Text: fmt.Sprintf("Question %d: *what* is in `notes/%d.txt`?", i, i)},
				store.Message{Role: "assistant", Text: strings.Replace(mixedBlock, "Heading", fmt.Sprintf("Answer %d", i), 1)})
		}
		return msgs
	}
	keep("c_00000000000000c1", "200 messages", pairs(100))
	keep("c_00000000000000c2", "800 messages", pairs(400))
	// The red team's message: 192 KB of "**a ".
	keep("c_00000000000000c3", "192 KB of **a", []store.Message{{Role: "assistant", Text: strings.Repeat("**a ", 192<<10/4)}})
	b.run(chromedp.Reload())
	b.wait(`document.body.dataset.ready === "1"`)
	b.eval(installCounters, nil)
	nodesA, msA := open("200 messages")
	nodesB, msB := open("800 messages")
	t.Logf("BENCH opening 200 messages: %.0f nodes, rendered in %.0f ms; 800 messages: %.0f nodes, %.0f ms", nodesA, msA, nodesB, msB)
	if nodesB > 5*nodesA || msB > 8*max(msA, 20) {
		t.Errorf("opening 4× the messages made %.1f× the nodes and took %.0f ms against %.0f ms", nodesB/nodesA, msB, msA)
	}
	var runs []string
	for range 3 {
		_, ms := open("192 KB of **a")
		runs = append(runs, fmt.Sprintf("%.0f", ms))
	}
	t.Logf("BENCH opening one 192 KB answer of \"**a \": rendered in %s ms", strings.Join(runs, " / "))
}

// TestWebMarkdownReference renders short random texts with markdown.js and
// with the regular-expression renderer it replaced
// (testdata/markdown-regex.js) and wants the same elements; and it streams
// random texts in random pieces, wanting after every piece what rendering
// the text so far at once shows.
func TestWebMarkdownReference(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join("testdata", "markdown-regex.js"))
	if err != nil {
		t.Fatal(err)
	}
	browser := newBrowser(t)
	s := newStack(t, stackOpts{})
	b := signedIn(t, browser, s)
	b.eval(string(ref)+"; true", nil)
	var res struct {
		Rendered, Streamed int
		Differ             []string
	}
	b.eval(`(() => {
		const BT = String.fromCharCode(96), M = window.BuddyMarkdown;
		let seed = 1;
		const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x7fffffff; };
		const pick = (a) => a[Math.floor(rnd() * a.length)];
		const text = (alphabet, most) => { let s = ""; for (let i = 1 + Math.floor(rnd() * most); i > 0; i--) s += pick(alphabet); return s; };
		const html = (frag) => { const d = document.createElement("div"); d.append(frag); return d.innerHTML; };
		const alphabets = [
			["*", "_", BT, " ", "a", "b", "[", "]", "(", ")", "!", "h", "http://x.y", "https://", ".", "\"", "<", ">", "\n", "-", "1.", "#", "  ", "\t", "\\", "**", "__", BT + BT + BT],
			["*", "_", BT, " ", "a"],
			["[", "]", "(", ")", "a", " ", "\"", "<", ">", "http://e.com", "!", "*", "javascript:x"],
			["\n", "- ", "1. ", "2) ", "> ", "# ", "### ", BT + BT + BT, "~~~", "a", " ", "  ", "    ", "*", BT, "\n\n", "\r\n", "\r"],
		];
		const differ = [];
		let rendered = 0, streamed = 0;
		for (let i = 0; i < 20000; i++) {
			const s = text(alphabets[i % alphabets.length], 30);
			if (html(window.regexMarkdown(s)) !== html(M.render(s))) differ.push("render " + JSON.stringify(s));
			rendered++;
		}
		const all = [].concat(...alphabets);
		for (let i = 0; i < 2000; i++) {
			const s = text(all, 60);
			const body = document.createElement("div"), st = new M.Stream(body);
			for (let at = 0; at < s.length;) {
				const next = Math.min(s.length, at + 1 + Math.floor(rnd() * 8));
				st.push(s.slice(at, next));
				at = next;
				const sofar = s.slice(0, at);
				if (!sofar.endsWith("\r") && body.innerHTML !== html(M.render(sofar))) { differ.push("stream " + JSON.stringify(sofar)); break; }
			}
			st.end();
			if (body.innerHTML !== html(M.render(s))) differ.push("stream end " + JSON.stringify(s));
			streamed++;
		}
		return {rendered, streamed, differ: differ.slice(0, 10)};
	})()`, &res)
	if res.Rendered != 20000 || res.Streamed != 2000 || len(res.Differ) != 0 {
		t.Errorf("%d rendered, %d streamed; differing: %q", res.Rendered, res.Streamed, res.Differ)
	}
}
