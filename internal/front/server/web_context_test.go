package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/store"
)

// The page and the model's context window: summaries folded where the
// messages they stand for were, the token meter, what a request left out,
// in a real browser against the real server, agent loop and store.

// hostileSummary is a summary as a model might write it: Markdown, and
// HTML that must stay text.
const hostileSummary = "The user asked about **notes.txt**. <img src=x onerror=\"window.__pwned='summary'\"> " +
	"[x](javascript:window.__pwned='summary-link') <script>window.__pwned='summary-script'</script>"

// contextProvider answers "mN …" with "Noted mN." and a summary request
// with hostileSummary; every response reports usage when usage is set
// (else buddy estimates it).
func contextProvider(usage *agent.Usage) agent.Provider {
	return agent.ProviderFunc(func(ctx context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		resp := &agent.Response{StopReason: "stop"}
		if usage != nil {
			resp.Usage = *usage
		}
		last := req.Messages[len(req.Messages)-1]
		if strings.HasPrefix(last.Text, "Summarise this conversation so far") {
			resp.Text = hostileSummary
			return resp, nil
		}
		word, _, _ := strings.Cut(last.Text, " ")
		resp.Text = "Noted " + word + "."
		onText(resp.Text)
		return resp, nil
	})
}

// contextStack is a stack whose agent has a window of window tokens, over
// contextProvider, recording usage in the store as buddy serve does.
func contextStack(t *testing.T, window int, usage *agent.Usage, priceIn, priceOut float64) *stack {
	t.Helper()
	h := &lazyHistory{}
	s := newStack(t, stackOpts{server: func(opts *server.Options) {
		opts.NewAgent = func(g server.Gate) server.Agent {
			return agent.New(agent.Options{Provider: contextProvider(usage), Skills: g, History: h, Usage: h, NewCallID: server.NewCallID,
				Window: window, PriceInPerMTok: priceIn, PriceOutPerMTok: priceOut})
		}
	}})
	h.mu.Lock()
	h.st = s.st
	h.mu.Unlock()
	return s
}

// storedMessage is a message of GET /api/conversations/{id}.
type storedMessage struct {
	ID         int64  `json:"id"`
	Role       string `json:"role"`
	Text       string `json:"text"`
	CoversFrom int64  `json:"covers_from"`
	CoversTo   int64  `json:"covers_to"`
}

// usageView is the usage of GET /api/conversations/{id}.
type usageView struct {
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CachedTokens     int64   `json:"cached_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	ContextTokens    int64   `json:"context_tokens"`
	WindowTokens     int64   `json:"window_tokens"`
	Estimated        bool    `json:"estimated"`
}

func (s *stack) messagesAndUsage(t *testing.T, conv string) ([]storedMessage, usageView) {
	t.Helper()
	var v struct {
		Messages []storedMessage `json:"messages"`
		Usage    usageView       `json:"usage"`
	}
	s.getJSON(t, "/api/conversations/"+conv, &v)
	return v.Messages, v.Usage
}

// kTokens is the page's "3.1k".
func kTokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 10000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1000), ".0") + "k"
	}
	return fmt.Sprintf("%dk", (n+500)/1000)
}

// shownOnce fails unless every message the page can show (all but the
// assistant messages that only called tools: their cards show them) is in
// the DOM exactly once, and no other id is. Live, the page learns the ids
// of the messages it shows from frames only at a compaction (frames carry
// none): those after upTo, but summaries, may lack theirs.
func (b *tab) shownOnce(msgs []storedMessage, upTo int64) {
	b.t.Helper()
	counts := map[string]int{}
	b.eval(`(() => { const c = {}; for (const e of document.querySelectorAll("#messages [data-id]")) c[e.dataset.id] = (c[e.dataset.id] || 0) + 1; return c; })()`, &counts)
	want := map[string]bool{}
	for _, m := range msgs {
		id := fmt.Sprint(m.ID)
		if m.Role == "assistant" && m.Text == "" {
			if counts[id] != 0 {
				b.t.Errorf("message %s (tool calls only) is in the page %d times", id, counts[id])
			}
			continue
		}
		want[id] = true
		if m.ID > upTo && m.Role != "summary" && counts[id] == 0 {
			continue
		}
		if counts[id] != 1 {
			b.t.Errorf("message %s (%s) is in the page %d times, want once", id, m.Role, counts[id])
		}
	}
	for id, n := range counts {
		if !want[id] {
			b.t.Errorf("the page shows %d elements with id %s, which is no message of the conversation", n, id)
		}
	}
}

// ids lists the data-id of the children of the element selected by sel.
func (b *tab) ids(sel string) []string {
	b.t.Helper()
	var out []string
	b.eval(fmt.Sprintf(`[...document.querySelector(%q).children].map(e => e.dataset.id || e.className)`, sel), &out)
	return out
}

func TestWebContext(t *testing.T) {
	browser := newBrowser(t)

	t.Run("stored summaries", func(t *testing.T) {
		s := newStack(t, stackOpts{})
		ctx := t.Context()
		conv := "c_00000000000000cc"
		now := time.Now().UTC()
		if err := s.st.CreateConversation(ctx, store.Conversation{ID: conv, Title: "summarised", CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		add := func(m store.Message) int64 {
			t.Helper()
			m.Conversation = conv
			id, err := s.st.AppendMessage(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		meta := func(method string, n int, errText string) json.RawMessage {
			b, _ := json.Marshal(map[string]any{"method": method, "messages": n, "tokens_before": 3000, "error": errText})
			return b
		}
		// As the agent stores them: a turn's user message, then the
		// summary of the turns before it, then the turn's answer.
		u1 := add(store.Message{Role: "user", Text: "first question"})
		add(store.Message{Role: "assistant", ToolCalls: json.RawMessage(`[{"id":"call_1","name":"read_file","arguments":"{\"path\":\"notes.txt\"}"}]`)})
		t3 := add(store.Message{Role: "tool", CallID: "call_1", Skill: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`), OK: true,
			Result: json.RawMessage(`{"content":"buy oat milk\n"}`)})
		a4 := add(store.Message{Role: "assistant", Text: "first answer"})
		u5 := add(store.Message{Role: "user", Text: "second question"})
		a6 := add(store.Message{Role: "assistant", Text: "second answer"})
		u7 := add(store.Message{Role: "user", Text: "third question"})
		s8 := add(store.Message{Role: "summary", Text: hostileSummary, CoversFrom: u1, CoversTo: a4, Meta: meta("summary", 4, "")})
		a9 := add(store.Message{Role: "assistant", Text: "third answer"})
		u10 := add(store.Message{Role: "user", Text: "fourth question"})
		s11 := add(store.Message{Role: "summary", CoversFrom: u1, CoversTo: a9, Meta: meta("dropped", 7, "the provider is down")})
		a12 := add(store.Message{Role: "assistant", Text: "fourth answer"})
		for _, u := range []store.Usage{
			{Conversation: conv, Purpose: store.UsageTurn, PromptTokens: 2000, CompletionTokens: 100, CachedTokens: 500, Reported: true, WindowTokens: 8192, CostMicroUSD: 4000},
			{Conversation: conv, Purpose: store.UsageTurn, PromptTokens: 3100, CompletionTokens: 200, CachedTokens: 1000, Reported: true, WindowTokens: 8192, CostMicroUSD: 8300},
		} {
			if err := s.st.AppendUsage(ctx, u); err != nil {
				t.Fatal(err)
			}
		}

		b := newTab(t, browser)
		b.open(s.url + "/#token=" + testToken)
		b.open(s.url + "/?summaries#c=" + conv)
		outer := fmt.Sprintf(`#messages > li.msg.summary[data-id="%d"]`, s11)
		inner := fmt.Sprintf(`li.msg.summary.inline[data-id="%d"]`, s8)
		b.wait(fmt.Sprintf(`document.querySelector(%q)`, outer))

		// Folded where the messages were: the later summary's card first,
		// then what no summary covers. The card holds the messages of both
		// summaries, merged, and the earlier summary after the last message
		// it covers.
		if got, want := b.ids("#messages"), []string{fmt.Sprint(s11), fmt.Sprint(u10), fmt.Sprint(a12)}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("the conversation shows %v, want %v (the card, then the fourth turn)", got, want)
		}
		if got, want := strings.Join(b.ids(outer+" .fold-list"), " "), fmt.Sprint(u1, t3, a4, s8, u5, a6, u7, a9); got != want {
			t.Errorf("the card holds %v, want %v (the tool call as its card, the earlier summary after message %d)", got, want, a4)
		}
		msgs, _ := s.messagesAndUsage(t, conv)
		b.shownOnce(msgs, math.MaxInt64)

		var c struct {
			Open, InnerShown, InnerOpen, FirstShown bool
			Label, InnerLabel                       string
		}
		look := func() {
			b.eval(fmt.Sprintf(`(() => { const o = document.querySelector(%q), i = document.querySelector(%q);
				const first = document.querySelector('[data-id="%d"]');
				return {open: o.querySelector("details").open, innerShown: i.checkVisibility(), innerOpen: i.querySelector("details").open,
					firstShown: first.checkVisibility(), label: o.querySelector("summary").textContent, innerLabel: i.querySelector("summary").textContent}; })()`,
				outer, inner, u1), &c)
		}
		look()
		if c.Open || c.InnerShown || c.FirstShown {
			t.Errorf("the card opens unfolded: %+v", c)
		}
		if c.Label != "7 earlier messages left out to fit the model's context window" ||
			c.InnerLabel != "4 earlier messages summarised to fit the model's context window" {
			t.Errorf("labels %q and %q", c.Label, c.InnerLabel)
		}

		// Opening the card shows why it has no summary, and every message
		// it covers; opening the earlier summary shows it, rendered.
		b.run(chromedp.Click(outer+" > details > summary", chromedp.ByQuery))
		look()
		if !c.Open || !c.InnerShown || c.InnerOpen || !c.FirstShown {
			t.Errorf("after opening the card: %+v", c)
		}
		if got := b.str(fmt.Sprintf(`document.querySelector(%q).textContent`, outer+" > details > p")); !strings.Contains(got, "the provider is down") {
			t.Errorf("the card of messages left out says %q", got)
		}
		if b.str(fmt.Sprintf(`String(document.querySelector(%q).checkVisibility())`, inner+" .fold-summary")) != "false" {
			t.Error("the earlier summary is shown before it is opened")
		}
		b.run(chromedp.Click(inner+" > details > summary", chromedp.ByQuery))
		var sum struct {
			Shown        bool
			Text, Strong string
		}
		b.eval(fmt.Sprintf(`(() => { const s = document.querySelector(%q);
			return {shown: s.checkVisibility(), text: s.textContent, strong: (s.querySelector("strong") || {}).textContent || ""}; })()`,
			inner+" .fold-summary"), &sum)
		if !sum.Shown || sum.Strong != "notes.txt" || !strings.Contains(sum.Text, "<img src=x onerror=") || !strings.Contains(sum.Text, "<script>") {
			t.Errorf("the summary is shown as %+v, want its Markdown rendered and its HTML as text", sum)
		}
		if got := b.str(fmt.Sprintf(`document.querySelector(%q).textContent`, outer+" .fold-list li.msg.tool")); !strings.Contains(got, "buy oat milk") {
			t.Errorf("the folded tool call shows %q", got)
		}
		b.pwnedCheck()

		// The meter, from the conversation's usage.
		var m struct {
			Hidden      bool
			Text, Title string
		}
		b.eval(`({hidden: document.getElementById("meter").hidden, text: document.getElementById("meter-text").textContent, title: document.getElementById("meter").title})`, &m)
		if m.Hidden || m.Text != "3.1k / 8.2k tokens · $0.0123" {
			t.Errorf("meter %+v, want 3.1k / 8.2k tokens · $0.0123", m)
		}
		for _, want := range []string{"3,100 of the model's 8,192 tokens (38%)", "2 requests, 5,100 prompt tokens (1,500 cached), 300 completion tokens, $0.0123"} {
			if !strings.Contains(m.Title, want) {
				t.Errorf("meter title %q lacks %q", m.Title, want)
			}
		}
	})

	t.Run("live compaction", func(t *testing.T) {
		s := contextStack(t, 4096, nil, 0, 0)
		b := signedIn(t, browser, s)
		if b.str(`String(document.getElementById("meter").hidden)`) != "true" {
			t.Error("the meter shows before any request")
		}
		long := strings.Repeat("word ", 300)
		var conv string
		turn := func(n int) {
			t.Helper()
			b.send(fmt.Sprintf("m%d %s", n, long))
			b.lastAssistant(fmt.Sprintf("Noted m%d.", n))
			if conv == "" {
				conv = b.str(`location.hash.replace("#c=", "")`)
			}
			// The meter follows done.usage: the server's figures for the
			// conversation, after every turn.
			_, u := s.messagesAndUsage(t, conv)
			want := "≈" + kTokens(u.ContextTokens) + " / 4.1k tokens"
			b.wait(fmt.Sprintf(`document.getElementById("meter-text").textContent === %q`, want))
			if title := b.str(`document.getElementById("meter").title`); !strings.Contains(title, fmt.Sprintf("This conversation: %d request", u.Requests)) {
				t.Errorf("after turn %d the meter's title is %q, want %d requests", n, title, u.Requests)
			}
		}
		for n := 1; n <= 3; n++ {
			turn(n)
		}
		// The six messages on the page now, marked to tell them from copies.
		b.eval(`[...document.querySelectorAll("#messages > li")].forEach((li, i) => li.__mark = "m" + i), true`, nil)
		if n := b.str(`String(document.querySelectorAll("#messages > li").length)`); n != "6" {
			t.Fatalf("%s messages before the compaction, want 6", n)
		}
		turn(4)
		b.wait(`document.querySelector("#messages > li.msg.summary .fold-summary")`)
		msgs, _ := s.messagesAndUsage(t, conv)
		var first storedMessage
		for _, m := range msgs {
			if m.Role == "summary" {
				first = m
				break
			}
		}
		if first.ID == 0 {
			t.Fatal("no summary was stored")
		}
		var card struct {
			ID, Label, Note string
			Marks           []string
			Open            bool
			Top             int
		}
		b.eval(`(() => { const c = document.querySelector("#messages > li.msg.summary");
			return {id: c.dataset.id, label: c.querySelector(".fold-title").textContent, note: c.querySelector(".fold-note").textContent,
				marks: [...c.querySelector(".fold-list").children].map(li => li.__mark || "new"), open: c.querySelector("details").open,
				top: document.querySelectorAll("#messages > li").length}; })()`, &card)
		if card.ID != fmt.Sprint(first.ID) || card.Open || card.Top != 3 {
			t.Errorf("card %+v: want summary %d, folded, then the fourth turn", card, first.ID)
		}
		if strings.Join(card.Marks, " ") != "m0 m1 m2 m3 m4 m5" {
			t.Errorf("the card holds %v, want the six messages that were on the page, in order", card.Marks)
		}
		if card.Label != "6 earlier messages summarised to fit the model's context window" ||
			card.Note != "6 earlier messages were summarised to fit the model's context window (4096 tokens); they are all kept" {
			t.Errorf("card label %q, notice %q", card.Label, card.Note)
		}
		b.shownOnce(msgs, first.CoversTo)

		// The next compaction covers the first one's range too: its card
		// takes the first card's messages, and the first summary stays
		// among them, after the last message it covers.
		for n := 5; n <= 7; n++ {
			turn(n)
		}
		b.wait(`document.querySelectorAll("li.msg.summary").length === 2 && document.querySelector("#messages > li.msg.summary .fold-note") &&
			document.querySelector("#messages > li.msg.summary .fold-list > li.msg.summary.inline")`)
		msgs, u := s.messagesAndUsage(t, conv)
		var second storedMessage
		for _, m := range msgs {
			if m.Role == "summary" {
				second = m
			}
		}
		var outer []string
		b.eval(`[...document.querySelector("#messages > li.msg.summary .fold-list").children].map(li => li.__mark || li.dataset.id)`, &outer)
		if got, want := strings.Join(outer, " "), fmt.Sprintf("m0 m1 m2 m3 m4 m5 %d", first.ID); !strings.HasPrefix(got, want+" ") {
			t.Errorf("the second card holds %v, want %s first (the first card's messages, then its summary)", got, want)
		}
		if n := b.str(`String(document.querySelectorAll("#messages > li").length)`); n != "3" {
			t.Errorf("%s items after the second compaction, want 3 (the card, then the last turn)", n)
		}
		b.shownOnce(msgs, second.CoversTo)
		b.pwnedCheck()

		// Opened again, the conversation looks the same.
		live := b.str(`document.getElementById("meter-text").textContent`)
		b.run(chromedp.Reload())
		b.wait(`document.body.dataset.ready === "1" && document.querySelectorAll("li.msg.summary").length === 2`)
		b.shownOnce(msgs, math.MaxInt64)
		if n := b.str(`String(document.querySelectorAll("#messages > li").length)`); n != "3" {
			t.Errorf("%s items after a reload, want 3", n)
		}
		if got := b.str(`document.getElementById("meter-text").textContent`); got != live || got != "≈"+kTokens(u.ContextTokens)+" / 4.1k tokens" {
			t.Errorf("the meter says %q after a reload, %q before", got, live)
		}
	})

	t.Run("reported usage", func(t *testing.T) {
		s := contextStack(t, 8192, &agent.Usage{PromptTokens: 1234, CompletionTokens: 56, CachedTokens: 200, Reported: true}, 3, 6)
		b := signedIn(t, browser, s)
		b.send("m1 hello")
		b.lastAssistant("Noted m1.")
		b.wait(`document.getElementById("meter-text").textContent === "1.2k / 8.2k tokens · $0.0040"`)
		if title := b.str(`document.getElementById("meter").title`); !strings.Contains(title, "1 request, 1,234 prompt tokens (200 cached), 56 completion tokens, $0.0040") ||
			strings.Contains(title, "≈") {
			t.Errorf("meter title %q", title)
		}
		b.send("m2 hello")
		b.lastAssistant("Noted m2.")
		b.wait(`document.getElementById("meter-text").textContent === "1.2k / 8.2k tokens · $0.0081"`)
		if title := b.str(`document.getElementById("meter").title`); !strings.Contains(title, "2 requests, 2,468 prompt tokens (400 cached), 112 completion tokens") {
			t.Errorf("meter title %q", title)
		}
		b.run(chromedp.Reload())
		b.wait(`document.body.dataset.ready === "1"`)
		if got := b.str(`document.getElementById("meter-text").textContent`); got != "1.2k / 8.2k tokens · $0.0081" {
			t.Errorf("the meter says %q after a reload", got)
		}
		// A new conversation has no usage yet.
		b.run(chromedp.Click("#new-conv", chromedp.ByID))
		b.wait(`document.getElementById("meter").hidden`)
	})

	t.Run("left out", func(t *testing.T) {
		// A window so small that the tools do not fit: every request
		// leaves some out, and says so.
		s := contextStack(t, 1024, nil, 0, 0)
		b := signedIn(t, browser, s)
		const notice = "To fit the model's context window (1024 tokens), this request leaves out "
		b.send("m1 hello")
		b.lastAssistant("Noted m1.")
		b.wait(fmt.Sprintf(`[...document.querySelectorAll("li.msg.note.notice")].some(n => n.textContent.startsWith(%q))`, notice))
		// The same notice at the next turn moves down to it: one on the
		// page, after the message it applies to.
		b.send("m2 hello")
		b.lastAssistant("Noted m2.")
		b.wait(`(() => { const n = document.querySelector("li.msg.note.notice"); const p = n && n.previousElementSibling;
			return p && p.classList.contains("user") && p.textContent.includes("m2 hello"); })()`)
		if n := b.str(`String(document.querySelectorAll("li.msg.note.notice").length)`); n != "1" {
			t.Errorf("%s left_out notices, want 1", n)
		}
	})
}
