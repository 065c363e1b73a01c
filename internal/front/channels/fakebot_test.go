package channels_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// botToken is the fake Bot API's token (the shape of a real one).
const botToken = "123456789:AAHfakeTOKENfor-buddy_tests-0123456789"

// fakeBot is Telegram's Bot API on loopback, speaking its wire format:
// getUpdates (long polling with offset, timeout and limit; updates below the
// offset are forgotten, as Telegram forgets what a poll acknowledged),
// sendMessage, editMessageText, answerCallbackQuery, sendChatAction. Faults
// are injected per method: an HTTP status with a Bot API error body (409,
// 429 with retry_after, 5xx), a stalled answer, a connection dropped
// mid-response.
type fakeBot struct {
	t   testing.TB
	srv *httptest.Server
	// hold is how long an empty getUpdates waits (real time) at most.
	hold time.Duration

	mu       sync.Mutex
	cond     *sync.Cond
	nextID   int64
	updates  []map[string]any // not yet acknowledged
	offsets  []int64          // every getUpdates offset asked for
	polls    int
	sent     []sentMessage // sendMessage calls, in order
	chats    map[string]map[int64]*sentMessage
	nextMsg  map[string]int64
	edits    int
	answers  []callbackAnswer
	faults   map[string][]fault // a zero fault lets the call through
	calls    map[string]int
	stalled  chan struct{} // closed to release stalled requests
	rejectMD bool          // refuse every HTML message ("can't parse entities")
	down     bool          // every call answers 502 from a proxy (an outage)
	clk      *fakeClock    // when set, downPolls records when each poll hit the outage
	downAt   []time.Time
	maxText  int
	tokenHit []string // any body or path that carried the token besides the path's
}

type sentMessage struct {
	Chat      string
	ID        int64
	Text      string // as shown now
	ParseMode string
	Buttons   [][]map[string]string
	Edits     int
	Texts     []string // every text it showed
}

type callbackAnswer struct{ ID, Text string }

// fault is one injected failure of a method's next call.
type fault struct {
	status     int // HTTP status with a Bot API error body
	retryAfter int
	desc       string
	stall      bool // hold the request until the client gives up or release()
	drop       bool // answer 200, then cut the connection mid-body
}

func newFakeBot(t testing.TB) *fakeBot {
	b := &fakeBot{t: t, hold: 100 * time.Millisecond, nextID: 100, chats: map[string]map[int64]*sentMessage{},
		nextMsg: map[string]int64{}, faults: map[string][]fault{}, calls: map[string]int{}, stalled: make(chan struct{}), maxText: 4096}
	b.cond = sync.NewCond(&b.mu)
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(func() {
		b.release()
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
		b.srv.CloseClientConnections()
		b.srv.Close()
	})
	return b
}

func (b *fakeBot) url() string { return b.srv.URL }

// release lets every stalled request go.
func (b *fakeBot) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.stalled:
	default:
		close(b.stalled)
	}
}

// setDown starts or ends an outage.
func (b *fakeBot) setDown(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}

// downPolls returns when each poll hit the outage (fake time).
func (b *fakeBot) downPolls() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.downAt...)
}

// inject queues faults for a method's next calls.
func (b *fakeBot) inject(method string, f ...fault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults[method] = append(b.faults[method], f...)
}

var methodRE = regexp.MustCompile(`^/bot([^/]+)/([A-Za-z]+)$`)

func (b *fakeBot) serve(w http.ResponseWriter, r *http.Request) {
	m := methodRE.FindStringSubmatch(r.URL.Path)
	if m == nil {
		b.errorBody(w, 404, "Not Found", 0)
		return
	}
	if m[1] != botToken {
		b.errorBody(w, 401, "Unauthorized", 0)
		return
	}
	method := m[2]
	raw, _ := io.ReadAll(r.Body)
	if strings.Contains(string(raw), botToken) || r.URL.RawQuery != "" {
		b.mu.Lock()
		b.tokenHit = append(b.tokenHit, method+": "+string(raw)+"?"+r.URL.RawQuery)
		b.mu.Unlock()
	}
	var in map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &in); err != nil {
			b.errorBody(w, 400, "Bad Request: wrong JSON", 0)
			return
		}
	}
	b.mu.Lock()
	if b.down {
		if method == "getUpdates" && b.clk != nil {
			b.downAt = append(b.downAt, b.clk.Now())
		}
		b.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		return
	}
	b.calls[method]++
	var f *fault
	if q := b.faults[method]; len(q) > 0 {
		f = &q[0]
		b.faults[method] = q[1:]
	}
	stalled := b.stalled
	b.mu.Unlock()
	if f != nil && *f != (fault{}) {
		switch {
		case f.stall:
			select {
			case <-r.Context().Done():
			case <-stalled:
			}
			return
		case f.drop:
			hj, ok := w.(http.Hijacker)
			if !ok {
				panic("no hijacker")
			}
			conn, buf, _ := hj.Hijack()
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"ok\":true,\"result\":[{\"update_id\":")
			buf.Flush()
			conn.Close()
			return
		default:
			b.errorBody(w, f.status, f.desc, f.retryAfter)
			return
		}
	}
	switch method {
	case "getUpdates":
		b.getUpdates(w, r, in)
	case "sendMessage":
		b.sendMessage(w, in)
	case "editMessageText":
		b.editMessage(w, in)
	case "answerCallbackQuery":
		b.mu.Lock()
		b.answers = append(b.answers, callbackAnswer{str(in["callback_query_id"]), str(in["text"])})
		b.mu.Unlock()
		b.ok(w, true)
	case "sendChatAction":
		b.ok(w, true)
	default:
		b.errorBody(w, 404, "Not Found: method not found", 0)
	}
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func (b *fakeBot) ok(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func (b *fakeBot) errorBody(w http.ResponseWriter, status int, desc string, retryAfter int) {
	w.Header().Set("Content-Type", "application/json")
	body := map[string]any{"ok": false, "error_code": status, "description": desc}
	if retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": retryAfter}
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func (b *fakeBot) getUpdates(w http.ResponseWriter, r *http.Request, in map[string]any) {
	offset := int64(0)
	if v, ok := in["offset"].(float64); ok {
		offset = int64(v)
	}
	limit := 100
	if v, ok := in["limit"].(float64); ok && v >= 1 {
		limit = int(v)
	}
	timeout := 0.0
	if v, ok := in["timeout"].(float64); ok {
		timeout = v
	}
	deadline := time.Now().Add(min(time.Duration(timeout*float64(time.Second)), b.hold))
	b.mu.Lock()
	b.polls++
	b.offsets = append(b.offsets, offset)
	// Telegram forgets the updates a poll's offset acknowledges.
	kept := b.updates[:0]
	for _, u := range b.updates {
		if int64(u["update_id"].(int64)) >= offset {
			kept = append(kept, u)
		}
	}
	b.updates = kept
	for len(b.updates) == 0 && time.Now().Before(deadline) && r.Context().Err() == nil {
		t := time.AfterFunc(time.Until(deadline), func() { b.mu.Lock(); b.cond.Broadcast(); b.mu.Unlock() })
		b.cond.Wait()
		t.Stop()
	}
	out := b.updates[:min(limit, len(b.updates))]
	body := encodeUpdates(out)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// encodeUpdates is getUpdates' answer as Telegram writes it: each update's
// update_id first (an adapter reading a response cut at buddy's cap relies
// on it), then its one payload.
func encodeUpdates(us []map[string]any) []byte {
	var b strings.Builder
	b.WriteString(`{"ok":true,"result":[`)
	for i, u := range us {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"update_id":%d`, u["update_id"].(int64))
		keys := make([]string, 0, len(u))
		for k := range u {
			if k != "update_id" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := json.Marshal(u[k])
			fmt.Fprintf(&b, `,%q:%s`, k, v)
		}
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// push adds an update (its update_id assigned) and wakes a waiting poll.
func (b *fakeBot) push(kind string, payload map[string]any) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	b.updates = append(b.updates, map[string]any{"update_id": b.nextID, kind: payload})
	b.cond.Broadcast()
	return b.nextID
}

// pushRaw adds an update given whole (hostile ones).
func (b *fakeBot) pushRaw(u map[string]any) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	u["update_id"] = b.nextID
	b.updates = append(b.updates, u)
	b.cond.Broadcast()
	return b.nextID
}

func user(id int64, name string) map[string]any {
	return map[string]any{"id": id, "is_bot": false, "first_name": name, "username": strings.ToLower(name)}
}

func privateChat(id int64) map[string]any {
	return map[string]any{"id": id, "type": "private", "first_name": "x"}
}

// message is a text message from user in their direct chat.
func (b *fakeBot) message(from int64, text string) int64 {
	return b.push("message", map[string]any{"message_id": b.nextID + 1000, "from": user(from, fmt.Sprintf("U%d", from)),
		"chat": privateChat(from), "date": time.Now().Unix(), "text": text})
}

// groupMessage is a text message from user in a group.
func (b *fakeBot) groupMessage(group, from int64, text string) int64 {
	return b.push("message", map[string]any{"message_id": b.nextID + 1000, "from": user(from, fmt.Sprintf("U%d", from)),
		"chat": map[string]any{"id": group, "type": "supergroup", "title": "Team"}, "date": time.Now().Unix(), "text": text})
}

// press is a callback_query: from pressed a button of message msg in chat.
func (b *fakeBot) press(chat, from, msg int64, data string) int64 {
	return b.push("callback_query", map[string]any{"id": fmt.Sprintf("cb%d", b.nextID+1), "from": user(from, fmt.Sprintf("U%d", from)),
		"message":       map[string]any{"message_id": msg, "chat": privateChat(chat), "date": time.Now().Unix(), "text": "q"},
		"chat_instance": "1", "data": data})
}

func (b *fakeBot) sendMessage(w http.ResponseWriter, in map[string]any) {
	chat := str(in["chat_id"])
	text := str(in["text"])
	mode := str(in["parse_mode"])
	if bad := b.check(text, mode); bad != "" {
		b.errorBody(w, 400, bad, 0)
		return
	}
	b.mu.Lock()
	b.nextMsg[chat]++
	id := b.nextMsg[chat]
	m := &sentMessage{Chat: chat, ID: id, Text: text, ParseMode: mode, Buttons: buttons(in), Texts: []string{text}}
	if b.chats[chat] == nil {
		b.chats[chat] = map[int64]*sentMessage{}
	}
	b.chats[chat][id] = m
	b.sent = append(b.sent, *m)
	b.mu.Unlock()
	b.ok(w, map[string]any{"message_id": id, "chat": map[string]any{"id": in["chat_id"], "type": "private"}, "date": time.Now().Unix(), "text": text})
}

func (b *fakeBot) editMessage(w http.ResponseWriter, in map[string]any) {
	chat := str(in["chat_id"])
	id, _ := strconv.ParseInt(str(in["message_id"]), 10, 64)
	text := str(in["text"])
	mode := str(in["parse_mode"])
	if bad := b.check(text, mode); bad != "" {
		b.errorBody(w, 400, bad, 0)
		return
	}
	b.mu.Lock()
	m := b.chats[chat][id]
	if m == nil {
		b.mu.Unlock()
		b.errorBody(w, 400, "Bad Request: message to edit not found", 0)
		return
	}
	kb := buttons(in)
	if m.Text == text && fmt.Sprint(m.Buttons) == fmt.Sprint(kb) {
		b.mu.Unlock()
		b.errorBody(w, 400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message", 0)
		return
	}
	m.Text, m.ParseMode, m.Buttons = text, mode, kb
	m.Edits++
	m.Texts = append(m.Texts, text)
	b.edits++
	b.mu.Unlock()
	b.ok(w, map[string]any{"message_id": id, "chat": map[string]any{"id": in["chat_id"]}, "text": text})
}

func buttons(in map[string]any) [][]map[string]string {
	rm, _ := in["reply_markup"].(map[string]any)
	kb, _ := rm["inline_keyboard"].([]any)
	var out [][]map[string]string
	for _, row := range kb {
		var r []map[string]string
		for _, bt := range row.([]any) {
			m := bt.(map[string]any)
			r = append(r, map[string]string{"text": str(m["text"]), "callback_data": str(m["callback_data"])})
		}
		out = append(out, r)
	}
	return out
}

var tagRE = regexp.MustCompile(`<(/?)([a-z-]+)(?:\s[^>]*)?>`)

// check refuses what Telegram refuses: a text over its limit (UTF-16
// units, after entities parsing), HTML it cannot parse.
func (b *fakeBot) check(text, mode string) string {
	visible := text
	if mode == "HTML" { // Telegram counts the text after entities parsing
		visible = tagRE.ReplaceAllString(visible, "")
		visible = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&amp;", "&").Replace(visible)
	}
	n := 0
	for _, r := range visible {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	if n > b.maxText {
		return "Bad Request: message is too long"
	}
	if mode != "HTML" {
		return ""
	}
	b.mu.Lock()
	reject := b.rejectMD
	b.mu.Unlock()
	if reject {
		return "Bad Request: can't parse entities: Unsupported start tag \"b\" at byte offset 0"
	}
	var stack []string
	for _, m := range tagRE.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(" b i s u code pre a blockquote ", " "+m[2]+" ") {
			return "Bad Request: can't parse entities: Unsupported start tag \"" + m[2] + "\""
		}
		if m[1] == "" {
			stack = append(stack, m[2])
		} else if len(stack) == 0 || stack[len(stack)-1] != m[2] {
			return "Bad Request: can't parse entities: Can't find end tag corresponding to start tag"
		} else {
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return "Bad Request: can't parse entities: Can't find end of the entity"
	}
	return ""
}

// chat returns a chat's messages in the order sent, as they show now.
func (b *fakeBot) chat(chat int64) []sentMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []sentMessage
	for _, s := range b.sent {
		if s.Chat == strconv.FormatInt(chat, 10) {
			m := *b.chats[s.Chat][s.ID]
			m.Texts = append([]string(nil), m.Texts...)
			out = append(out, m)
		}
	}
	return out
}

func (b *fakeBot) texts(chat int64) []string {
	var out []string
	for _, m := range b.chat(chat) {
		out = append(out, m.Text)
	}
	return out
}

func (b *fakeBot) callbackAnswers() []callbackAnswer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]callbackAnswer(nil), b.answers...)
}

func (b *fakeBot) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.updates)
}

func (b *fakeBot) callCount(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[method]
}

var _ = bufio.NewReader
