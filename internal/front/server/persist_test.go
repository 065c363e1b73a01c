package server_test

import (
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestRestart: a server killed with a question open leaves it pending in
// the database; a new server on the same file, started the way `buddy
// serve` starts (pending approvals expired first), lists the conversations
// with their history and shows the question expired. An answer to it is
// too late.
func TestRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "buddy.db")
	first := newStack(t, stackOpts{dbPath: db})
	c := first.dial(t)
	done, tc := c.invokeNew("read_file", readArgs)
	wantOK(t, expectResult(t, c, tc))
	open, _ := c.invokeNew("write_file", writeArgs)
	id := c.expect("approval_request").str("id")
	if v := first.conversation(t, open); len(v.Approvals) != 1 || v.Approvals[0].Status != "pending" {
		t.Fatalf("before the restart: %+v", v.Approvals)
	}
	// The first server is "killed": never closed, its question never
	// answered. A second one starts on the same database.
	second := newStack(t, stackOpts{dbPath: db})
	var list struct {
		Conversations []struct {
			ID string `json:"id"`
		} `json:"conversations"`
	}
	second.getJSON(t, "/api/conversations", &list)
	var ids []string
	for _, c := range list.Conversations {
		ids = append(ids, c.ID)
	}
	if !slices.Contains(ids, done) || !slices.Contains(ids, open) {
		t.Fatalf("after the restart, listed %v; want %s and %s", ids, done, open)
	}
	v := second.conversation(t, done)
	if len(v.Messages) != 1 || v.Messages[0].CallID != tc.str("call_id") || v.Messages[0].OK == nil || !*v.Messages[0].OK {
		t.Errorf("history after the restart: %+v", v.Messages)
	}
	v = second.conversation(t, open)
	if len(v.Approvals) != 1 || v.Approvals[0].ID != id || v.Approvals[0].Status != "expired" || v.Approvals[0].DecidedBy != "timeout" {
		t.Errorf("approvals after the restart: %+v, want %s expired", v.Approvals, id)
	}
	if status, body := second.approveHTTP(t, open, id, true); status != http.StatusGone {
		t.Errorf("answering a question of the killed server: %d %s, want 410", status, body)
	}
	// The old conversation goes on in the new server.
	c2 := second.dial(t)
	c2.invoke(open, "read_file", readArgs)
	c2.expect("tool_call")
	wantOK(t, c2.expect("tool_result"))
	if fileExists(t, first.outFile()) {
		t.Error("the unanswered write ran")
	}
}

// TestCloseEndsQuestions: closing the server (SIGINT/SIGTERM in buddy serve)
// ends an open question and its call, stores the outcome, and closes the
// connections with 1001.
func TestCloseEndsQuestions(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	conv, tc := c.invokeNew("write_file", writeArgs)
	id := c.expect("approval_request").str("id")
	if err := s.srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := c.expect("approval_resolved")
	if res.str("id") != id || res["approved"] != false {
		t.Errorf("approval_resolved %v", res)
	}
	if k, _ := resultError(t, expectResult(t, c, tc)); k != "canceled" {
		t.Errorf("tool_result kind %q, want canceled", k)
	}
	select {
	case <-c.closed:
	case <-time.After(frameWait):
		t.Fatal("the connection stayed open after Close")
	}
	if !websocket.IsCloseError(c.err, websocket.CloseGoingAway) {
		t.Errorf("closed with %v, want 1001", c.err)
	}
	a, err := s.st.GetApproval(t.Context(), id)
	if err != nil || a.Status == "pending" || a.Conversation != conv {
		t.Errorf("stored approval %+v, %v: want it decided", a, err)
	}
	if fileExists(t, s.outFile()) {
		t.Error("the unanswered write ran")
	}
	// A closed server refuses new connections before the upgrade.
	if st := s.dialStatus(t, "/api/ws", authHeader()); st != http.StatusServiceUnavailable {
		t.Errorf("upgrade after Close: %d, want 503", st)
	}
}
