package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// t0 is a fixed instant for the tests' timestamps, with nanoseconds so that a
// truncation would show.
var t0 = time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func mustCreate(t *testing.T, s *Store, c Conversation) {
	t.Helper()
	if err := s.CreateConversation(t.Context(), c); err != nil {
		t.Fatalf("CreateConversation(%q): %v", c.ID, err)
	}
}

func TestConversationRoundTrip(t *testing.T) {
	s := openTest(t, Options{})
	s.now = func() time.Time { return at(100).Local() }
	ctx := t.Context()

	full := Conversation{ID: "c-full", Title: "héllo ✓", CreatedAt: at(1), UpdatedAt: at(2), EndedAt: at(3)}
	mustCreate(t, s, full)
	mustCreate(t, s, Conversation{ID: "c-now"})

	got, err := s.GetConversation(ctx, "c-full")
	if err != nil || !reflect.DeepEqual(got, full) {
		t.Errorf("GetConversation = %+v, %v; want %+v", got, err, full)
	}
	if !got.Ended() {
		t.Error("Ended() = false for a conversation with EndedAt")
	}
	got, err = s.GetConversation(ctx, "c-now")
	want := Conversation{ID: "c-now", CreatedAt: at(100), UpdatedAt: at(100)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("zero times: GetConversation = %+v, %v; want %+v", got, err, want)
	}
	if got.CreatedAt.Location() != time.UTC || got.Ended() {
		t.Errorf("CreatedAt in %v, Ended %v; want UTC, false", got.CreatedAt.Location(), got.Ended())
	}

	long := strings.Repeat("é", MaxTitleBytes) // 2 bytes each
	mustCreate(t, s, Conversation{ID: "c-long", Title: long})
	got, _ = s.GetConversation(ctx, "c-long")
	if len(got.Title) > MaxTitleBytes || !utf8.ValidString(got.Title) || !strings.HasSuffix(got.Title, "…") {
		t.Errorf("long title kept as %d bytes (valid UTF-8 %v)", len(got.Title), utf8.ValidString(got.Title))
	}

	err = s.CreateConversation(ctx, Conversation{ID: "c-full", Title: "other"})
	if !errors.Is(err, errs.ErrInvalidInput) || !errors.Is(err, ErrExists) {
		t.Errorf("duplicate ID: %v (kind %s), want invalid_input wrapping ErrExists", err, errs.KindOf(err))
	}
	if got, _ := s.GetConversation(ctx, "c-full"); got.Title != full.Title {
		t.Errorf("the duplicate overwrote the title: %q", got.Title)
	}

	if _, err := s.GetConversation(ctx, "nope"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("GetConversation(unknown) = %v, want not_found", err)
	}
	for _, id := range []string{"", strings.Repeat("x", MaxConversationIDBytes+1), "bad\xff"} {
		if err := s.CreateConversation(ctx, Conversation{ID: id}); !errors.Is(err, errs.ErrInvalidInput) {
			t.Errorf("CreateConversation(%.20q) = %v, want invalid_input", id, err)
		}
	}
}

func TestListAndEndConversations(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	for i, id := range []string{"a", "b", "c", "d"} {
		mustCreate(t, s, Conversation{ID: id, CreatedAt: at(i)})
	}
	ids := func(includeEnded bool) string {
		t.Helper()
		cs, err := s.ListConversations(ctx, includeEnded)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return strings.Join(out, " ")
	}
	if got := ids(true); got != "d c b a" {
		t.Errorf("newest first: %q, want %q", got, "d c b a")
	}
	// Activity moves a conversation to the top: a message, an approval, an
	// audit row.
	if _, err := s.AppendMessage(ctx, Message{Conversation: "a", Role: RoleUser, Text: "hi", CreatedAt: at(10)}); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertApproval(ctx, Approval{ID: "ap", Conversation: "b", Skill: "write_file", RequestedAt: at(11)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendAudit(ctx, AuditEntry{Conversation: "c", Skill: "echo", Outcome: "ok", Time: at(12)}); err != nil {
		t.Fatal(err)
	}
	if got := ids(true); got != "c b a d" {
		t.Errorf("after activity: %q, want %q", got, "c b a d")
	}
	// An older event never moves UpdatedAt back.
	if _, err := s.AppendMessage(ctx, Message{Conversation: "c", Role: RoleUser, CreatedAt: at(5)}); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.GetConversation(ctx, "c"); !c.UpdatedAt.Equal(at(12)) {
		t.Errorf("UpdatedAt = %v after an older message, want %v", c.UpdatedAt, at(12))
	}

	if err := s.EndConversation(ctx, "b", at(20)); err != nil {
		t.Fatal(err)
	}
	if err := s.EndConversation(ctx, "b", at(30)); err != nil {
		t.Errorf("ending twice: %v, want nil", err)
	}
	c, err := s.GetConversation(ctx, "b")
	if err != nil || !c.EndedAt.Equal(at(20)) || !c.UpdatedAt.Equal(at(11)) {
		t.Errorf("ended conversation = %+v, %v; want EndedAt %v (the first end), UpdatedAt unchanged", c, err, at(20))
	}
	if got := ids(false); got != "c a d" {
		t.Errorf("open conversations: %q, want %q", got, "c a d")
	}
	if got := ids(true); got != "c b a d" {
		t.Errorf("all conversations: %q, want %q", got, "c b a d")
	}
	if err := s.EndConversation(ctx, "nope", time.Time{}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("EndConversation(unknown) = %v, want not_found", err)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	mustCreate(t, s, Conversation{ID: "c", CreatedAt: at(0)})
	mustCreate(t, s, Conversation{ID: "other", CreatedAt: at(0)})

	msgs := []Message{
		{Role: RoleUser, Text: "write hello to notes.txt", CreatedAt: at(1)},
		{Role: RoleAssistant, Text: "", ToolCalls: json.RawMessage(`[{"id":"call-1","name":"write_file","arguments":{"path":"notes.txt"}}]`), CreatedAt: at(2)},
		{Role: RoleTool, CallID: "call-1", Skill: "write_file", Arguments: json.RawMessage(`{"path":"notes.txt","content":"hello"}`),
			OK: true, Result: json.RawMessage(`{"bytes":5}`), Fuel: math.MaxUint64, DurationUS: 1234, CreatedAt: at(3)},
		{Role: RoleTool, CallID: "call-2", Skill: "echo", Arguments: json.RawMessage(`{}`), OK: true, ResultText: "plain text, not JSON", Fuel: 7, CreatedAt: at(4)},
		{Role: RoleTool, CallID: "call-3", Skill: "write_file", Arguments: json.RawMessage(`{"path":"x"}`),
			ErrorKind: "denied", ErrorDetail: "User denied execution of write_file", CreatedAt: at(5)},
		{Role: RoleAssistant, Text: "done ✓ \x00 with a NUL", CreatedAt: at(6)},
	}
	var prev int64
	for i := range msgs {
		msgs[i].Conversation = "c"
		id, err := s.AppendMessage(ctx, msgs[i])
		if err != nil {
			t.Fatalf("AppendMessage %d: %v", i, err)
		}
		if id <= prev {
			t.Errorf("message %d: ID %d not above %d", i, id, prev)
		}
		msgs[i].ID, prev = id, id
		// Interleave another conversation's messages.
		if _, err := s.AppendMessage(ctx, Message{Conversation: "other", Role: RoleUser, Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Messages(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Errorf("Messages:\n got %+v\nwant %+v", got, msgs)
	}
	if c, _ := s.GetConversation(ctx, "c"); !c.UpdatedAt.Equal(at(6)) {
		t.Errorf("UpdatedAt = %v, want the last message's %v", c.UpdatedAt, at(6))
	}
	if got, err := s.Messages(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("Messages(unknown) = %v, %v; want none", got, err)
	}

	bad := []struct {
		name string
		m    Message
		kind error
	}{
		{"unknown conversation", Message{Conversation: "nope", Role: RoleUser}, errs.ErrNotFound},
		{"no conversation", Message{Role: RoleUser}, errs.ErrInvalidInput},
		{"bad role", Message{Conversation: "c", Role: "system"}, errs.ErrInvalidInput},
		{"bad tool calls", Message{Conversation: "c", Role: RoleAssistant, ToolCalls: json.RawMessage(`[{`)}, errs.ErrInvalidInput},
		{"bad arguments", Message{Conversation: "c", Role: RoleTool, Arguments: json.RawMessage(`{"a":}`)}, errs.ErrInvalidInput},
		{"bad result", Message{Conversation: "c", Role: RoleTool, Result: json.RawMessage(`hello`)}, errs.ErrInvalidInput},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if id, err := s.AppendMessage(ctx, tt.m); !errors.Is(err, tt.kind) || id != 0 {
				t.Errorf("AppendMessage = %d, %v (kind %s); want 0 and %v", id, err, errs.KindOf(err), tt.kind)
			}
		})
	}
	if got, _ := s.Messages(ctx, "c"); len(got) != len(msgs) {
		t.Errorf("%d messages after the refused ones, want %d", len(got), len(msgs))
	}
}

func TestApprovals(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	mustCreate(t, s, Conversation{ID: "c", CreatedAt: at(0)})
	mustCreate(t, s, Conversation{ID: "d", CreatedAt: at(0)})

	a1 := Approval{ID: "ap-1", Conversation: "c", CallID: "call-1", Skill: "write_file", Permission: "mutating",
		Arguments: json.RawMessage(`{"path":"notes.txt"}`), ArgumentsHash: strings.Repeat("ab", 32),
		RequestedAt: at(2), ExpiresAt: at(62)}
	a0 := Approval{ID: "ap-0", Conversation: "c", Skill: "fetch", Permission: "network", RequestedAt: at(1), ExpiresAt: at(61)}
	policy := Approval{ID: "ap-p", Conversation: "c", Skill: "echo", Status: ApprovalApproved, DecidedBy: DecidedByPolicy, RequestedAt: at(3)}
	for _, a := range []Approval{a1, a0, policy, {ID: "ap-d", Conversation: "d", Skill: "x"}} {
		if err := s.InsertApproval(ctx, a); err != nil {
			t.Fatalf("InsertApproval(%s): %v", a.ID, err)
		}
	}
	a1.Status = ApprovalPending
	got, err := s.GetApproval(ctx, "ap-1")
	if err != nil || !reflect.DeepEqual(got, a1) {
		t.Errorf("GetApproval:\n got %+v, %v\nwant %+v", got, err, a1)
	}
	list, err := s.Approvals(ctx, "c")
	if err != nil || len(list) != 3 || list[0].ID != "ap-0" || list[1].ID != "ap-1" || list[2].ID != "ap-p" {
		t.Errorf("Approvals(c) = %+v, %v; want ap-0 ap-1 ap-p", list, err)
	}
	if list[2].Status != ApprovalApproved || list[2].DecidedBy != DecidedByPolicy || !list[2].DecidedAt.Equal(at(3)) {
		t.Errorf("approval decided at insertion = %+v", list[2])
	}

	// Decide: once.
	if err := s.DecideApproval(ctx, "ap-1", ApprovalApproved, DecidedByUser, at(5)); err != nil {
		t.Fatalf("DecideApproval: %v", err)
	}
	got, _ = s.GetApproval(ctx, "ap-1")
	if got.Status != ApprovalApproved || got.DecidedBy != DecidedByUser || !got.DecidedAt.Equal(at(5)) {
		t.Errorf("decided approval = %+v", got)
	}
	if c, _ := s.GetConversation(ctx, "c"); !c.UpdatedAt.Equal(at(5)) {
		t.Errorf("conversation UpdatedAt = %v after the decision, want %v", c.UpdatedAt, at(5))
	}
	err = s.DecideApproval(ctx, "ap-1", ApprovalDenied, DecidedByUser, at(6))
	var de *DecidedError
	if !errors.As(err, &de) || !errors.Is(err, ErrDecided) || !errors.Is(err, errs.ErrInvalidInput) ||
		de.Status != ApprovalApproved || de.DecidedBy != DecidedByUser || !de.DecidedAt.Equal(at(5)) {
		t.Errorf("second decision: %v (%+v), want a *DecidedError saying approved by user", err, de)
	}
	if got, _ := s.GetApproval(ctx, "ap-1"); got.Status != ApprovalApproved {
		t.Errorf("the second decision changed the status to %q", got.Status)
	}

	// Too late: past ExpiresAt a yes becomes expired.
	err = s.DecideApproval(ctx, "ap-0", ApprovalApproved, DecidedByUser, at(61).Add(time.Nanosecond))
	if !errors.As(err, &de) || de.Status != ApprovalExpired || !strings.Contains(err.Error(), "expired") {
		t.Errorf("late approval: %v, want a *DecidedError saying expired", err)
	}
	got, _ = s.GetApproval(ctx, "ap-0")
	if got.Status != ApprovalExpired || got.DecidedBy != DecidedByTimeout {
		t.Errorf("after a late approval: %s by %s, want expired by timeout", got.Status, got.DecidedBy)
	}

	// The timeout itself, at the expiry instant, is accepted.
	if err := s.InsertApproval(ctx, Approval{ID: "ap-t", Conversation: "c", Skill: "x", RequestedAt: at(7), ExpiresAt: at(8)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DecideApproval(ctx, "ap-t", ApprovalExpired, DecidedByTimeout, at(9)); err != nil {
		t.Errorf("expiring after ExpiresAt: %v", err)
	}

	errCases := []struct {
		name string
		err  error
		kind error
	}{
		{"decide unknown", s.DecideApproval(ctx, "nope", ApprovalApproved, DecidedByUser, at(9)), errs.ErrNotFound},
		{"decide to pending", s.DecideApproval(ctx, "ap-d", ApprovalPending, DecidedByUser, at(9)), errs.ErrInvalidInput},
		{"decide by nobody", s.DecideApproval(ctx, "ap-d", ApprovalDenied, "", at(9)), errs.ErrInvalidInput},
		{"bad status", s.DecideApproval(ctx, "ap-d", "maybe", DecidedByUser, at(9)), errs.ErrInvalidInput},
		{"get unknown", func() error { _, err := s.GetApproval(ctx, "nope"); return err }(), errs.ErrNotFound},
		{"duplicate", s.InsertApproval(ctx, Approval{ID: "ap-1", Conversation: "c", Skill: "x"}), ErrExists},
		{"unknown conversation", s.InsertApproval(ctx, Approval{ID: "ap-x", Conversation: "nope", Skill: "x"}), errs.ErrNotFound},
		{"no skill", s.InsertApproval(ctx, Approval{ID: "ap-y", Conversation: "c"}), errs.ErrInvalidInput},
		{"bad arguments", s.InsertApproval(ctx, Approval{ID: "ap-z", Conversation: "c", Skill: "x", Arguments: json.RawMessage(`{`)}), errs.ErrInvalidInput},
		{"pending yet decided", s.InsertApproval(ctx, Approval{ID: "ap-w", Conversation: "c", Skill: "x", DecidedBy: DecidedByUser}), errs.ErrInvalidInput},
		{"decided by nobody", s.InsertApproval(ctx, Approval{ID: "ap-v", Conversation: "c", Skill: "x", Status: ApprovalDenied}), errs.ErrInvalidInput},
	}
	for _, tt := range errCases {
		if !errors.Is(tt.err, tt.kind) {
			t.Errorf("%s: %v (kind %s), want %v", tt.name, tt.err, errs.KindOf(tt.err), tt.kind)
		}
	}
	if got, _ := s.GetApproval(ctx, "ap-d"); got.Status != ApprovalPending {
		t.Errorf("refused decisions changed ap-d to %q", got.Status)
	}
	if got, _ := s.GetApproval(ctx, "ap-1"); got.Skill != "write_file" {
		t.Errorf("the duplicate overwrote ap-1: %+v", got)
	}
}

// TestDecideApprovalRace: ten deciders race for one approval; exactly one wins
// and the stored decision is the winner's.
func TestDecideApprovalRace(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	mustCreate(t, s, Conversation{ID: "c"})
	for round := range 5 {
		id := fmt.Sprint("ap-", round)
		if err := s.InsertApproval(ctx, Approval{ID: id, Conversation: "c", Skill: "write_file"}); err != nil {
			t.Fatal(err)
		}
		const racers = 10
		results := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				status := ApprovalApproved
				if i%2 == 1 {
					status = ApprovalDenied
				}
				<-start
				results[i] = s.DecideApproval(ctx, id, status, DecidedByUser, time.Time{})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range results {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: deciders %d and %d both won", round, winner, i)
				}
				winner = i
			case !errors.Is(err, ErrDecided):
				t.Errorf("round %d: decider %d: %v, want ErrDecided", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won: %v", round, results)
		}
		want := ApprovalApproved
		if winner%2 == 1 {
			want = ApprovalDenied
		}
		if got, _ := s.GetApproval(ctx, id); got.Status != want {
			t.Errorf("round %d: stored %q, but the winner decided %q", round, got.Status, want)
		}
	}
}

func TestExpirePendingApprovals(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "buddy.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, Conversation{ID: "c", CreatedAt: at(0)})
	mustCreate(t, s, Conversation{ID: "d", CreatedAt: at(0)})
	for _, a := range []Approval{
		{ID: "p1", Conversation: "c", Skill: "x", RequestedAt: at(1), ExpiresAt: at(61)},
		{ID: "p2", Conversation: "c", Skill: "x", RequestedAt: at(2)},
		{ID: "p3", Conversation: "d", Skill: "x", RequestedAt: at(3)},
		{ID: "done", Conversation: "d", Skill: "x", RequestedAt: at(4)},
	} {
		if err := s.InsertApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DecideApproval(ctx, "done", ApprovalDenied, DecidedByUser, at(5)); err != nil {
		t.Fatal(err)
	}
	// The server is killed with the approvals pending; the next start expires them.
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	n, err := s.ExpirePendingApprovals(ctx, at(100))
	if err != nil || n != 3 {
		t.Fatalf("ExpirePendingApprovals = %d, %v; want 3", n, err)
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		a, err := s.GetApproval(ctx, id)
		if err != nil || a.Status != ApprovalExpired || a.DecidedBy != DecidedByTimeout || !a.DecidedAt.Equal(at(100)) {
			t.Errorf("%s after expiry: %+v, %v", id, a, err)
		}
		if err := s.DecideApproval(ctx, id, ApprovalApproved, DecidedByUser, at(101)); !errors.Is(err, ErrDecided) {
			t.Errorf("approving expired %s: %v, want ErrDecided", id, err)
		}
	}
	if a, _ := s.GetApproval(ctx, "done"); a.Status != ApprovalDenied || !a.DecidedAt.Equal(at(5)) {
		t.Errorf("a decided approval was touched: %+v", a)
	}
	if c, _ := s.GetConversation(ctx, "d"); !c.UpdatedAt.Equal(at(5)) {
		t.Errorf("expiry moved UpdatedAt to %v, want %v", c.UpdatedAt, at(5))
	}
	if n, err := s.ExpirePendingApprovals(ctx, time.Time{}); err != nil || n != 0 {
		t.Errorf("second ExpirePendingApprovals = %d, %v; want 0", n, err)
	}
}

func TestAudit(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	mustCreate(t, s, Conversation{ID: "c", CreatedAt: at(0)})

	entries := []AuditEntry{
		{Time: at(1), Skill: "echo", Version: "1.0.0", ModuleSHA256: strings.Repeat("0f", 32), ArgumentsHash: strings.Repeat("a1", 32),
			Outcome: "ok", Fuel: math.MaxUint64, DurationUS: 250, BytesIn: 12, BytesOut: 34},
		{Time: at(2), Conversation: "c", Skill: "write_file", Outcome: "denied", Detail: "User denied execution of write_file", Asked: true},
		{Time: at(3), Conversation: "gone", Skill: "fetch", Outcome: "forbidden", Detail: "host example.com not allowed"},
		{Time: at(4), Conversation: "c", Skill: "write_file", Outcome: "ok", Asked: true, Fuel: 99},
	}
	var prev int64
	for i := range entries {
		id, err := s.AppendAudit(ctx, entries[i])
		if err != nil {
			t.Fatalf("AppendAudit %d: %v", i, err)
		}
		if id <= prev {
			t.Errorf("entry %d: ID %d not above %d", i, id, prev)
		}
		entries[i].ID, prev = id, id
	}
	tests := []struct {
		conversation string
		limit        int
		want         []AuditEntry
	}{
		{"", 0, entries},
		{"", -1, entries},
		{"", 2, entries[2:]},
		{"", 100, entries},
		{"c", 0, []AuditEntry{entries[1], entries[3]}},
		{"c", 1, []AuditEntry{entries[3]}},
		{"gone", 0, entries[2:3]},
		{"nope", 0, nil},
	}
	for _, tt := range tests {
		got, err := s.Audit(ctx, tt.conversation, tt.limit)
		for i := range got { // the chain is tested in audit_test.go
			if got[i].Kind != AuditInvocation || got[i].Hash == "" {
				t.Errorf("row %d: kind %q, hash %q", got[i].ID, got[i].Kind, got[i].Hash)
			}
			got[i].Kind, got[i].PrevHash, got[i].Hash = "", "", ""
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Audit(%q, %d):\n got %+v, %v\nwant %+v", tt.conversation, tt.limit, got, err, tt.want)
		}
	}
	if c, _ := s.GetConversation(ctx, "c"); !c.UpdatedAt.Equal(at(4)) {
		t.Errorf("conversation UpdatedAt = %v, want the last audit row's %v", c.UpdatedAt, at(4))
	}

	// The detail is capped, at a character boundary.
	id, err := s.AppendAudit(ctx, AuditEntry{Skill: "echo", Outcome: "skill_error", Detail: strings.Repeat("✓", 2000)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Audit(ctx, "", 1)
	if len(got) != 1 || got[0].ID != id || len(got[0].Detail) > MaxAuditDetailBytes || len(got[0].Detail) < MaxAuditDetailBytes-8 ||
		!utf8.ValidString(got[0].Detail) || !strings.HasSuffix(got[0].Detail, "…") {
		t.Errorf("capped detail: %d bytes, valid %v", len(got[0].Detail), utf8.ValidString(got[0].Detail))
	}
	if got[0].Time.IsZero() {
		t.Error("a zero Time was not set to now")
	}

	for _, e := range []AuditEntry{{Outcome: "ok"}, {Skill: "echo"}} {
		if _, err := s.AppendAudit(ctx, e); !errors.Is(err, errs.ErrInvalidInput) {
			t.Errorf("AppendAudit(%+v) = %v, want invalid_input", e, err)
		}
	}
	// Rows are append-only.
	if _, err := s.writer.ExecContext(ctx, `UPDATE audit SET outcome = 'ok' WHERE id = ?`, entries[1].ID); err == nil ||
		!strings.Contains(err.Error(), "append-only") {
		t.Errorf("UPDATE of an audit row: %v, want refused", err)
	}
}

// TestConversationQueriesUseIndexes: the per-conversation reads and the
// startup expiry do not scan their tables.
func TestConversationQueriesUseIndexes(t *testing.T) {
	s := openTest(t, Options{})
	tests := map[string]string{
		"messages":  `SELECT * FROM messages WHERE conversation = 'c' ORDER BY id`,
		"approvals": `SELECT * FROM approvals WHERE conversation = 'c' ORDER BY requested_at, rowid`,
		"pending":   `UPDATE approvals SET status = 'expired' WHERE status = 'pending'`,
		"audit":     `SELECT * FROM audit WHERE conversation = 'c' ORDER BY id DESC LIMIT 10`,
		"list":      `SELECT * FROM conversations ORDER BY updated_at DESC`,
	}
	for name, q := range tests {
		rows, err := s.writer.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+q)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if !strings.Contains(p, "USING INDEX") && !strings.Contains(p, "USING COVERING INDEX") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want an index and no sort", name, p)
		}
	}
}

// TestMigrationToConversations: a database created and used by the previous
// buddy (schema version 1) is upgraded in place by Open, keeping its data.
func TestMigrationToConversations(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "buddy.db")
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = saved[:1]
	old, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := old.SchemaVersion(ctx); v != 1 {
		t.Fatalf("old buddy wrote version %d, want 1", v)
	}
	if err := old.InsertSkill(ctx, testSkill("echo")); err != nil {
		t.Fatal(err)
	}
	if err := old.KVSet(ctx, "echo", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Remember(ctx, "echo", "the dentist is on Tuesday", nil); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	migrations = saved
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("Open by the new buddy: %v", err)
	}
	defer s.Close(context.Background())
	if v, err := s.SchemaVersion(ctx); err != nil || v != LatestSchemaVersion() {
		t.Errorf("version after the upgrade = %d, %v; want %d", v, err, LatestSchemaVersion())
	}
	if _, err := s.GetSkill(ctx, "echo"); err != nil {
		t.Errorf("skill lost in the upgrade: %v", err)
	}
	if v, err := s.KVGet(ctx, "echo", "k"); err != nil || string(v) != "v" {
		t.Errorf("KV lost in the upgrade: %q, %v", v, err)
	}
	if mems, err := s.Recall(ctx, "echo", "dentist", 0); err != nil || len(mems) != 1 {
		t.Errorf("memories lost in the upgrade: %v, %v", mems, err)
	}
	mustCreate(t, s, Conversation{ID: "c"})
	if _, err := s.AppendMessage(ctx, Message{Conversation: "c", Role: RoleUser, Text: "hi"}); err != nil {
		t.Error(err)
	}
	if err := s.InsertApproval(ctx, Approval{ID: "a", Conversation: "c", Skill: "x"}); err != nil {
		t.Error(err)
	}
	if _, err := s.AppendAudit(ctx, AuditEntry{Skill: "x", Outcome: "ok"}); err != nil {
		t.Error(err)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
	var fk int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fk); err != nil || fk != 0 {
		t.Errorf("foreign key check: %d violations, %v", fk, err)
	}
}

func TestConversationsCanceledContext(t *testing.T) {
	s := openTest(t, Options{})
	mustCreate(t, s, Conversation{ID: "c"})
	if err := s.InsertApproval(t.Context(), Approval{ID: "a", Conversation: "c", Skill: "x"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"CreateConversation": func() error { return s.CreateConversation(ctx, Conversation{ID: "d"}) },
		"AppendMessage": func() error {
			_, err := s.AppendMessage(ctx, Message{Conversation: "c", Role: RoleUser})
			return err
		},
		"DecideApproval": func() error { return s.DecideApproval(ctx, "a", ApprovalApproved, DecidedByUser, time.Time{}) },
		"AppendAudit":    func() error { _, err := s.AppendAudit(ctx, AuditEntry{Skill: "x", Outcome: "ok"}); return err },
		"Messages":       func() error { _, err := s.Messages(ctx, "c"); return err },
	}
	for name, call := range calls {
		if err := call(); errs.KindOf(err) != errs.KindCanceled {
			t.Errorf("%s with a canceled context: %v (kind %s), want canceled", name, err, errs.KindOf(err))
		}
	}
	if a, _ := s.GetApproval(t.Context(), "a"); a.Status != ApprovalPending {
		t.Errorf("the canceled decision was written: %s", a.Status)
	}
}

// Crash durability of the server's writes: a child process (this test binary,
// re-executed) appends audit rows and messages from several goroutines as fast
// as it can, printing each ID once the call has returned; it is SIGKILLed in the
// middle of the burst. Every printed ID must be in the reopened database.
const convCrashEnv = "BUDDY_STORE_CONV_CRASH_CHILD"

const (
	convCrashWorkers = 4
	convCrashAcks    = 200 // kill after this many acknowledged rows
)

func TestConversationCrashDurability(t *testing.T) {
	if path := os.Getenv(convCrashEnv); path != "" {
		convCrashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "buddy.db")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConversationCrashDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), convCrashEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	audits, messages := map[int64]bool{}, map[int64]bool{}
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() { // read to EOF: lines printed before the kill are acks too
		var kind string
		var id int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d", &kind, &id); err != nil {
			continue // the test framework's own output
		}
		switch kind {
		case "audit":
			audits[id] = true
		case "message":
			messages[id] = true
		}
		if !killed && len(audits)+len(messages) >= convCrashAcks {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !killed || !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed in the burst (%d audit and %d message acks): %v\n%s", len(audits), len(messages), err, stderr.String())
	}
	if len(audits) == 0 || len(messages) == 0 {
		t.Fatalf("acks: %d audit rows, %d messages; want both kinds", len(audits), len(messages))
	}
	t.Logf("killed the child after %d audit and %d message acks", len(audits), len(messages))

	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer s.Close(context.Background())
	entries, err := s.Audit(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Messages(t.Context(), "burst")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		delete(audits, e.ID)
		if e.Skill != "write_file" || e.Conversation != "burst" {
			t.Errorf("audit row %d garbled: %+v", e.ID, e)
		}
	}
	for _, m := range msgs {
		delete(messages, m.ID)
		if m.Role != RoleTool || string(m.Arguments) != `{"path":"notes.txt"}` {
			t.Errorf("message %d garbled: %+v", m.ID, m)
		}
	}
	if len(audits) > 0 || len(messages) > 0 {
		t.Errorf("acknowledged rows lost: audit %v, messages %v", audits, messages)
	}
	if err := s.IntegrityCheck(t.Context()); err != nil {
		t.Error(err)
	}
}

func convCrashChild(path string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		fail(err)
	}
	if err := s.CreateConversation(ctx, Conversation{ID: "burst"}); err != nil {
		fail(err)
	}
	var mu sync.Mutex
	ack := func(kind string, id int64) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("%s %d\n", kind, id)
	}
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for w := range convCrashWorkers {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				id, err := s.AppendAudit(ctx, AuditEntry{Conversation: "burst", Skill: "write_file", Outcome: "ok",
					Detail: fmt.Sprintf("worker %d call %d", w, i), Fuel: uint64(i)})
				if err != nil {
					fail(err)
				}
				ack("audit", id)
				id, err = s.AppendMessage(ctx, Message{Conversation: "burst", Role: RoleTool, CallID: fmt.Sprint(w, "-", i),
					Skill: "write_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`), OK: true})
				if err != nil {
					fail(err)
				}
				ack("message", id)
			}
		})
	}
	wg.Wait()
	fail(errors.New("not killed within a minute"))
}

// BenchmarkAppendAudit measures one durable audit append (a committed, fsynced
// transaction that also touches its conversation), from one goroutine and from
// 64 at once, where group commit shares each fsync among the waiting writes.
func BenchmarkAppendAudit(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "buddy.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			ctx := context.Background()
			if err := s.CreateConversation(ctx, Conversation{ID: "bench"}); err != nil {
				b.Fatal(err)
			}
			e := AuditEntry{Conversation: "bench", Skill: "write_file", Version: "1.0.0",
				ModuleSHA256: strings.Repeat("ab", 32), ArgumentsHash: strings.Repeat("cd", 32),
				Outcome: "ok", Asked: true, Fuel: 12345, DurationUS: 800, BytesIn: 40, BytesOut: 20}
			if !parallel {
				var lat []time.Duration
				for b.Loop() {
					start := time.Now()
					if _, err := s.AppendAudit(ctx, e); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				reportPercentiles(b, lat)
				return
			}
			b.SetParallelism(32) // 64 writers on 2 CPUs: many sessions at once
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.AppendAudit(ctx, e); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
