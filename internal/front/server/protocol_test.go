package server_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/front/server"
)

// flatKeys fails unless f has exactly the keys want (plus optional ones).
func flatKeys(t *testing.T, f frame, want []string, optional ...string) {
	t.Helper()
	for _, k := range want {
		if _, ok := f[k]; !ok {
			t.Errorf("%s frame lacks top-level %q: %v", f.typ(), k, f)
		}
	}
	for k := range f {
		if !slices.Contains(want, k) && !slices.Contains(optional, k) {
			t.Errorf("%s frame has unexpected key %q: %v", f.typ(), k, f)
		}
	}
}

func TestInvokeCreatesConversation(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	c.invoke("", "read_file", readArgs)
	conv := c.expect("conversation")
	flatKeys(t, conv, []string{"type", "conversation_id"})
	id := conv.str("conversation_id")

	tc := c.expect("tool_call")
	flatKeys(t, tc, []string{"type", "conversation_id", "call_id", "skill", "arguments"})
	if tc.str("conversation_id") != id || tc.str("call_id") == "" || tc.str("skill") != "read_file" {
		t.Errorf("tool_call %v", tc)
	}
	if args, ok := tc["arguments"].(map[string]any); !ok || args["path"] != "notes.txt" {
		t.Errorf("tool_call arguments %T %v, want the object sent", tc["arguments"], tc["arguments"])
	}
	r := c.expect("tool_result")
	flatKeys(t, r, []string{"type", "conversation_id", "call_id", "skill", "ok", "result", "fuel", "duration_ms"})
	if r.str("call_id") != tc.str("call_id") || r.str("conversation_id") != id || r.str("skill") != "read_file" {
		t.Errorf("tool_result %v does not match tool_call %v", r, tc)
	}
	if fuel, _ := r["fuel"].(float64); fuel <= 0 {
		t.Errorf("tool_result fuel %v, want > 0", r["fuel"])
	}
	// Exactly one conversation frame: a call in it sends none.
	c.invoke(id, "read_file", readArgs)
	c.expect("tool_call")
	c.expect("tool_result")
	c.quiet(50 * time.Millisecond)

	// A failed tool_result carries error {kind, detail}, no result.
	c.invoke(id, "read_file", `{"path":"missing.txt"}`)
	c.expect("tool_call")
	r = c.expect("tool_result")
	flatKeys(t, r, []string{"type", "conversation_id", "call_id", "skill", "ok", "error", "fuel", "duration_ms"})
	if k, d := resultError(t, r); k != "not_found" || !strings.Contains(d, "missing.txt") {
		t.Errorf("error kind %q detail %q, want not_found naming the file", k, d)
	}
}

func TestBadFramesKeepConnection(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	tests := []struct {
		name, frame, kind, want string
	}{
		{"bad JSON", `{"type":"invoke",`, "invalid_input", "JSON"},
		{"not an object", `["invoke"]`, "invalid_input", "JSON object"},
		{"trailing data", `{"type":"subscribe","conversation_id":"c"} {}`, "invalid_input", "trailing"},
		{"no type", `{"skill":"read_file"}`, "invalid_input", `"type"`},
		{"unknown type", `{"type":"explode"}`, "invalid_input", `"explode"`},
		{"type not a string", `{"type":7}`, "invalid_input", "type"},
		{"invoke without skill", `{"type":"invoke","arguments":{}}`, "invalid_input", `"skill"`},
		{"invoke without arguments", `{"type":"invoke","skill":"read_file"}`, "invalid_input", `"arguments"`},
		{"arguments as a string", `{"type":"invoke","skill":"read_file","arguments":"{\"path\":\"notes.txt\"}"}`, "invalid_input", "JSON object"},
		{"arguments failing the schema: missing", `{"type":"invoke","skill":"write_file","arguments":{"path":"x"}}`, "invalid_input", "content"},
		{"arguments failing the schema: type", `{"type":"invoke","skill":"read_file","arguments":{"path":5}}`, "invalid_input", "path"},
		{"arguments failing the schema: extra", `{"type":"invoke","skill":"read_file","arguments":{"path":"a","mode":"x"}}`, "invalid_input", "mode"},
		{"unknown skill", `{"type":"invoke","skill":"rm_rf","arguments":{}}`, "not_found", "rm_rf"},
		{"approve without approved", `{"type":"approve","approval_id":"ap_1"}`, "invalid_input", `"approved"`},
		{"approve without id", `{"type":"approve","approved":true}`, "invalid_input", `"approval_id"`},
		{"approve unknown id", `{"type":"approve","approval_id":"ap_nope","approved":true}`, "not_found", "ap_nope"},
		{"subscribe without conversation", `{"type":"subscribe"}`, "invalid_input", `"conversation_id"`},
		{"subscribe unknown conversation", `{"type":"subscribe","conversation_id":"c_nope"}`, "not_found", "c_nope"},
		{"cancel without conversation", `{"type":"cancel"}`, "invalid_input", `"conversation_id"`},
		{"invoke in an unknown conversation", `{"type":"invoke","conversation_id":"c_nope","skill":"read_file","arguments":{"path":"notes.txt"}}`, "not_found", "c_nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.send(tt.frame)
			f := c.expect("error")
			flatKeys(t, f, []string{"type", "kind", "detail"}, "conversation_id")
			if f.str("kind") != tt.kind || !strings.Contains(f.str("detail"), tt.want) {
				t.Errorf("error frame kind %q detail %q, want %s naming %s", f.str("kind"), f.str("detail"), tt.kind, tt.want)
			}
			c.quiet(10 * time.Millisecond) // no conversation was created
		})
	}
	// A binary message is refused too.
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"invoke"}`)); err != nil {
		t.Fatal(err)
	}
	if f := c.expect("error"); f.str("kind") != "invalid_input" {
		t.Errorf("binary frame: %v", f)
	}
	// The connection is still up: a valid invoke works.
	_, tc := c.invokeNew("read_file", readArgs)
	wantOK(t, expectResult(t, c, tc))
}

func TestOversizedFrameCloses1009(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) { o.MaxMessageBytes = 1024 }})
	c := s.dial(t)
	// Just under the cap is fine.
	c.send(fmt.Sprintf(`{"type":"subscribe","conversation_id":%q}`, strings.Repeat("c", 900)))
	c.expect("error")
	c.send(fmt.Sprintf(`{"type":"invoke","skill":"read_file","arguments":{"path":%q}}`, strings.Repeat("a", 2048)))
	select {
	case <-c.closed:
	case <-time.After(frameWait):
		t.Fatal("an oversized frame did not close the connection")
	}
	if !websocket.IsCloseError(c.err, websocket.CloseMessageTooBig) {
		t.Fatalf("closed with %v, want close code 1009", c.err)
	}
	// The server is fine.
	c2 := s.dial(t)
	_, tc := c2.invokeNew("read_file", readArgs)
	wantOK(t, expectResult(t, c2, tc))
}

// malformed returns the i-th malformed frame: random bytes, truncated JSON,
// huge numbers, deep nesting, wrong types. None is a valid frame.
func malformed(r *rand.Rand, i int) []byte {
	valid := `{"type":"invoke","skill":"read_file","arguments":{"path":"notes.txt"}}`
	switch i % 10 {
	case 0: // random bytes
		b := make([]byte, 1+r.IntN(200))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		b[0] = "[x\x00\xff 9"[r.IntN(6)] // never the start of an object
		return b
	case 1: // truncated JSON
		return []byte(valid[:r.IntN(len(valid)-1)])
	case 2: // huge numbers
		return []byte(fmt.Sprintf(`{"type":"approve","approval_id":"ap_1","approved":1e%d}`, 300+r.IntN(100000)))
	case 3:
		return []byte(fmt.Sprintf(`{"type":"invoke","skill":"read_file","arguments":{"path":%d%s}}`, r.Int64(), strings.Repeat("9", r.IntN(400))))
	case 4: // deep nesting, now and then past encoding/json's limit
		d := 1 + r.IntN(100)
		if i%1000 == 4 {
			d = 10_000 + r.IntN(2000)
		}
		return []byte(`{"type":"invoke","skill":"read_file","arguments":{"path":"a","x":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}}`)
	case 5:
		d := 1 + r.IntN(100)
		if i%1000 == 5 {
			d = 10_000 + r.IntN(2000)
		}
		return []byte(strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d))
	case 6: // wrong types
		opts := []string{
			`{"type":["invoke"]}`, `{"type":null}`, `{"type":"invoke","skill":{"a":1},"arguments":{}}`,
			`{"type":"approve","approval_id":1,"approved":true}`, `{"type":"approve","approval_id":"x","approved":"true"}`,
			`{"type":"invoke","skill":"read_file","arguments":[1,2]}`, `{"type":"invoke","skill":"read_file","arguments":true}`,
			`{"type":"subscribe","conversation_id":12}`, `{"type":"cancel","conversation_id":false}`,
			`{"type":"invoke","conversation_id":{},"skill":"read_file","arguments":{"path":"notes.txt"}}`,
		}
		return []byte(opts[r.IntN(len(opts))])
	case 7: // invalid UTF-8 and control characters in strings
		return []byte("{\"type\":\"in\xffvoke\x01\"}")
	case 8: // empty and whitespace
		return []byte(strings.Repeat(" \n\t", r.IntN(5)))
	default: // a valid frame with one byte flipped after the first
		b := []byte(valid)
		j := 1 + r.IntN(len(b)-1)
		b[j] = `"{}[],:\`[r.IntN(8)]
		if json.Valid(b) {
			return []byte(valid[:j])
		}
		return b
	}
}

func TestTenThousandMalformedFrames(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	r := rand.New(rand.NewPCG(9, 2))
	const n = 10_000
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			if err := c.ws.WriteMessage(websocket.TextMessage, malformed(r, i)); err != nil {
				sent <- fmt.Errorf("frame %d: %w", i, err)
				return
			}
		}
		sent <- nil
	}()
	got := 0
	for got < n {
		f := c.next()
		if f.typ() != "error" {
			t.Fatalf("after %d error frames, got %v", got, f)
		}
		if k := f.str("kind"); k != "invalid_input" && k != "not_found" {
			t.Fatalf("error frame kind %q: %v", k, f)
		}
		got++
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	_, tc := c.invokeNew("read_file", readArgs)
	wantOK(t, expectResult(t, c, tc))
}

func TestSubscribersShareFrames(t *testing.T) {
	s := newStack(t, stackOpts{})
	a, b, c := s.dial(t), s.dial(t), s.dial(t)
	conv, tc := a.invokeNew("write_file", writeArgs)
	req := a.expect("approval_request")
	// A new tab subscribes and gets the open question again.
	for _, cl := range []*client{b, c} {
		cl.send(map[string]any{"type": "subscribe", "conversation_id": conv})
		if got := cl.expect("approval_request"); got.str("id") != req.str("id") || got.str("skill_name") != "write_file" {
			t.Fatalf("subscribe re-sent %v, want %v", got, req)
		}
	}
	// Two answers race; exactly one wins and everyone sees it.
	b.send(approveFrame(req.str("id"), true))
	c.send(approveFrame(req.str("id"), false))
	var approved any
	var losing int // error frames for the losing answer
	for i, cl := range []*client{a, b, c} {
		var res frame
		for res == nil {
			switch f := cl.next(); f.typ() {
			case "approval_resolved":
				res = f
			case "error":
				if i == 0 || !strings.Contains(f.str("detail"), "already answered") {
					t.Fatalf("client %d: %v", i, f)
				}
				losing++
			default:
				t.Fatalf("client %d: %v before approval_resolved", i, f)
			}
		}
		if res.str("id") != req.str("id") || res.str("reason") != "user" {
			t.Errorf("client %d: %v", i, res)
		}
		if i == 0 {
			approved = res["approved"]
		} else if res["approved"] != approved {
			t.Errorf("client %d saw approved=%v, client 0 saw %v", i, res["approved"], approved)
		}
	}
	for i, cl := range []*client{a, b, c} {
		r := cl.expect("tool_result")
		if r.str("call_id") != tc.str("call_id") || r["ok"] != approved {
			t.Errorf("client %d: tool_result %v, want ok=%v", i, r, approved)
		}
	}
	if fileExists(t, s.outFile()) != (approved == true) {
		t.Errorf("approved=%v, file exists=%v", approved, !(approved == true))
	}
	// The losing answer got exactly one error frame.
	for _, cl := range []*client{b, c} {
		select {
		case f := <-cl.frames:
			if f.typ() != "error" || !strings.Contains(f.str("detail"), "already answered") {
				t.Errorf("unexpected %v", f)
			}
			losing++
		case <-time.After(100 * time.Millisecond):
		}
	}
	if losing != 1 {
		t.Errorf("%d error frames for the losing answer, want 1", losing)
	}
	// A subscriber sees the next call's frames too.
	a.invoke(conv, "read_file", readArgs)
	for _, cl := range []*client{a, b, c} {
		cl.expect("tool_call")
		wantOK(t, cl.expect("tool_result"))
	}
}

func TestCancelPendingApproval(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	conv, tc := c.invokeNew("write_file", writeArgs)
	id := c.expect("approval_request").str("id")
	c.send(map[string]any{"type": "cancel", "conversation_id": conv})
	res := c.expect("approval_resolved")
	if res.str("id") != id || res["approved"] != false || res.str("reason") != "canceled" {
		t.Errorf("approval_resolved %v, want canceled", res)
	}
	if k, _ := resultError(t, expectResult(t, c, tc)); k != "canceled" {
		t.Errorf("tool_result kind %q, want canceled", k)
	}
	if fileExists(t, s.outFile()) {
		t.Error("canceled, yet the file was written")
	}
	if v := s.conversation(t, conv); len(v.Approvals) != 1 || v.Approvals[0].Status != "canceled" {
		t.Errorf("stored approvals %+v, want one canceled", v.Approvals)
	}
	// An answer to a canceled question is too late.
	if status, _ := s.approveHTTP(t, conv, id, true); status != 410 {
		t.Errorf("answer after cancel: %d, want 410", status)
	}
	// The conversation is still usable.
	c.invoke(conv, "write_file", writeArgs)
	c.expect("tool_call")
	id2 := c.expect("approval_request").str("id")
	c.send(approveFrame(id2, true))
	c.expect("approval_resolved")
	wantOK(t, c.expect("tool_result"))
	if !fileExists(t, s.outFile()) {
		t.Error("no file after the approved call")
	}
}
