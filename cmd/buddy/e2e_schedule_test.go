//go:build unix

package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestScheduleCLI: buddy schedule add, list --json and rm against the
// database with no server running; bad times, durations and cron
// expressions are invalid_input (exit 2) and store nothing; an unknown id
// is not_found (exit 4).
func TestScheduleCLI(t *testing.T) {
	s := newSandbox(t)
	out := s.run(t, "schedule", "add", "reminder", "--at", "+2h", "--text", "call the plumber", "--json").ok(t)
	var rem struct {
		ID             string    `json:"id"`
		Kind           string    `json:"kind"`
		Text           string    `json:"text"`
		ConversationID string    `json:"conversation_id"`
		NextRun        time.Time `json:"next_run"`
	}
	if err := json.Unmarshal([]byte(out), &rem); err != nil || !strings.HasPrefix(rem.ID, "j_") || rem.Kind != "reminder" ||
		rem.Text != "call the plumber" || time.Until(rem.NextRun) < time.Hour {
		t.Fatalf("add: %s (%v)", out, err)
	}
	s.run(t, "schedule", "add", "check", "--cron", "0 8 * * 1-5", "--prompt", "is the build red?").ok(t)
	s.run(t, "schedule", "add", "check", "--every", "30m", "--prompt", "any mail?").ok(t)
	for _, args := range [][]string{
		{"reminder", "--at", "tomorrow", "--text", "x"},
		{"reminder", "--at", "2001-01-01T00:00:00Z", "--text", "x"},
		{"check", "--every", "5 minutes", "--prompt", "x"},
		{"check", "--cron", "61 * * * *", "--prompt", "x"},
		{"check", "--prompt", "x"},
		{"reminder", "--at", "+1h"},
	} {
		s.run(t, append([]string{"schedule", "add"}, args...)...).fails(t, errs.KindInvalidInput)
	}
	var list struct {
		Jobs []struct {
			ID      string     `json:"id"`
			Kind    string     `json:"kind"`
			NextRun *time.Time `json:"next_run"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(s.run(t, "schedule", "list", "--json").ok(t)), &list); err != nil || len(list.Jobs) != 3 {
		t.Fatalf("list: %+v (%v)", list, err)
	}
	for _, j := range list.Jobs {
		if j.NextRun == nil || j.Kind == "" {
			t.Fatalf("job %+v", j)
		}
	}
	s.run(t, "schedule", "rm", rem.ID).ok(t)
	s.run(t, "schedule", "rm", rem.ID).fails(t, errs.KindNotFound)
	if !strings.Contains(s.run(t, "schedule", "list").ok(t), "is the build red?") {
		t.Fatal("the table does not list the check")
	}
}
