// Command telegram is buddy's channel adapter for Telegram's Bot API
// (https://core.telegram.org/bots/api). It is not a tool: buddy serve runs
// it for [channels.telegram], in a fresh sandbox per call, with no host
// function but the log. It never sees the bot's token and cannot open a
// connection: render says what request to make, with {credential} where the
// token goes, and buddy makes it; parse reads what came back.
//
//	render {"action":"poll","cursor":"124","timeout":25}
//	  → {"request":{"method":"POST","path":"/bot{credential}/getUpdates","headers":{…},"body":"{…}"}}
//	parse {"action":"poll","status":200,"body":"{\"ok\":true,\"result\":[…]}"}
//	  → {"ok":true,"events":[{"update_id":"123","type":"message","chat":"42",…}],"cursor":"124"}
//
// The ABI is docs/CHANNELS.md's.
package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

func main() {}

// Bounds of what the adapter passes on.
const (
	// maxText is the most of a message's text passed to buddy (Telegram's
	// own limit is 4096 characters; a fake or a future API may send more).
	maxText = 32 << 10
	// maxName is the most of a sender's name passed on.
	maxName = 128
	// maxData is Telegram's limit on a button's callback data.
	maxData = 64
	// maxDescription is the most of an approval's description shown (the
	// page shows the whole call).
	maxDescription = 3000
)

// info is what the adapter tells buddy of the platform (render "info").
type info struct {
	Name string `json:"name"`
	// MaxText is the longest message text, counted in TextUnit.
	MaxText  int    `json:"max_text"`
	TextUnit string `json:"text_unit"` // "utf16": Telegram counts UTF-16 code units
	// EditIntervalMS is how often a streamed answer may be edited in a
	// direct chat; GroupEditIntervalMS in a group.
	EditIntervalMS      int `json:"edit_interval_ms"`
	GroupEditIntervalMS int `json:"group_edit_interval_ms"`
	// SendsPerSecond is the bot's overall rate.
	SendsPerSecond int `json:"sends_per_second"`
	// MaxButtonData is the longest button data.
	MaxButtonData int `json:"max_button_data"`
}

type button struct {
	Text string `json:"text"`
	Data string `json:"data"`
}

type approvalQ struct {
	ID          string `json:"id"`
	Skill       string `json:"skill"`
	Permission  string `json:"permission"`
	Description string `json:"description"`
	Reason      string `json:"reason"`
	ExpiresAt   string `json:"expires_at"`
	Approve     string `json:"approve"`
	Deny        string `json:"deny"`
	// Outcome is "" while open, else approved | denied | expired | canceled;
	// By is where it was answered: chat | page.
	Outcome string `json:"outcome"`
	By      string `json:"by"`
}

// renderIn is render's input.
type renderIn struct {
	Action     string     `json:"action"`
	Cursor     string     `json:"cursor"`
	Timeout    int        `json:"timeout"`
	Limit      int        `json:"limit"`
	Chat       string     `json:"chat"`
	MessageID  string     `json:"message_id"`
	Text       string     `json:"text"`
	Plain      bool       `json:"plain"`
	Buttons    [][]button `json:"buttons"`
	ReplyTo    string     `json:"reply_to"`
	CallbackID string     `json:"callback_id"`
	Approval   *approvalQ `json:"approval"`
	URL        string     `json:"url"`
	Secret     string     `json:"secret"`
}

// request is an HTTP request for buddy to make against the channel's
// api_base: {credential} in the path (or a header) is where buddy puts the
// token.
type request struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

type renderOut struct {
	Request *request `json:"request,omitempty"`
	Info    *info    `json:"info,omitempty"`
}

// errorOf is a failure of the adapter's own: bad input.
type adapterError string

func (e adapterError) Error() string { return "invalid_input: " + string(e) }

// Render turns what buddy wants done into a Bot API request.
func Render(input []byte) ([]byte, error) {
	var in renderIn
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, adapterError("render input: " + err.Error())
	}
	var out renderOut
	switch in.Action {
	case "info":
		out.Info = &info{Name: "telegram", MaxText: 4096, TextUnit: "utf16", EditIntervalMS: 1000,
			GroupEditIntervalMS: 3000, SendsPerSecond: 25, MaxButtonData: maxData}
	case "poll":
		body := map[string]any{"timeout": clamp(in.Timeout, 0, 50), "limit": clamp(in.Limit, 1, 100),
			"allowed_updates": []string{"message", "edited_message", "callback_query"}}
		if in.Cursor != "" {
			n, err := strconv.ParseInt(in.Cursor, 10, 64)
			if err != nil {
				return nil, adapterError("cursor " + strconv.Quote(in.Cursor) + " is not an update id")
			}
			body["offset"] = n
		}
		out.Request = post("getUpdates", body)
	case "message":
		if in.Chat == "" {
			return nil, adapterError("message: no chat")
		}
		text, mode := in.Text, "HTML"
		if in.Plain {
			mode = ""
		} else {
			text = ToHTML(in.Text)
		}
		if strings.TrimSpace(text) == "" {
			text, mode = "…", ""
		}
		out.Request = messageRequest(in, text, mode, in.Buttons)
	case "approval":
		if in.Chat == "" || in.Approval == nil {
			return nil, adapterError("approval: no chat or no approval")
		}
		var buttons [][]button
		if in.Approval.Outcome == "" {
			buttons = [][]button{{{Text: "✅ Approve", Data: in.Approval.Approve}, {Text: "❌ Deny", Data: in.Approval.Deny}}}
		}
		out.Request = messageRequest(in, approvalHTML(in.Approval), "HTML", buttons)
	case "answer_callback":
		if in.CallbackID == "" {
			return nil, adapterError("answer_callback: no callback_id")
		}
		body := map[string]any{"callback_query_id": in.CallbackID}
		if in.Text != "" {
			body["text"] = cut(in.Text, 190)
		}
		out.Request = post("answerCallbackQuery", body)
	case "typing":
		out.Request = post("sendChatAction", map[string]any{"chat_id": chatID(in.Chat), "action": "typing"})
	case "set_webhook":
		body := map[string]any{"url": in.URL, "allowed_updates": []string{"message", "edited_message", "callback_query"}}
		if in.Secret != "" {
			body["secret_token"] = in.Secret
		}
		out.Request = post("setWebhook", body)
	case "delete_webhook":
		out.Request = post("deleteWebhook", map[string]any{})
	default:
		return nil, adapterError("unknown action " + strconv.Quote(in.Action))
	}
	return json.Marshal(out)
}

func clamp(n, lo, hi int) int {
	return max(lo, min(n, hi))
}

// post is a JSON POST to a Bot API method.
func post(method string, body map[string]any) *request {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the text is HTML: sent as it is, not as \u003c
	_ = enc.Encode(body)
	return &request{Method: "POST", Path: "/bot{credential}/" + method,
		Headers: map[string]string{"Content-Type": "application/json"}, Body: strings.TrimSuffix(b.String(), "\n")}
}

// chatID is a chat id as the Bot API takes it: an integer, or a string
// (@channelname).
func chatID(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	return s
}

// messageRequest sends a new message, or edits in.MessageID.
func messageRequest(in renderIn, text, mode string, buttons [][]button) *request {
	body := map[string]any{"chat_id": chatID(in.Chat), "text": text,
		"link_preview_options": map[string]bool{"is_disabled": true}}
	if mode != "" {
		body["parse_mode"] = mode
	}
	if len(buttons) > 0 {
		rows := make([][]map[string]string, 0, len(buttons))
		for _, r := range buttons {
			row := make([]map[string]string, 0, len(r))
			for _, b := range r {
				row = append(row, map[string]string{"text": cut(b.Text, 64), "callback_data": cut(b.Data, maxData)})
			}
			rows = append(rows, row)
		}
		body["reply_markup"] = map[string]any{"inline_keyboard": rows}
	}
	if in.MessageID != "" {
		body["message_id"] = chatID(in.MessageID)
		return post("editMessageText", body)
	}
	if in.ReplyTo != "" {
		body["reply_parameters"] = map[string]any{"message_id": chatID(in.ReplyTo), "allow_sending_without_reply": true}
	}
	return post("sendMessage", body)
}

// approvalHTML is the question (or, answered, its outcome) in Telegram's
// HTML: every text from the call escaped, the arguments in a <pre> block.
func approvalHTML(a *approvalQ) string {
	var b strings.Builder
	b.WriteString("🔐 <b>")
	b.WriteString(escape(a.Skill))
	b.WriteString("</b> asks for approval")
	if a.Permission != "" {
		b.WriteString(" (" + escape(a.Permission) + ")")
	}
	b.WriteString("\n")
	if a.Reason != "" {
		b.WriteString("<i>" + escape(cut(a.Reason, 500)) + "</i>\n")
	}
	if d := strings.TrimSpace(a.Description); d != "" {
		b.WriteString("<pre>")
		b.WriteString(escape(cutUTF16(d, maxDescription)))
		b.WriteString("</pre>\n")
	}
	switch a.Outcome {
	case "":
		if a.ExpiresAt != "" {
			b.WriteString("No answer by " + escape(a.ExpiresAt) + " is a refusal.")
		}
	case "approved":
		b.WriteString("✅ <b>Approved</b>" + where(a.By))
	case "denied":
		b.WriteString("❌ <b>Denied</b>" + where(a.By))
	case "expired":
		b.WriteString("⌛ <b>Denied</b>: no answer in time")
	default:
		b.WriteString("✖ <b>Canceled</b>: the call no longer waits for an answer")
	}
	return b.String()
}

func where(by string) string {
	switch by {
	case "chat":
		return " in the chat"
	case "page":
		return " in buddy's page"
	}
	return ""
}

// parseIn is parse's input: the response to a request render made (its
// action), or a webhook delivery.
type parseIn struct {
	Action    string            `json:"action"`
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Truncated bool              `json:"truncated"`
	Limit     int               `json:"limit"`
}

// event is one update, as buddy stores and handles it.
type event struct {
	UpdateID   string `json:"update_id"`
	Type       string `json:"type"` // message | edited_message | callback | unsupported | oversize | ignored
	Chat       string `json:"chat,omitempty"`
	ChatType   string `json:"chat_type,omitempty"` // private | group
	ChatTitle  string `json:"chat_title,omitempty"`
	Sender     string `json:"sender,omitempty"`
	SenderName string `json:"sender_name,omitempty"`
	MessageID  string `json:"message_id,omitempty"`
	Text       string `json:"text,omitempty"`
	CallbackID string `json:"callback_id,omitempty"`
	Data       string `json:"data,omitempty"`
	Date       int64  `json:"date,omitempty"`
}

type failure struct {
	Kind       string `json:"kind"`
	Detail     string `json:"detail"`
	RetryAfter int    `json:"retry_after,omitempty"`
}

type parseOut struct {
	OK        bool     `json:"ok"`
	Events    []event  `json:"events,omitempty"`
	Cursor    string   `json:"cursor,omitempty"`
	MessageID string   `json:"message_id,omitempty"`
	Error     *failure `json:"error,omitempty"`
}

// The Bot API's envelope and the parts of an update buddy reads.
type envelope struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

type tgUser struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

type tgChat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title"`
	Username  string `json:"username"`
	FirstName string `json:"first_name"`
}

type tgMessage struct {
	MessageID int64   `json:"message_id"`
	From      *tgUser `json:"from"`
	Chat      *tgChat `json:"chat"`
	Date      int64   `json:"date"`
	Text      *string `json:"text"`
	Caption   *string `json:"caption"`
}

type tgCallback struct {
	ID      string     `json:"id"`
	From    *tgUser    `json:"from"`
	Message *tgMessage `json:"message"`
	Data    *string    `json:"data"`
}

type tgUpdate struct {
	UpdateID      int64       `json:"update_id"`
	Message       *tgMessage  `json:"message"`
	EditedMessage *tgMessage  `json:"edited_message"`
	CallbackQuery *tgCallback `json:"callback_query"`
}

// Parse reads a Bot API response (or a webhook delivery).
func Parse(input []byte) ([]byte, error) {
	var in parseIn
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, adapterError("parse input: " + err.Error())
	}
	out := parseResponse(in)
	return json.Marshal(out)
}

func parseResponse(in parseIn) parseOut {
	if in.Action == "webhook" {
		var u tgUpdate
		if err := json.Unmarshal([]byte(in.Body), &u); err != nil || u.UpdateID == 0 {
			return fail("invalid", "the webhook's body is not a Telegram update", 0)
		}
		return parseOut{OK: true, Events: []event{eventOf(u)}}
	}
	if in.Truncated {
		if in.Action != "poll" {
			return fail("unavailable", "the response was over buddy's cap", 0)
		}
		return oversize(in)
	}
	var env envelope
	if err := json.Unmarshal([]byte(in.Body), &env); err != nil {
		if in.Status == 429 {
			return fail("rate_limited", "HTTP 429", retryAfterHeader(in.Headers))
		}
		if in.Status >= 500 || in.Status == 0 {
			return fail("unavailable", "HTTP "+strconv.Itoa(in.Status)+" without a Bot API answer", 0)
		}
		if in.Status == 401 || in.Status == 404 {
			return fail("unauthorized", "HTTP "+strconv.Itoa(in.Status)+": the bot's token was refused", 0)
		}
		return fail("unavailable", "HTTP "+strconv.Itoa(in.Status)+": the answer is not Bot API JSON", 0)
	}
	if !env.OK {
		return classify(in, env)
	}
	switch in.Action {
	case "poll":
		var updates []tgUpdate
		if err := json.Unmarshal(env.Result, &updates); err != nil {
			return fail("unavailable", "getUpdates answered something else than a list of updates", 0)
		}
		out := parseOut{OK: true}
		var last int64
		for _, u := range updates {
			out.Events = append(out.Events, eventOf(u))
			if u.UpdateID > last {
				last = u.UpdateID
			}
		}
		if last > 0 {
			out.Cursor = strconv.FormatInt(last+1, 10)
		}
		return out
	case "message", "approval":
		var m tgMessage
		if err := json.Unmarshal(env.Result, &m); err == nil && m.MessageID != 0 {
			return parseOut{OK: true, MessageID: strconv.FormatInt(m.MessageID, 10)}
		}
		// editMessageText of an inline message answers true.
		return parseOut{OK: true}
	}
	return parseOut{OK: true}
}

// classify turns a Bot API error into the kinds buddy acts on.
func classify(in parseIn, env envelope) parseOut {
	code := env.ErrorCode
	if code == 0 {
		code = in.Status
	}
	desc := cut(clean(env.Description), 300)
	low := strings.ToLower(desc)
	retry := 0
	if env.Parameters != nil {
		retry = env.Parameters.RetryAfter
	}
	if retry == 0 {
		retry = retryAfterHeader(in.Headers)
	}
	switch {
	case code == 429:
		return fail("rate_limited", desc, max(retry, 1))
	case code == 409:
		return fail("conflict", desc, 0)
	case code == 401 || code == 404 && in.Action == "poll":
		return fail("unauthorized", desc, 0)
	case code >= 500:
		return fail("unavailable", desc, retry)
	case strings.Contains(low, "message is not modified"):
		return fail("not_modified", desc, 0)
	case strings.Contains(low, "can't parse entities") || strings.Contains(low, "unsupported start tag") || strings.Contains(low, "can't find end"):
		return fail("bad_markup", desc, 0)
	case strings.Contains(low, "message to edit not found") || strings.Contains(low, "message can't be edited") ||
		strings.Contains(low, "query is too old") || strings.Contains(low, "query id is invalid"):
		return fail("gone", desc, 0)
	case strings.Contains(low, "message is too long"):
		return fail("too_long", desc, 0)
	case code == 403 || strings.Contains(low, "chat not found") || strings.Contains(low, "bot was kicked"):
		return fail("forbidden", desc, 0)
	}
	return fail("invalid", desc, 0)
}

func fail(kind, detail string, retry int) parseOut {
	return parseOut{Error: &failure{Kind: kind, Detail: detail, RetryAfter: retry}}
}

func retryAfterHeader(h map[string]string) int {
	for k, v := range h {
		if strings.EqualFold(k, "Retry-After") {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
				return min(n, 3600)
			}
		}
	}
	return 0
}

// eventOf turns an update into buddy's event.
func eventOf(u tgUpdate) event {
	e := event{UpdateID: strconv.FormatInt(u.UpdateID, 10), Type: "ignored"}
	m := u.Message
	if m == nil && u.EditedMessage != nil {
		m, e.Type = u.EditedMessage, "edited_message"
	} else if m != nil {
		e.Type = "message"
	}
	switch {
	case m != nil:
		if m.Chat == nil {
			e.Type = "ignored"
			return e
		}
		chatOf(&e, m.Chat)
		senderOf(&e, m.From)
		e.MessageID = strconv.FormatInt(m.MessageID, 10)
		e.Date = m.Date
		switch {
		case m.Text != nil:
			e.Text = cut(clean(*m.Text), maxText)
		case m.Caption != nil:
			e.Text = cut(clean(*m.Caption), maxText)
		default:
			e.Type = "unsupported" // a sticker, a photo without caption, a voice message…
		}
		if m.From != nil && m.From.IsBot {
			e.Type = "ignored"
		}
	case u.CallbackQuery != nil:
		c := u.CallbackQuery
		e.Type = "callback"
		e.CallbackID = cut(clean(c.ID), 128)
		senderOf(&e, c.From)
		if c.Message != nil {
			if c.Message.Chat != nil {
				chatOf(&e, c.Message.Chat)
			}
			e.MessageID = strconv.FormatInt(c.Message.MessageID, 10)
		}
		if c.Data != nil {
			e.Data = cut(clean(*c.Data), maxData+1) // one byte over: buddy refuses what is longer
		}
		if e.Chat == "" && e.Sender != "" {
			e.Chat = e.Sender // a button of an inline message: answered as from its presser's chat
		}
	}
	return e
}

func chatOf(e *event, c *tgChat) {
	e.Chat = strconv.FormatInt(c.ID, 10)
	switch c.Type {
	case "private":
		e.ChatType = "private"
	default:
		e.ChatType = "group" // group, supergroup, channel
		e.ChatTitle = cut(clean(c.Title), maxName)
	}
}

func senderOf(e *event, u *tgUser) {
	if u == nil {
		return
	}
	e.Sender = strconv.FormatInt(u.ID, 10)
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if u.Username != "" {
		if name != "" {
			name += " "
		}
		name += "@" + u.Username
	}
	e.SenderName = cut(clean(name), maxName)
}

// oversize: a response over buddy's cap, of which only the head came. With
// more than one update asked for, buddy is told to ask for one; with one,
// that update is passed on as "oversize", so that it is acknowledged (and
// its sender told) rather than asked for forever.
func oversize(in parseIn) parseOut {
	if in.Limit != 1 {
		return fail("too_large", "the updates are over buddy's cap: ask for one at a time", 0)
	}
	id, ok := "", false
	if i := strings.Index(in.Body, `"update_id"`); i >= 0 {
		id, ok = intAfter(in.Body, i+len(`"update_id"`))
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || n <= 0 {
		return fail("unavailable", "an update over buddy's cap, without a readable update_id", 0)
	}
	// Telegram writes a message's from and chat before its text: read the
	// sender, the chat and its type from the head, so that buddy can tell
	// an allowed sender why nothing came of it.
	e := event{UpdateID: id, Type: "oversize", Chat: "unknown"}
	if obj, ok := objectAfter(in.Body, `"chat"`); ok {
		if c, ok := fieldInt(obj, `"id"`); ok {
			e.Chat = c
		}
		e.ChatType = "group"
		if strings.Contains(obj, `"type":"private"`) {
			e.ChatType = "private"
		}
	}
	if obj, ok := objectAfter(in.Body, `"from"`); ok {
		if u, ok := fieldInt(obj, `"id"`); ok {
			e.Sender = u
		}
	}
	return parseOut{OK: true, Events: []event{e}, Cursor: strconv.FormatInt(n+1, 10)}
}

// objectAfter is the flat JSON object after the first key (its text up to
// the first "}": chat and from hold no nested object), if the head holds it
// whole.
func objectAfter(s, key string) (string, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return "", false
	}
	rest := s[i+len(key):]
	j := strings.IndexByte(rest, '}')
	if j < 0 || j > 1024 || !strings.HasPrefix(strings.TrimLeft(rest, " \t\r\n:"), "{") {
		return "", false
	}
	return rest[:j], true
}

// fieldInt reads the integer of a key of a flat object.
func fieldInt(obj, key string) (string, bool) {
	k := strings.Index(obj, key)
	if k < 0 {
		return "", false
	}
	return intAfter(obj, k+len(key))
}

// intAfter reads the JSON integer after a key (its colon and spaces).
func intAfter(s string, from int) (string, bool) {
	j := from
	for j < len(s) && strings.IndexByte(" \t\r\n:", s[j]) >= 0 {
		j++
	}
	start := j
	if j < len(s) && s[j] == '-' {
		j++
	}
	digits := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == digits || j-digits > 19 {
		return "", false
	}
	return s[start:j], true
}

// badRune reports what clean drops: control characters but \n and \t
// (C0, DEL, C1).
func badRune(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f
}

// clean drops what no chat text needs: control characters but \n and \t,
// and turns \r\n and \r into \n and bytes that are not UTF-8 into U+FFFD.
func clean(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, badRune) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteRune('\uFFFD')
		case r == '\r':
			if len(s) == 1 || s[1] != '\n' {
				b.WriteByte('\n')
			}
		case badRune(r):
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// cut caps s at n bytes (at a character boundary), saying how much was left
// out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	k := n
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	if n < 64 {
		return s[:k]
	}
	note := "… [" + strconv.Itoa(len(s)-k) + " more bytes not shown]"
	k = max(0, n-len(note))
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + note
}

// cutUTF16 caps s at n UTF-16 code units (Telegram's count).
func cutUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		u := 1
		if r >= 0x10000 {
			u = 2
		}
		if units+u > n-1 {
			return s[:i] + "…"
		}
		units += u
	}
	return s
}

// escape is Telegram's HTML escaping: &, < and >, and " in attributes.
func escape(s string) string {
	if !strings.ContainsAny(s, `&<>"`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
