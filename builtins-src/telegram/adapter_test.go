package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func parseJSON(t *testing.T, in map[string]any) parseOut {
	t.Helper()
	b, _ := json.Marshal(in)
	out, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	var p parseOut
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func renderJSON(t *testing.T, in map[string]any) renderOut {
	t.Helper()
	b, _ := json.Marshal(in)
	out, err := Render(b)
	if err != nil {
		t.Fatal(err)
	}
	var r renderOut
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseUpdates(t *testing.T) {
	body := `{"ok":true,"result":[
	 {"update_id":10,"message":{"message_id":5,"from":{"id":42,"is_bot":false,"first_name":"Ada","last_name":"L","username":"ada"},"chat":{"id":42,"type":"private"},"date":1,"text":"hi\u0000 there\r\nok\u001b[31m"}},
	 {"update_id":11,"edited_message":{"message_id":5,"from":{"id":42,"first_name":"Ada"},"chat":{"id":42,"type":"private"},"text":"hi again"}},
	 {"update_id":12,"callback_query":{"id":"cb1","from":{"id":42,"first_name":"Ada"},"message":{"message_id":7,"chat":{"id":42,"type":"private"}},"data":"y|ap_1|abc"}},
	 {"update_id":13,"message":{"message_id":6,"from":{"id":7,"first_name":"G"},"chat":{"id":-100123,"type":"supergroup","title":"Team"},"sticker":{}}},
	 {"update_id":14,"message":{"message_id":8,"from":{"id":9,"is_bot":true,"first_name":"Bot"},"chat":{"id":-100123,"type":"supergroup"},"text":"beep"}},
	 {"update_id":15,"channel_post":{"message_id":1}}
	]}`
	p := parseJSON(t, map[string]any{"action": "poll", "status": 200, "body": body})
	if !p.OK || p.Cursor != "16" || len(p.Events) != 6 {
		t.Fatalf("parse = %+v", p)
	}
	e := p.Events[0]
	if e.Type != "message" || e.Chat != "42" || e.ChatType != "private" || e.Sender != "42" || e.SenderName != "Ada L @ada" ||
		e.Text != "hi there\nok[31m" || e.MessageID != "5" || e.UpdateID != "10" {
		t.Errorf("message = %+v", e)
	}
	if p.Events[1].Type != "edited_message" || p.Events[1].Text != "hi again" {
		t.Errorf("edited = %+v", p.Events[1])
	}
	if c := p.Events[2]; c.Type != "callback" || c.CallbackID != "cb1" || c.Data != "y|ap_1|abc" || c.Chat != "42" || c.MessageID != "7" {
		t.Errorf("callback = %+v", c)
	}
	if g := p.Events[3]; g.Type != "unsupported" || g.ChatType != "group" || g.ChatTitle != "Team" {
		t.Errorf("sticker = %+v", g)
	}
	if p.Events[4].Type != "ignored" || p.Events[5].Type != "ignored" {
		t.Errorf("a bot's message and a channel post: %+v %+v", p.Events[4], p.Events[5])
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		action string
		status int
		body   string
		kind   string
		retry  int
	}{
		{"poll", 409, `{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request"}`, "conflict", 0},
		{"poll", 429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}`, "rate_limited", 7},
		{"poll", 502, `<html>Bad Gateway</html>`, "unavailable", 0},
		{"poll", 401, `{"ok":false,"error_code":401,"description":"Unauthorized"}`, "unauthorized", 0},
		{"message", 400, `{"ok":false,"error_code":400,"description":"Bad Request: message is not modified: specified new message content and reply markup are exactly the same"}`, "not_modified", 0},
		{"message", 400, `{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: Unsupported start tag \"foo\""}`, "bad_markup", 0},
		{"message", 400, `{"ok":false,"error_code":400,"description":"Bad Request: message to edit not found"}`, "gone", 0},
		{"message", 403, `{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}`, "forbidden", 0},
		{"message", 400, `{"ok":false,"error_code":400,"description":"Bad Request: message is too long"}`, "too_long", 0},
		{"message", 0, ``, "unavailable", 0},
	}
	for _, tt := range tests {
		p := parseJSON(t, map[string]any{"action": tt.action, "status": tt.status, "body": tt.body})
		if p.OK || p.Error == nil || p.Error.Kind != tt.kind || p.Error.RetryAfter != tt.retry {
			t.Errorf("%d %s: %+v", tt.status, tt.body, p.Error)
		}
	}
	p := parseJSON(t, map[string]any{"action": "message", "status": 200, "body": `{"ok":true,"result":{"message_id":99,"chat":{"id":1,"type":"private"}}}`})
	if !p.OK || p.MessageID != "99" {
		t.Errorf("sendMessage's answer: %+v", p)
	}
}

func TestParseOversize(t *testing.T) {
	head := `{"ok":true,"result":[{"update_id":777,"message":{"message_id":1,"from":{"id":5},"chat":{"id":5,"type":"private"},"text":"xxxxxxxx`
	p := parseJSON(t, map[string]any{"action": "poll", "status": 200, "body": head, "truncated": true, "limit": 100})
	if p.OK || p.Error.Kind != "too_large" {
		t.Fatalf("many: %+v", p)
	}
	p = parseJSON(t, map[string]any{"action": "poll", "status": 200, "body": head, "truncated": true, "limit": 1})
	if e := p.Events; !p.OK || p.Cursor != "778" || len(e) != 1 || e[0].Type != "oversize" || e[0].Chat != "5" || e[0].Sender != "5" || e[0].ChatType != "private" {
		t.Fatalf("one: %+v", p)
	}
	// In a group; the head cut inside the chat object.
	group := `{"ok":true,"result":[{"update_id":9,"message":{"message_id":1,"from":{"id":7,"first_name":"A"},"chat":{"id":-100,"title":"T","type":"supergroup"},"text":"xx`
	p = parseJSON(t, map[string]any{"action": "poll", "status": 200, "body": group, "truncated": true, "limit": 1})
	if e := p.Events; !p.OK || len(e) != 1 || e[0].Chat != "-100" || e[0].Sender != "7" || e[0].ChatType != "group" {
		t.Fatalf("group: %+v", p)
	}
	cut := `{"ok":true,"result":[{"update_id":9,"message":{"message_id":1,"from":{"id":7},"chat":{"id":-100,"ti`
	p = parseJSON(t, map[string]any{"action": "poll", "status": 200, "body": cut, "truncated": true, "limit": 1})
	if e := p.Events; !p.OK || len(e) != 1 || e[0].Chat != "unknown" || e[0].Sender != "7" {
		t.Fatalf("cut: %+v", p)
	}
}

func TestRender(t *testing.T) {
	r := renderJSON(t, map[string]any{"action": "poll", "cursor": "124", "timeout": 25})
	if r.Request.Path != "/bot{credential}/getUpdates" || !strings.Contains(r.Request.Body, `"offset":124`) || !strings.Contains(r.Request.Body, `"timeout":25`) {
		t.Errorf("poll = %+v", r.Request)
	}
	r = renderJSON(t, map[string]any{"action": "message", "chat": "42", "text": "**hi** <there>"})
	var body map[string]any
	json.Unmarshal([]byte(r.Request.Body), &body)
	if r.Request.Path != "/bot{credential}/sendMessage" || body["text"] != "<b>hi</b> &lt;there&gt;" || body["parse_mode"] != "HTML" || body["chat_id"] != float64(42) {
		t.Errorf("send = %+v", r.Request)
	}
	r = renderJSON(t, map[string]any{"action": "message", "chat": "42", "message_id": "7", "text": "**hi**", "plain": true})
	body = nil
	json.Unmarshal([]byte(r.Request.Body), &body)
	if r.Request.Path != "/bot{credential}/editMessageText" || body["text"] != "**hi**" || body["parse_mode"] != nil || body["message_id"] != float64(7) {
		t.Errorf("edit = %+v", r.Request)
	}
	q := map[string]any{"id": "ap_1", "skill": "write_file", "permission": "mutating", "description": "path: \"<x>\"",
		"expires_at": "12:00:00 UTC", "approve": "y|ap_1|h", "deny": "n|ap_1|h"}
	r = renderJSON(t, map[string]any{"action": "approval", "chat": "42", "approval": q})
	body = nil
	json.Unmarshal([]byte(r.Request.Body), &body)
	text, _ := body["text"].(string)
	if !strings.Contains(text, "<b>write_file</b>") || !strings.Contains(text, "&lt;x&gt;") || !strings.Contains(r.Request.Body, `"callback_data":"y|ap_1|h"`) {
		t.Errorf("approval = %s", r.Request.Body)
	}
	q["outcome"], q["by"] = "expired", ""
	r = renderJSON(t, map[string]any{"action": "approval", "chat": "42", "message_id": "9", "approval": q})
	if !strings.Contains(r.Request.Body, "no answer in time") || strings.Contains(r.Request.Body, "inline_keyboard") {
		t.Errorf("expired approval = %s", r.Request.Body)
	}
	if _, err := Render([]byte(`{"action":"launch"}`)); err == nil {
		t.Error("an unknown action was rendered")
	}
	if r := renderJSON(t, map[string]any{"action": "info"}); r.Info == nil || r.Info.MaxText != 4096 {
		t.Errorf("info = %+v", r.Info)
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"ok":              "ok",
		"a\x00b\x07c":     "abc",
		"a\r\nb\rc":       "a\nb\nc",
		"\xff\xfex":       "\uFFFD\uFFFDx",
		"tab\tnl\n":       "tab\tnl\n",
		"c1\u0085\u009bx": "c1x",
		"é ü 日本":          "é ü 日本",
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("x", maxText+100)
	if got := cut(long, maxText); len(got) > maxText || !strings.HasSuffix(got, "not shown]") {
		t.Errorf("cut: %d bytes, ends %q", len(got), got[len(got)-20:])
	}
}
