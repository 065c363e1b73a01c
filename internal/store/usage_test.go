package store

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestSummaryMessagesAndUsage: a summary message keeps what it covers and
// its record; MessagesAfter reads only what is new; usage rows sum per
// conversation and over time.
func TestSummaryMessagesAndUsage(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "buddy.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.CreateConversation(ctx, Conversation{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, text := range []string{"one", "two", "three"} {
		id, err := s.AppendMessage(ctx, Message{Conversation: "c1", Role: RoleUser, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, bad := range []Message{
		{Conversation: "c1", Role: RoleSummary, Text: "x"},
		{Conversation: "c1", Role: RoleSummary, Text: "x", CoversFrom: 3, CoversTo: 2},
		{Conversation: "c1", Role: RoleSummary, Text: "x", CoversFrom: 1, CoversTo: 2, Meta: json.RawMessage("{")},
	} {
		if _, err := s.AppendMessage(ctx, bad); !errors.Is(err, errs.ErrInvalidInput) {
			t.Errorf("AppendMessage(%+v) = %v, want invalid_input", bad, err)
		}
	}
	sum, err := s.AppendMessage(ctx, Message{Conversation: "c1", Role: RoleSummary, Text: "one and two",
		CoversFrom: ids[0], CoversTo: ids[1], Meta: json.RawMessage(`{"method":"summary"}`)})
	if err != nil {
		t.Fatal(err)
	}
	after, err := s.MessagesAfter(ctx, "c1", ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 || after[0].Text != "three" || after[1].ID != sum || after[1].CoversFrom != ids[0] ||
		after[1].CoversTo != ids[1] || string(after[1].Meta) != `{"method":"summary"}` {
		t.Fatalf("MessagesAfter = %+v", after)
	}
	if all, _ := s.Messages(ctx, "c1"); len(all) != 4 {
		t.Fatalf("the summarised messages are not all kept: %d", len(all))
	}

	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for i, u := range []Usage{
		{Conversation: "c1", Time: day.Add(-time.Hour), Purpose: UsageTurn, PromptTokens: 100, CompletionTokens: 10, Reported: true, WindowTokens: 4096},
		{Conversation: "c1", Time: day.Add(time.Hour), Purpose: UsageSummary, PromptTokens: 50, CompletionTokens: 20, CostMicroUSD: 7},
		{Conversation: "c2", Time: day.Add(2 * time.Hour), Purpose: UsageTurn, PromptTokens: 1, CompletionTokens: 1, CachedTokens: 1},
	} {
		if err := s.AppendUsage(ctx, u); err != nil {
			t.Fatalf("usage %d: %v", i, err)
		}
	}
	if err := s.AppendUsage(ctx, Usage{Purpose: UsageTurn, PromptTokens: -1}); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("negative usage = %v", err)
	}
	c1, err := s.ConversationUsage(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if c1.Requests != 2 || c1.PromptTokens != 150 || c1.CompletionTokens != 30 || c1.CostMicroUSD != 7 || c1.Last.Purpose != UsageSummary {
		t.Fatalf("c1 usage = %+v", c1)
	}
	today, err := s.UsageSince(ctx, day)
	if err != nil {
		t.Fatal(err)
	}
	if today.Requests != 2 || today.PromptTokens != 51 || today.CachedTokens != 1 {
		t.Fatalf("usage since %s = %+v", day, today)
	}
	if none, _ := s.ConversationUsage(ctx, "nobody"); none.Requests != 0 {
		t.Fatalf("unknown conversation usage = %+v", none)
	}
}
