package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestJobClaimOnce: of two Stores open on one database (two processes), one
// claims a due run; the run's message and its end commit together; a lease
// lost is reported and changes nothing.
func TestJobClaimOnce(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "buddy.db")
	a, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	b, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())

	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	j := Job{ID: "j_1", Kind: JobReminder, At: t0, Text: "call the plumber", Conversation: "c_1", CreatedAt: t0.Add(-time.Hour), NextRun: t0}
	if err := a.InsertJob(ctx, j, "Reminder: call the plumber"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetJob(ctx, "j_1"); err != nil || got.Text != j.Text || !got.NextRun.Equal(t0) || !got.At.Equal(t0) {
		t.Fatalf("GetJob = %+v, %v", got, err)
	}
	if due, ok, err := b.NextDue(ctx); err != nil || !ok || !due.Equal(t0) {
		t.Fatalf("NextDue = %v %v %v", due, ok, err)
	}
	now := t0.Add(time.Minute)
	var wins sync.WaitGroup
	results := make([]bool, 2)
	for i, s := range []*Store{a, b} {
		wins.Go(func() {
			ok, err := s.ClaimJob(ctx, "j_1", []string{"a", "b"}[i], t0, now, now.Add(time.Minute))
			if err != nil {
				t.Error(err)
			}
			results[i] = ok
		})
	}
	wins.Wait()
	if results[0] == results[1] {
		t.Fatalf("claims = %v, want exactly one", results)
	}
	owner, other := a, "b"
	if results[1] {
		owner, other = b, "a"
	}
	if due, _ := owner.DueJobs(ctx, now); len(due) != 0 {
		t.Fatalf("a leased job is still listed due: %+v", due)
	}
	if _, err := owner.FinishJob(ctx, JobRun{ID: "j_1", Owner: other, Ran: now, Status: "ok"}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("FinishJob by the loser = %v, want ErrLeaseLost", err)
	}
	winner := map[bool]string{true: "a", false: "b"}[results[0]]
	id, err := owner.FinishJob(ctx, JobRun{ID: "j_1", Owner: winner, Ran: now, Status: "delivered", Counted: true,
		Message: &Message{Conversation: "c_1", Role: RoleAssistant, Text: "call the plumber"}})
	if err != nil || id == 0 {
		t.Fatalf("FinishJob = %d, %v", id, err)
	}
	got, _ := a.GetJob(ctx, "j_1")
	if !got.NextRun.IsZero() || got.Runs != 1 || got.LeaseOwner != "" || got.LastStatus != "delivered" {
		t.Fatalf("after the run: %+v", got)
	}
	if msgs, _ := b.Messages(ctx, "c_1"); len(msgs) != 1 || msgs[0].Text != "call the plumber" {
		t.Fatalf("messages = %+v", msgs)
	}
	if _, ok, _ := a.NextDue(ctx); ok {
		t.Fatal("a one-shot job that ran is still due")
	}
	if err := a.DeleteJob(ctx, "j_1"); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteJob(ctx, "j_1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("DeleteJob twice = %v", err)
	}
}
