package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzClientFrame: whatever a client sends, parseFrame returns either a frame
// whose type is known and whose required fields are present, or an error
// whose error frame is valid JSON; it never panics.
func FuzzClientFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"invoke","skill":"read_file","arguments":{"path":"notes.txt"}}`,
		`{"type":"invoke","conversation_id":"c_1","skill":"write_file","arguments":{"path":"a","content":"b"}}`,
		`{"type":"approve","approval_id":"ap_1","approved":true}`,
		`{"type":"approve","approval_id":"ap_1","approved":false,"arguments_hash":"00"}`,
		`{"type":"cancel","conversation_id":"c_1"}`,
		`{"type":"subscribe","conversation_id":"c_1"}`,
		`{"type":"send","text":"hi"}`,
		`{"type":"invoke","skill":"x","arguments":"{}"}`,
		`{"type":"approve","approval_id":"x","approved":1e999}`,
		`{"type":7}`, `{}`, `[]`, `null`, ``, ` `, `{"type":"invoke"`, "{\"type\":\"\xff\"}",
		`{"type":"invoke","skill":"x","arguments":{}} {}`,
		strings.Repeat("[", 10001),
		`{"a":` + strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat("}", 201),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := parseFrame(data)
		if (fr == nil) == (err == nil) {
			t.Fatalf("parseFrame(%q) = %v, %v: want exactly one of a frame and an error", data, fr, err)
		}
		if err != nil {
			if _, ok := err.(*frameError); !ok || err.Error() == "" {
				t.Fatalf("parseFrame(%q): error %T %q, want a *frameError with a detail", data, err, err)
			}
			out := encode(errorFrame{Type: "error", Kind: "invalid_input", Detail: err.Error()})
			var back errorFrame
			if jerr := json.Unmarshal(out, &back); jerr != nil || back.Type != "error" || back.Detail == "" {
				t.Fatalf("error frame %q does not round-trip (%v)", out, jerr)
			}
			return
		}
		switch fr.Type {
		case "invoke":
			if fr.Skill == nil || *fr.Skill == "" || len(fr.Arguments) == 0 || fr.Arguments[0] != '{' || !json.Valid(fr.Arguments) {
				t.Fatalf("invoke accepted without a skill or an object of arguments: %q", data)
			}
			if fr.ConversationID != nil && *fr.ConversationID == "" {
				t.Fatalf("invoke with an empty conversation id kept: %q", data)
			}
		case "approve":
			if fr.ApprovalID == nil || *fr.ApprovalID == "" || fr.Approved == nil {
				t.Fatalf("approve accepted without approval_id or approved: %q", data)
			}
		case "cancel", "subscribe":
			if fr.ConversationID == nil || *fr.ConversationID == "" {
				t.Fatalf("%s accepted without conversation_id: %q", fr.Type, data)
			}
		case "send":
			if fr.Text == nil || *fr.Text == "" {
				t.Fatalf("send accepted without text: %q", data)
			}
		default:
			t.Fatalf("parseFrame accepted type %q: %q", fr.Type, data)
		}
	})
}
