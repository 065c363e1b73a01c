package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The approval flow's cases (read_only runs at once, write_file asks by
// default, trust, once, fetch_url asks, timeout = deny, the approve
// endpoint), through a real WebSocket client against the real
// stack: built-in skills, buddy.toml policies, the approval gate, SQLite.

const (
	readArgs  = `{"path":"notes.txt"}`
	writeArgs = `{"path":"out.txt","content":"hello from the test"}`
)

// sameJSON reports whether two JSON texts are the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

// checkRequest checks an approval_request frame's fields.
func checkRequest(t *testing.T, f frame, conv, skill, args, level string) string {
	t.Helper()
	id := f.str("id")
	if id == "" {
		t.Errorf("approval_request without id: %v", f)
	}
	if f.str("conversation_id") != conv {
		t.Errorf("approval_request conversation_id %q, want %q", f.str("conversation_id"), conv)
	}
	if f.str("skill_name") != skill {
		t.Errorf("approval_request skill_name %q, want %q", f.str("skill_name"), skill)
	}
	if f.str("permission_level") != level {
		t.Errorf("approval_request permission_level %q, want %q", f.str("permission_level"), level)
	}
	obj, ok := f["arguments"].(map[string]any)
	if !ok {
		t.Fatalf("approval_request arguments %T (%v), want a JSON object", f["arguments"], f["arguments"])
	}
	got, _ := json.Marshal(obj)
	if !sameJSON(t, got, []byte(args)) {
		t.Errorf("approval_request arguments %s, want %s", got, args)
	}
	exp, err := time.Parse(time.RFC3339Nano, f.str("expires_at"))
	if err != nil {
		t.Errorf("approval_request expires_at %q: %v", f.str("expires_at"), err)
	} else if !exp.After(time.Now().Add(-time.Second)) {
		t.Errorf("approval_request expires_at %s is in the past", exp)
	}
	return id
}

// expectResult reads the tool_result of a call.
func expectResult(t *testing.T, c *client, tc frame) frame {
	t.Helper()
	r := c.expect("tool_result")
	if r.str("call_id") != tc.str("call_id") || r.str("conversation_id") != tc.str("conversation_id") {
		t.Fatalf("tool_result %v does not answer tool_call %v", r, tc)
	}
	return r
}

func resultError(t *testing.T, r frame) (kind, detail string) {
	t.Helper()
	if ok, _ := r["ok"].(bool); ok {
		t.Fatalf("tool_result ok, want an error: %v", r)
	}
	e, isObj := r["error"].(map[string]any)
	if !isObj {
		t.Fatalf("failed tool_result error %T, want an object: %v", r["error"], r)
	}
	k, _ := e["kind"].(string)
	d, _ := e["detail"].(string)
	return k, d
}

func wantOK(t *testing.T, r frame) {
	t.Helper()
	if ok, _ := r["ok"].(bool); !ok {
		t.Fatalf("tool_result not ok: %v", r)
	}
	if _, has := r["error"]; has {
		t.Fatalf("ok tool_result with an error: %v", r)
	}
}

func (s *stack) outFile() string { return filepath.Join(s.scratch, "out.txt") }

func fileExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

func approveFrame(id string, approved bool) map[string]any {
	return map[string]any{"type": "approve", "approval_id": id, "approved": approved}
}

func TestSeed002ReadOnlyRunsWithoutApproval(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	_, tc := c.invokeNew("read_file", readArgs)
	r := expectResult(t, c, tc) // an approval_request here would fail expect
	wantOK(t, r)
	if out, _ := json.Marshal(r["result"]); !strings.Contains(string(out), "buy oat milk") {
		t.Errorf("read_file result %s, want the file's content", out)
	}
}

func TestSeed002WriteFileDefaultAlways(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)

	t.Run("approve", func(t *testing.T) {
		conv, tc := c.invokeNew("write_file", writeArgs)
		id := checkRequest(t, c.expect("approval_request"), conv, "write_file", writeArgs, "mutating")
		if fileExists(t, s.outFile()) {
			t.Fatal("the file exists before the approval")
		}
		c.send(approveFrame(id, true))
		res := c.expect("approval_resolved")
		if res.str("id") != id || res["approved"] != true || res.str("reason") != "user" {
			t.Errorf("approval_resolved %v, want %s approved by user", res, id)
		}
		wantOK(t, expectResult(t, c, tc))
		data, err := os.ReadFile(s.outFile())
		if err != nil || string(data) != "hello from the test" {
			t.Fatalf("after approval: %q, %v", data, err)
		}
		// Always asks again, in the same conversation.
		c.invoke(conv, "write_file", writeArgs)
		c.expect("tool_call")
		id2 := checkRequest(t, c.expect("approval_request"), conv, "write_file", writeArgs, "mutating")
		if id2 == id {
			t.Errorf("a second request reused the id %s", id)
		}
		c.send(approveFrame(id2, true))
		c.expect("approval_resolved")
		wantOK(t, c.expect("tool_result"))
		os.Remove(s.outFile())
	})

	t.Run("deny", func(t *testing.T) {
		_, tc := c.invokeNew("write_file", writeArgs)
		id := c.expect("approval_request").str("id")
		c.send(approveFrame(id, false))
		res := c.expect("approval_resolved")
		if res.str("id") != id || res["approved"] != false || res.str("reason") != "user" {
			t.Errorf("approval_resolved %v, want %s denied by user", res, id)
		}
		kind, detail := resultError(t, expectResult(t, c, tc))
		if kind != "denied" || detail != "User denied execution of write_file" {
			t.Errorf("denial: kind %q detail %q", kind, detail)
		}
		if fileExists(t, s.outFile()) {
			t.Error("denied, yet the file was written")
		}
	})
}

func TestSeed002Trust(t *testing.T) {
	s := newStack(t, stackOpts{writeApproval: "trust"})
	c := s.dial(t)
	for range 2 {
		_, tc := c.invokeNew("write_file", writeArgs)
		wantOK(t, expectResult(t, c, tc))
		if !fileExists(t, s.outFile()) {
			t.Fatal("trusted write_file wrote nothing")
		}
		os.Remove(s.outFile())
	}
}

func TestSeed002Once(t *testing.T) {
	s := newStack(t, stackOpts{writeApproval: "once"})
	c := s.dial(t)
	conv, tc := c.invokeNew("write_file", writeArgs)
	id := checkRequest(t, c.expect("approval_request"), conv, "write_file", writeArgs, "mutating")
	c.send(approveFrame(id, true))
	c.expect("approval_resolved")
	wantOK(t, expectResult(t, c, tc))

	// Second call, same conversation: not asked.
	os.Remove(s.outFile())
	c.invoke(conv, "write_file", writeArgs)
	tc2 := c.expect("tool_call")
	wantOK(t, expectResult(t, c, tc2))
	if !fileExists(t, s.outFile()) {
		t.Fatal("second call wrote nothing")
	}

	// A new conversation asks again.
	conv2, _ := c.invokeNew("write_file", writeArgs)
	if conv2 == conv {
		t.Fatal("a new conversation reused the id")
	}
	id3 := checkRequest(t, c.expect("approval_request"), conv2, "write_file", writeArgs, "mutating")
	c.send(approveFrame(id3, false))
	c.expect("approval_resolved")
	if k, _ := resultError(t, c.expect("tool_result")); k != "denied" {
		t.Errorf("kind %q, want denied", k)
	}
}

func TestSeed002FetchURLAsks(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "page %s", r.URL.Path)
	}))
	t.Cleanup(web.Close)
	if !strings.HasPrefix(web.URL, "http://127.0.0.1:") {
		t.Fatalf("test web server at %s, want 127.0.0.1", web.URL)
	}
	s := newStack(t, stackOpts{fetchDomains: []string{"127.0.0.1"}})
	c := s.dial(t)
	args := fmt.Sprintf(`{"url":%q}`, web.URL+"/hello")
	conv, tc := c.invokeNew("fetch_url", args)
	id := checkRequest(t, c.expect("approval_request"), conv, "fetch_url", args, "network")
	c.send(approveFrame(id, true))
	c.expect("approval_resolved")
	r := expectResult(t, c, tc)
	wantOK(t, r)
	if out, _ := json.Marshal(r["result"]); !strings.Contains(string(out), "page /hello") {
		t.Errorf("fetch_url result %s, want the page", out)
	}
}

func TestSeed002Timeout(t *testing.T) {
	s := newStack(t, stackOpts{timeout: 200 * time.Millisecond})
	c := s.dial(t)
	conv, tc := c.invokeNew("write_file", writeArgs)
	req := c.expect("approval_request")
	id := req.str("id")
	exp, err := time.Parse(time.RFC3339Nano, req.str("expires_at"))
	if err != nil || time.Until(exp) > time.Second {
		t.Errorf("expires_at %q (%v), want within the 200ms timeout", req.str("expires_at"), err)
	}
	res := c.expect("approval_resolved")
	if res.str("id") != id || res["approved"] != false || res.str("reason") != "timeout" {
		t.Errorf("approval_resolved %v, want %s denied by timeout", res, id)
	}
	kind, detail := resultError(t, expectResult(t, c, tc))
	if kind != "denied" || !strings.HasPrefix(detail, "User denied execution of write_file") {
		t.Errorf("timeout: kind %q detail %q, want a denial", kind, detail)
	}
	if fileExists(t, s.outFile()) {
		t.Error("timed out, yet the file was written")
	}
	// Too late: the answer is refused with 410 and changes nothing.
	if status, body := s.approveHTTP(t, conv, id, true); status != http.StatusGone {
		t.Errorf("late approval: %d %s, want 410", status, body)
	}
	if v := s.conversation(t, conv); len(v.Approvals) != 1 || v.Approvals[0].Status != "expired" || v.Approvals[0].DecidedBy != "timeout" {
		t.Errorf("stored approvals %+v, want one expired by timeout", v.Approvals)
	}
	if fileExists(t, s.outFile()) {
		t.Error("a late approval wrote the file")
	}
}

func TestSeed002ApproveEndpoint(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)

	conv, tc := c.invokeNew("write_file", writeArgs)
	id := c.expect("approval_request").str("id")
	other, otherTC := c.invokeNew("read_file", readArgs)
	wantOK(t, expectResult(t, c, otherTC))

	bad := []struct{ name, body string }{
		{"not JSON", `approve please`},
		{"missing approved", fmt.Sprintf(`{"approval_id":%q}`, id)},
		{"missing approval_id", `{"approved":true}`},
		{"approved not a bool", fmt.Sprintf(`{"approval_id":%q,"approved":"yes"}`, id)},
		{"unknown field", fmt.Sprintf(`{"approval_id":%q,"approved":true,"force":true}`, id)},
		{"trailing data", fmt.Sprintf(`{"approval_id":%q,"approved":true} {}`, id)},
	}
	for _, tt := range bad {
		t.Run("400 "+tt.name, func(t *testing.T) {
			status, body := s.request(t, http.MethodPost, "/api/chat/"+conv+"/approve", tt.body, nil)
			if status != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", status, body)
			}
			if kind, _ := apiError(t, body); kind != "invalid_input" {
				t.Errorf("kind %q, want invalid_input", kind)
			}
		})
	}
	t.Run("404 unknown id", func(t *testing.T) {
		status, body := s.approveHTTP(t, conv, "ap_doesnotexist", true)
		if status != http.StatusNotFound {
			t.Fatalf("%d %s, want 404", status, body)
		}
		if kind, _ := apiError(t, body); kind != "not_found" {
			t.Errorf("kind %q, want not_found", kind)
		}
	})
	t.Run("404 id of another conversation", func(t *testing.T) {
		status, body := s.approveHTTP(t, other, id, true)
		if status != http.StatusNotFound {
			t.Fatalf("%d %s, want 404", status, body)
		}
	})
	// Nothing above answered the question.
	c.quiet(100 * time.Millisecond)
	if fileExists(t, s.outFile()) {
		t.Fatal("the file was written before the approval")
	}
	t.Run("200", func(t *testing.T) {
		status, body := s.approveHTTP(t, conv, id, true)
		if status != http.StatusOK {
			t.Fatalf("%d %s, want 200", status, body)
		}
		// Answered twice at once: the question is still open in memory.
		if status, body := s.approveHTTP(t, conv, id, false); status != http.StatusConflict {
			t.Errorf("second answer: %d %s, want 409", status, body)
		}
		res := c.expect("approval_resolved")
		if res.str("id") != id || res["approved"] != true {
			t.Errorf("approval_resolved %v", res)
		}
		wantOK(t, expectResult(t, c, tc))
		if !fileExists(t, s.outFile()) {
			t.Error("approved over HTTP, yet no file")
		}
	})
	t.Run("409 answered twice", func(t *testing.T) {
		// The question is closed now: the stored decision answers.
		status, body := s.approveHTTP(t, conv, id, true)
		if status != http.StatusConflict {
			t.Fatalf("%d %s, want 409", status, body)
		}
		if kind, _ := apiError(t, body); kind != "invalid_input" {
			t.Errorf("kind %q", kind)
		}
	})
	t.Run("404 closed id of another conversation", func(t *testing.T) {
		if status, body := s.approveHTTP(t, other, id, true); status != http.StatusNotFound {
			t.Fatalf("%d %s, want 404", status, body)
		}
	})
	t.Run("410 expired", func(t *testing.T) {
		s2 := newStack(t, stackOpts{timeout: 100 * time.Millisecond})
		c2 := s2.dial(t)
		conv2, _ := c2.invokeNew("write_file", writeArgs)
		id2 := c2.expect("approval_request").str("id")
		c2.expect("approval_resolved")
		c2.expect("tool_result")
		status, body := s2.approveHTTP(t, conv2, id2, true)
		if status != http.StatusGone {
			t.Fatalf("%d %s, want 410", status, body)
		}
		if kind, _ := apiError(t, body); kind != "timeout" {
			t.Errorf("kind %q, want timeout", kind)
		}
	})
}
