package server_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/store"
)

// TestApprovalRequestTargets: the approval_request frame carries what the
// call would touch, resolved by the host functions' own code.
func TestApprovalRequestTargets(t *testing.T) {
	s := newStack(t, stackOpts{})
	c := s.dial(t)
	c.invokeNew("write_file", writeArgs)
	req := c.expect("approval_request")
	raw, _ := json.Marshal(req["targets"])
	var targets []map[string]any
	if err := json.Unmarshal(raw, &targets); err != nil || len(targets) != 1 {
		t.Fatalf("targets = %s, want one", raw)
	}
	tg := targets[0]
	scratch, _ := filepath.EvalSymlinks(s.scratch)
	if tg["kind"] != "file" || tg["action"] != "create" || !strings.HasPrefix(tg["path"].(string), scratch+string(filepath.Separator)) {
		t.Fatalf("target = %v, want a file to create in %s", tg, scratch)
	}
	if _, ok := req["reason"]; ok {
		t.Errorf("reason %v on a plain request", req["reason"])
	}
}

func TestAPIAudit(t *testing.T) {
	s := newStack(t, stackOpts{})
	for _, e := range []store.AuditEntry{
		{Conversation: "", Skill: "read_file", Outcome: "ok", Paths: []string{"/home/u/a.txt"}, BytesRead: 3},
		{Conversation: "c_1", Skill: "fetch_url", Outcome: "denied", Hosts: []string{"x.example"}, Asked: true},
	} {
		if _, err := s.st.AppendAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	var all struct {
		Audit []map[string]any `json:"audit"`
	}
	s.getJSON(t, "/api/audit", &all)
	if len(all.Audit) != 2 || all.Audit[0]["skill"] != "read_file" || all.Audit[1]["prev_hash"] != all.Audit[0]["hash"] {
		t.Fatalf("GET /api/audit = %v", all.Audit)
	}
	paths, _ := json.Marshal(all.Audit[0]["paths"])
	if string(paths) != `["/home/u/a.txt"]` || all.Audit[0]["kind"] != "invocation" {
		t.Errorf("row 1 = %v", all.Audit[0])
	}
	var one struct {
		Audit []map[string]any `json:"audit"`
	}
	s.getJSON(t, "/api/audit?conversation=c_1", &one)
	hosts, _ := json.Marshal(one.Audit[0]["hosts"])
	if len(one.Audit) != 1 || one.Audit[0]["outcome"] != "denied" || string(hosts) != `["x.example"]` {
		t.Fatalf("GET /api/audit?conversation=c_1 = %v", one.Audit)
	}
	if status, _ := s.request(t, http.MethodGet, "/api/audit?limit=0", nil, authHeader()); status != http.StatusBadRequest {
		t.Errorf("limit=0: status %d, want 400", status)
	}
	resp, err := http.Get(s.url + "/api/audit")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: status %d, want 401", resp.StatusCode)
	}
}
