package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestAPISkills(t *testing.T) {
	s := newStack(t, stackOpts{writeApproval: "once"})
	var body struct {
		Skills []map[string]any `json:"skills"`
	}
	s.getJSON(t, "/api/skills", &body)
	byName := map[string]map[string]any{}
	for _, sk := range body.Skills {
		for _, k := range []string{"name", "description", "permission_level", "approval", "touches", "input_schema"} {
			if _, ok := sk[k]; !ok {
				t.Errorf("skill %v lacks %q", sk["name"], k)
			}
		}
		name, _ := sk["name"].(string)
		byName[name] = sk
	}
	tests := []struct {
		name, level, approval, touches string
		required                       []string
	}{
		{"read_file", "read_only", "trust", s.docs, []string{"path"}},
		{"write_file", "mutating", "once", s.scratch, []string{"path", "content"}},
	}
	for _, tt := range tests {
		sk := byName[tt.name]
		if sk == nil {
			t.Errorf("no %s in %v", tt.name, body.Skills)
			continue
		}
		if sk["permission_level"] != tt.level || sk["approval"] != tt.approval {
			t.Errorf("%s: permission_level %v approval %v, want %s %s", tt.name, sk["permission_level"], sk["approval"], tt.level, tt.approval)
		}
		if d, _ := sk["description"].(string); d == "" {
			t.Errorf("%s: empty description", tt.name)
		}
		touches, _ := json.Marshal(sk["touches"])
		if !strings.Contains(string(touches), tt.touches) {
			t.Errorf("%s: touches %s, want it to name %s", tt.name, touches, tt.touches)
		}
		schema, _ := sk["input_schema"].(map[string]any)
		req, _ := json.Marshal(schema["required"])
		var got []string
		_ = json.Unmarshal(req, &got)
		if schema["type"] != "object" || !slices.Equal(got, tt.required) {
			t.Errorf("%s: input_schema %v, want an object requiring %v", tt.name, schema, tt.required)
		}
	}
	// fetch_url is not granted here: if listed, it says it cannot run.
	if sk := byName["fetch_url"]; sk != nil && sk["status"] == "ready" {
		t.Errorf("fetch_url with no allowed_domains is ready: %v", sk)
	}
}

func TestAPIConversations(t *testing.T) {
	s := newStack(t, stackOpts{writeApproval: "once"})
	c := s.dial(t)
	conv, tc := c.invokeNew("write_file", writeArgs)
	id := c.expect("approval_request").str("id")
	c.send(approveFrame(id, true))
	c.expect("approval_resolved")
	wantOK(t, expectResult(t, c, tc))
	other, otc := c.invokeNew("read_file", readArgs)
	wantOK(t, expectResult(t, c, otc))

	var list struct {
		Conversations []struct {
			ID string `json:"id"`
		} `json:"conversations"`
	}
	listed := func() []string {
		s.getJSON(t, "/api/conversations", &list)
		var ids []string
		for _, c := range list.Conversations {
			ids = append(ids, c.ID)
		}
		return ids
	}
	if ids := listed(); !slices.Contains(ids, conv) || !slices.Contains(ids, other) {
		t.Fatalf("listed %v, want %s and %s", ids, conv, other)
	}

	v := s.conversation(t, conv)
	if v.Conversation.ID != conv || v.Conversation.EndedAt != nil {
		t.Errorf("conversation %+v", v.Conversation)
	}
	if len(v.Messages) != 1 {
		t.Fatalf("messages %+v, want the one tool result", v.Messages)
	}
	m := v.Messages[0]
	if m.Role != "tool" || m.CallID != tc.str("call_id") || m.Skill != "write_file" || m.OK == nil || !*m.OK || !sameJSON(t, m.Arguments, []byte(writeArgs)) {
		t.Errorf("message %+v", m)
	}
	if len(v.Approvals) != 1 {
		t.Fatalf("approvals %+v, want one", v.Approvals)
	}
	a := v.Approvals[0]
	if a.ID != id || a.SkillName != "write_file" || a.PermissionLevel != "mutating" || a.Status != "approved" || a.DecidedBy != "user" || !sameJSON(t, a.Arguments, []byte(writeArgs)) {
		t.Errorf("approval %+v", a)
	}

	t.Run("unknown conversation", func(t *testing.T) {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			status, body := s.request(t, method, "/api/conversations/c_nope", nil, nil)
			if status != http.StatusNotFound {
				t.Errorf("%s: %d %s, want 404", method, status, body)
				continue
			}
			if kind, _ := apiError(t, body); kind != "not_found" {
				t.Errorf("%s: kind %q", method, kind)
			}
		}
		status, body := s.request(t, http.MethodGet, "/api/no/such/route", nil, nil)
		if status != http.StatusNotFound {
			t.Errorf("unknown route: %d", status)
		}
		apiError(t, body)
	})

	t.Run("delete", func(t *testing.T) {
		status, body := s.request(t, http.MethodDelete, "/api/conversations/"+conv, nil, nil)
		if status != http.StatusNoContent || len(body) != 0 {
			t.Fatalf("DELETE: %d %s, want 204 and no body", status, body)
		}
		if ids := listed(); slices.Contains(ids, conv) || !slices.Contains(ids, other) {
			t.Errorf("after DELETE, listed %v: want %s gone and %s kept", ids, conv, other)
		}
		// Invoking in it is refused, and nothing runs.
		c.invoke(conv, "read_file", readArgs)
		if f := c.expect("error"); f.str("kind") != "not_found" || !strings.Contains(f.str("detail"), conv) {
			t.Errorf("invoke in a deleted conversation: %v", f)
		}
		c.send(map[string]any{"type": "subscribe", "conversation_id": conv})
		if f := c.expect("error"); f.str("kind") != "not_found" {
			t.Errorf("subscribe to a deleted conversation: %v", f)
		}
		// Its history stays readable for the audit, marked ended.
		if v := s.conversation(t, conv); v.Conversation.EndedAt == nil || len(v.Approvals) != 1 {
			t.Errorf("deleted conversation: %+v", v)
		}
		// A "once" approval is not carried over: a new conversation asks.
		_, _ = c.invokeNew("write_file", writeArgs)
		if f := c.expect("approval_request"); f.str("skill_name") != "write_file" {
			t.Errorf("after DELETE: %v", f)
		}
	})
}

// TestApprovalBoundToArguments: an answer that names the hash of other
// arguments than those shown is refused, over HTTP and over the WebSocket,
// and leaves the question open; the right hash is accepted.
func TestApprovalBoundToArguments(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	conv, tc := c.invokeNew("write_file", writeArgs)
	req := c.expect("approval_request")
	id, hash := req.str("id"), req.str("arguments_hash")
	if len(hash) != 64 {
		t.Fatalf("arguments_hash %q, want a hex SHA-256", hash)
	}
	wrong := strings.Repeat("0", 64)
	status, body := s.request(t, http.MethodPost, "/api/chat/"+conv+"/approve",
		map[string]any{"approval_id": id, "approved": true, "arguments_hash": wrong}, nil)
	if status != http.StatusBadRequest {
		t.Fatalf("wrong hash over HTTP: %d %s, want 400", status, body)
	}
	c.send(map[string]any{"type": "approve", "approval_id": id, "approved": true, "arguments_hash": wrong})
	if f := c.expect("error"); f.str("kind") != "invalid_input" || !strings.Contains(f.str("detail"), "arguments_hash") {
		t.Errorf("wrong hash over the WebSocket: %v", f)
	}
	if fileExists(t, s.outFile()) {
		t.Fatal("an answer for other arguments ran the call")
	}
	status, body = s.request(t, http.MethodPost, "/api/chat/"+conv+"/approve",
		map[string]any{"approval_id": id, "approved": true, "arguments_hash": hash}, nil)
	if status != http.StatusOK {
		t.Fatalf("right hash: %d %s", status, body)
	}
	c.expect("approval_resolved")
	wantOK(t, expectResult(t, c, tc))
}
