package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/scheduler"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/internal/testkit/syncbuf"
)

// TestReminderMissedWhileDownIsDeliveredOnce: a reminder due while buddy
// was not running is delivered once, verbatim, by the next process, with
// no model request; it is not delivered again.
func TestReminderMissedWhileDownIsDeliveredOnce(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "buddy.db")
	now := &clock{t: time.Date(2026, 3, 2, 21, 0, 0, 0, time.UTC)}
	first := newRig(t, rigOpts{dbPath: dbPath, now: now})
	j := first.add(scheduler.Spec{Kind: "reminder", At: "+11h", Text: "call the plumber *now*"})
	if n := first.s.RunDue(t.Context()); n != 0 {
		t.Fatalf("%d jobs ran before their time", n)
	}
	_ = first.s.Close(context.Background())
	_ = first.st.Close(context.Background())

	now.Add(14 * time.Hour) // buddy was down at 08:00
	second := newRig(t, rigOpts{dbPath: dbPath, now: now})
	if n := second.s.RunDue(t.Context()); n != 1 {
		t.Fatalf("RunDue ran %d jobs, want 1", n)
	}
	if n := second.s.RunDue(t.Context()); n != 0 {
		t.Fatalf("the reminder ran again: %d", n)
	}
	notes := second.page.notifications()
	if len(notes) != 1 || notes[0].Text != "call the plumber *now*" || notes[0].JobID != j.ID || notes[0].Kind != "reminder" ||
		notes[0].ConversationID != j.ConversationID || !notes[0].DueAt.Equal(time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("notifications = %+v", notes)
	}
	if len(second.chat.notes) != 1 {
		t.Fatalf("the paired channel got %d notifications", len(second.chat.notes))
	}
	if got := second.messages(j.ConversationID, store.RoleAssistant); len(got) != 1 || got[0] != "call the plumber *now*" {
		t.Fatalf("conversation = %q", got)
	}
	if second.prov.requests() != 0 {
		t.Fatal("a reminder made a model request")
	}
	if got := second.job(j.ID); got.NextRun != nil || got.Runs != 1 || got.LastStatus != scheduler.StatusDelivered {
		t.Fatalf("job after its run: %+v", got)
	}
}

// TestCronAcrossDST: a daily job in America/New_York fires once a day at
// its wall-clock time across both changes of 2026: once at 01:30 on the
// day 01:30 happens twice, and at 03:30 on the day 02:30 does not exist.
func TestCronAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		cron  string
		start time.Time
		want  []string
	}{
		{"fall back", "30 1 * * *", time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			[]string{"2026-10-31 01:30 EDT", "2026-11-01 01:30 EDT", "2026-11-02 01:30 EST", "2026-11-03 01:30 EST"}},
		{"spring forward", "30 2 * * *", time.Date(2026, 3, 7, 12, 0, 0, 0, ny),
			[]string{"2026-03-08 03:30 EDT", "2026-03-09 02:30 EDT", "2026-03-10 02:30 EDT"}},
		{"every hour, fall back", "0 * * * *", time.Date(2026, 11, 1, 0, 30, 0, 0, ny),
			[]string{"2026-11-01 01:00 EDT", "2026-11-01 02:00 EST", "2026-11-01 03:00 EST"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := &clock{t: c.start}
			r := newRig(t, rigOpts{now: now, loc: ny})
			j := r.add(scheduler.Spec{Kind: "check", Cron: c.cron, Prompt: "is the build red?"})
			var got []string
			if c.name == "fall back" {
				// Created at noon: the first run is the next day's.
				got = append(got, "2026-10-31 01:30 EDT")
			}
			for len(got) < len(c.want) {
				next := r.job(j.ID).NextRun
				if next == nil {
					t.Fatal("no next run")
				}
				got = append(got, next.In(ny).Format("2006-01-02 15:04 MST"))
				now.Set(next.Add(2 * time.Second))
				if n := r.s.RunDue(t.Context()); n != 1 {
					t.Fatalf("at %v: %d runs", now.Now(), n)
				}
			}
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("runs = %q, want %q", got, c.want)
				}
			}
		})
	}
}

// TestTwoProcessesRunAJobOnce: two schedulers (two processes: two store
// handles, two owners) on one database, due at the same moment, run a job
// once.
func TestTwoProcessesRunAJobOnce(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "buddy.db")
	now := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	a := newRig(t, rigOpts{dbPath: dbPath, now: now, owner: "a"})
	b := newRig(t, rigOpts{dbPath: dbPath, now: now, owner: "b"})
	rem := a.add(scheduler.Spec{Kind: "reminder", At: "+1h", Text: "stand up"})
	chk := b.add(scheduler.Spec{Kind: "check", Every: "1h", Prompt: "anything new?"})
	for round := 0; round < 5; round++ {
		now.Add(time.Hour)
		var wg sync.WaitGroup
		var runs [2]int
		for i, r := range []*rig{a, b} {
			wg.Go(func() { runs[i] = r.s.RunDue(t.Context()) })
		}
		wg.Wait()
		want := 1
		if round == 0 {
			want = 2 // the reminder and the check
		}
		if runs[0]+runs[1] != want {
			t.Fatalf("round %d: runs %v, want %d in all", round, runs, want)
		}
	}
	if got := a.messages(rem.ConversationID, store.RoleAssistant); len(got) != 1 {
		t.Fatalf("the reminder was delivered %d times", len(got))
	}
	if n := len(a.page.notifications()) + len(b.page.notifications()); n != 1 {
		t.Fatalf("%d notifications, want 1 (the check had nothing to say)", n)
	}
	if got := a.job(chk.ID); got.Runs != 5 {
		t.Fatalf("the check ran %d times in 5 hours", got.Runs)
	}
	if n := a.prov.requests() + b.prov.requests(); n != 5 {
		t.Fatalf("%d model requests, want 5", n)
	}
}

// TestIdleHeartbeatMakesNoRequest: a day of heartbeats every 30 minutes
// with HEARTBEAT.md empty, then absent, makes no model request; with a
// checklist it makes one per beat, in a lean context.
func TestIdleHeartbeatMakesNoRequest(t *testing.T) {
	now := &clock{t: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	file := filepath.Join(dir, scheduler.HeartbeatFile)
	if err := os.WriteFile(file, []byte("\n  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOpts{now: now, dataDir: dir, heartbeat: 30 * time.Minute})
	beats := 0
	for i := 0; i < 48; i++ {
		now.Add(30 * time.Minute)
		beats += r.s.RunDue(t.Context())
		if i == 24 {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		}
	}
	if beats != 48 || r.prov.requests() != 0 {
		t.Fatalf("%d beats, %d model requests; want 48 and 0", beats, r.prov.requests())
	}
	if j := r.job(scheduler.HeartbeatID); j.LastStatus != scheduler.StatusEmpty {
		t.Fatalf("heartbeat status %q", j.LastStatus)
	}
	if err := os.WriteFile(file, []byte("- is the build red?\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now.Add(30 * time.Minute)
	r.s.RunDue(t.Context())
	now.Add(30 * time.Minute)
	r.s.RunDue(t.Context())
	if r.prov.requests() != 2 {
		t.Fatalf("%d model requests with a checklist, want 2", r.prov.requests())
	}
	req := r.prov.reqs[1]
	if len(req.Messages) != 1 || req.Messages[0].Text != "- is the build red?" {
		t.Fatalf("the heartbeat's request is not lean: %+v", req.Messages)
	}
	for _, tool := range req.Tools {
		if tool.Name == scheduler.ScheduleSkill {
			t.Fatal("the heartbeat is offered the schedule skill")
		}
	}
	if len(r.page.notifications()) != 0 {
		t.Fatal("a heartbeat with nothing to say notified")
	}
}

// TestHeartbeatCannotSchedule: a heartbeat turn that calls schedule anyway
// is refused without asking.
func TestHeartbeatCannotSchedule(t *testing.T) {
	now := &clock{t: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, scheduler.HeartbeatFile), []byte("- remind me"), 0o600)
	prov := &provider{steps: []func(agent.Request) *agent.Response{toolCall("schedule", `{"kind":"reminder"}`), answer(scheduler.NothingToSay)}}
	r := newRig(t, rigOpts{now: now, dataDir: dir, heartbeat: time.Hour, prov: prov})
	now.Add(time.Hour)
	r.s.RunDue(t.Context())
	if len(r.page.questions()) != 0 {
		t.Fatal("the heartbeat's schedule call was asked about")
	}
	ms, _ := r.st.Messages(t.Context(), r.job(scheduler.HeartbeatID).ConversationID)
	found := false
	for _, m := range ms {
		if m.Role == store.RoleTool && m.ErrorKind == string(errs.KindForbidden) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no forbidden tool result: %+v", ms)
	}
}

// TestCheckOverBudgetStops: a check that would pass tokens_per_job_per_day
// stops before the request that would pass it, says why in its
// conversation, writes an audit row, is skipped without a request for the
// rest of the day, runs again the next day, and at once when the cap is
// raised.
func TestCheckOverBudgetStops(t *testing.T) {
	now := &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}
	prov := &provider{usage: 1500, steps: []func(agent.Request) *agent.Response{answer("The build is red.")}}
	r := newRig(t, rigOpts{now: now, prov: prov, reserve: 500, caps: config.Budget{TokensPerJobPerDay: 4000}})
	j := r.add(scheduler.Spec{Kind: "check", Every: "1h", Prompt: "is the build red?"})
	for i := 0; i < 6; i++ {
		now.Add(time.Hour)
		r.s.RunDue(t.Context())
	}
	// 1500 a request; each is checked at its prompt's estimate + 500: two
	// fit in 4000, the third would not.
	if n := prov.requests(); n != 2 {
		t.Fatalf("%d requests under a cap of two, want 2", n)
	}
	got := r.job(j.ID)
	if got.StoppedBy != "tokens_per_job_per_day" || got.StoppedUntil == nil || !got.StoppedUntil.Equal(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("job = %+v", got)
	}
	if msgs := r.messages(j.ConversationID, store.RoleAssistant); !contains(msgs, "stopped: over budget: [budget] tokens_per_job_per_day") {
		t.Fatalf("the conversation does not say why: %q", msgs)
	}
	audit, _ := r.st.Audit(t.Context(), j.ConversationID, 10)
	if len(audit) != 1 || audit[0].Outcome != "over_budget" {
		t.Fatalf("audit = %+v", audit)
	}
	notes := r.page.notifications()
	stops := 0
	for _, n := range notes {
		if contains([]string{n.Text}, "over budget") {
			stops++
		}
	}
	if stops != 1 {
		t.Fatalf("%d notifications of the stop, want 1: %+v", stops, notes)
	}
	// The next day: it runs again.
	now.Set(time.Date(2026, 3, 3, 0, 30, 0, 0, time.UTC))
	r.s.RunDue(t.Context())
	if n := prov.requests(); n != 3 {
		t.Fatalf("the next day: %d requests, want 3: %+v", n, r.job(j.ID))
	}
	// Stopped again; the user raises the cap: it runs at its next time.
	for i := 0; i < 3; i++ {
		now.Add(time.Hour)
		r.s.RunDue(t.Context())
	}
	if n := prov.requests(); n != 4 {
		t.Fatalf("%d requests, want 4 (stopped again)", n)
	}
	r.caps.TokensPerJobPerDay = 100_000
	now.Add(time.Hour)
	r.s.RunDue(t.Context())
	if n := prov.requests(); n != 5 {
		t.Fatalf("after raising the cap: %d requests, want 5", n)
	}
}

// TestScheduledApprovalIsHeld: a scheduled turn's call that needs approval
// is held: asked on the page and in the paired channel, the turn goes on
// and ends "waiting for approval"; approved, the call runs and the
// conversation says so.
func TestScheduledApprovalIsHeld(t *testing.T) {
	now := &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}
	prov := &provider{steps: []func(agent.Request) *agent.Response{
		toolCall("write_file", `{"path":"report.txt","content":"red"}`), answer("I wrote the report; it waits for your approval.")}}
	r := newRig(t, rigOpts{now: now, prov: prov})
	approve := make(chan bool)
	r.page.answer = func(req approval.Request) (bool, error) { return <-approve, nil }
	j := r.add(scheduler.Spec{Kind: "check", At: "+1h", Prompt: "write the report"})
	now.Add(time.Hour)
	r.s.RunDue(t.Context())
	qs := r.page.questions()
	if len(qs) != 1 || qs[0].Skill != "write_file" || qs[0].Conversation != j.ConversationID {
		t.Fatalf("page questions = %+v", qs)
	}
	if len(r.chat.held) != 1 || r.chat.held[0].Skill != "write_file" || r.chat.held[0].ArgumentsHash == "" || r.chat.held[0].JobID != j.ID {
		t.Fatalf("channel held = %+v", r.chat.held)
	}
	if got := r.job(j.ID); got.LastStatus != scheduler.StatusWaiting {
		t.Fatalf("status %q", got.LastStatus)
	}
	if r.cat.writes.Load() != 0 {
		t.Fatal("the call ran before it was approved")
	}
	if reqs := prov.requests(); reqs != 2 {
		t.Fatalf("the turn did not go on: %d requests", reqs)
	}
	approve <- true
	deadline := time.Now().Add(10 * time.Second)
	for r.cat.writes.Load() == 0 || !contains(r.messages(j.ConversationID, store.RoleAssistant), "ran after your approval") {
		if time.Now().After(deadline) {
			t.Fatal("the approved call did not run")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var held int
	for _, n := range r.page.notifications() {
		if n.ApprovalID != "" {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("%d notifications with an approval id", held)
	}
}

// TestAddRefusesBadSpecs: a bad time, duration or cron expression is
// invalid_input and stores nothing.
func TestAddRefusesBadSpecs(t *testing.T) {
	r := newRig(t, rigOpts{})
	for _, sp := range []scheduler.Spec{
		{Kind: "reminder", At: "tomorrow", Text: "x"},
		{Kind: "reminder", At: "2020-01-01T00:00:00Z", Text: "x"},
		{Kind: "reminder", At: "+-5m", Text: "x"},
		{Kind: "reminder", At: "+1h"},
		{Kind: "check", Every: "5 minutes", Prompt: "x"},
		{Kind: "check", Every: "10s", Prompt: "x"},
		{Kind: "check", Cron: "61 * * * *", Prompt: "x"},
		{Kind: "check", Cron: "TZ=Europe/Paris 0 8 * * *", Prompt: "x"},
		{Kind: "check", Cron: "0 0 30 2 *", Prompt: "x"},
		{Kind: "check", At: "+1h", Every: "1h", Prompt: "x"},
		{Kind: "reminder", Every: "1h", Text: "x"},
		{Kind: "nap", At: "+1h", Text: "x"},
	} {
		if _, err := r.s.Add(t.Context(), sp, scheduler.ByAPI); !errors.Is(err, errs.ErrInvalidInput) {
			t.Errorf("Add(%+v) = %v, want invalid_input", sp, err)
		}
	}
	if js, _ := r.s.List(t.Context()); len(js) != 0 {
		t.Fatalf("jobs stored: %+v", js)
	}
	if err := r.s.Remove(t.Context(), "j_nope"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Remove(unknown) = %v", err)
	}
}

// TestSomethingToSay is the rule that lets a check stay silent.
func TestSomethingToSay(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "",
		"NOTHING_TO_SAY":                        "",
		"  **nothing_to_say**.\n":               "",
		"`NOTHING_TO_SAY`":                      "",
		"The build is red.":                     "The build is red.",
		"NOTHING_TO_SAY\nBut the disk is full.": "But the disk is full.",
		"All fine. NOTHING_TO_SAY":              "All fine.",
	} {
		got, ok := scheduler.SomethingToSay(in)
		if got != want || ok != (want != "") {
			t.Errorf("SomethingToSay(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// countingStore counts the scheduler loop's queries.
type countingStore struct {
	scheduler.Store
	mu           sync.Mutex
	due, nextDue int
}

func (c *countingStore) DueJobs(ctx context.Context, now time.Time) ([]store.Job, error) {
	c.mu.Lock()
	c.due++
	c.mu.Unlock()
	return c.Store.DueJobs(ctx, now)
}

func (c *countingStore) NextDue(ctx context.Context) (time.Time, bool, error) {
	c.mu.Lock()
	c.nextDue++
	c.mu.Unlock()
	return c.Store.NextDue(ctx)
}

func (c *countingStore) counts() (due, next int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.due, c.nextDue
}

// TestIdleLoopQueriesOnce: with no job due, the loop asks the store one
// question a poll (the earliest job) and lists no due jobs; a job that
// comes due is listed and run.
func TestIdleLoopQueriesOnce(t *testing.T) {
	now := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	cs := &countingStore{}
	r := newRig(t, rigOpts{now: now, poll: 2 * time.Millisecond, wrap: func(s scheduler.Store) scheduler.Store {
		cs.Store = s
		return cs
	}})
	j := r.add(scheduler.Spec{Kind: "reminder", At: "+1h", Text: "stretch"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.s.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for _, next := cs.counts(); next < 20 && time.Now().Before(deadline); _, next = cs.counts() {
		time.Sleep(time.Millisecond)
	}
	if due, next := cs.counts(); due != 0 || next < 20 {
		t.Fatalf("idle: %d due-job listings and %d next-due queries, want 0 and at least 20", due, next)
	}
	now.Add(2 * time.Hour)
	for len(r.page.notifications()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if due, _ := cs.counts(); due == 0 || len(r.page.notifications()) != 1 || r.page.notifications()[0].JobID != j.ID {
		t.Fatalf("the due reminder: %d listings, notifications %+v", due, r.page.notifications())
	}
}

// TestNoOwnerSaidOnce: with a channel but nobody paired, the first
// notification says so in the log and the next ones do not, until one is
// delivered again; the page gets every one.
func TestNoOwnerSaidOnce(t *testing.T) {
	var logBuf syncbuf.Buffer
	now := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	r := newRig(t, rigOpts{now: now, logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	r.chat.err = errs.Wrap(errs.ErrNotFound, "notifying the owner", errors.New("no owner's chat on this channel"))
	for i := range 3 {
		r.add(scheduler.Spec{Kind: "reminder", At: "+1m", Text: fmt.Sprint("note ", i)})
	}
	now.Add(2 * time.Minute)
	if n := r.s.RunDue(t.Context()); n != 3 {
		t.Fatalf("ran %d", n)
	}
	if got := strings.Count(logBuf.String(), "no paired chat"); got != 1 {
		t.Fatalf("said %d times:\n%s", got, logBuf.String())
	}
	if len(r.page.notifications()) != 3 {
		t.Fatalf("the page got %d", len(r.page.notifications()))
	}
	r.chat.mu.Lock()
	r.chat.err = nil
	r.chat.mu.Unlock()
	r.add(scheduler.Spec{Kind: "reminder", At: "+1m", Text: "delivered"})
	now.Add(2 * time.Minute)
	r.s.RunDue(t.Context())
	r.chat.mu.Lock()
	r.chat.err = errs.Wrap(errs.ErrNotFound, "notifying the owner", errors.New("revoked"))
	r.chat.mu.Unlock()
	r.add(scheduler.Spec{Kind: "reminder", At: "+1m", Text: "again"})
	now.Add(2 * time.Minute)
	r.s.RunDue(t.Context())
	if got := strings.Count(logBuf.String(), "no paired chat"); got != 2 {
		t.Fatalf("after a delivery and a revoke, said %d times", got)
	}
}
