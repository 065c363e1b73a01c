package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/audit"
	"github.com/buddy-run/buddy/internal/budget"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/scheduler"
)

// TestScheduledApprovalReachesThePage: a job added over HTTP runs a check
// whose model calls write_file; the call is held and its approval_request
// reaches a page connection that watches no conversation, with a
// notification; the page approves, and the write happens and is told.
// GET /api/schedule lists the job and today's spend; DELETE removes it.
func TestScheduledApprovalReachesThePage(t *testing.T) {
	var sched *scheduler.Scheduler
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var meter *budget.Meter
	s := newStack(t, stackOpts{server: func(o *server.Options) {
		o.Schedule = scheduleProxy{&sched}
		o.Spending = spendingProxy{&meter}
	}})
	meter = budget.New(budget.Options{Usage: s.st, Caps: func() config.Budget { return config.Budget{TokensPerDay: 100_000} }, Now: clock})
	sched = scheduler.New(scheduler.Options{Store: s.st, Now: clock, Page: s.srv, Caps: func() config.Budget { return config.Budget{} }})
	t.Cleanup(func() { _ = sched.Close(context.Background()) })
	gate := approval.New(s.live, approval.Options{Asker: sched.Asker(), Settings: approval.Fixed(approval.Settings{Timeout: scheduler.HoldFor}),
		Record: audit.Recorder(s.st, nil)})
	steps := 0
	prov := agent.ProviderFunc(func(_ context.Context, req agent.Request, onText func(string)) (*agent.Response, error) {
		mu.Lock()
		steps++
		n := steps
		mu.Unlock()
		if n == 1 {
			return &agent.Response{StopReason: "tool_calls", ToolCalls: []agent.ToolCall{{ID: "c1", Name: "write_file",
				Arguments: `{"path":"report.txt","content":"the build is red"}`}}}, nil
		}
		onText("The report waits for your approval.")
		return &agent.Response{Text: "The report waits for your approval.", StopReason: "stop"}, nil
	})
	a := agent.New(agent.Options{Provider: prov, Skills: sched.Skills(gate, false), History: s.st, Usage: s.st, Meter: meter})
	sched.SetAgents(a, nil)

	page := s.dial(t)
	code, body := s.request(t, "POST", "/api/schedule", map[string]any{"kind": "check", "at": "+1h", "prompt": "write the report"}, nil)
	if code != http.StatusCreated {
		t.Fatalf("POST /api/schedule = %d %s", code, body)
	}
	var job scheduler.Job
	if err := json.Unmarshal(body, &job); err != nil || job.ID == "" || job.Kind != "check" || job.NextRun == nil {
		t.Fatalf("job = %s (%v)", body, err)
	}
	if code, body := s.request(t, "POST", "/api/schedule", map[string]any{"kind": "check", "cron": "61 * * * *", "prompt": "x"}, nil); code != http.StatusBadRequest {
		t.Fatalf("a bad cron: %d %s", code, body)
	} else if kind, _ := apiError(t, body); kind != "invalid_input" {
		t.Fatalf("kind %q", kind)
	}
	var list struct {
		Jobs []struct {
			ID         string        `json:"id"`
			SpentToday *budget.Spend `json:"spent_today"`
		} `json:"jobs"`
		Budget budget.Report `json:"budget"`
	}
	s.getJSON(t, "/api/schedule", &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != job.ID || list.Jobs[0].SpentToday == nil || list.Budget.Day.TokensCap != 100_000 {
		t.Fatalf("GET /api/schedule = %+v", list)
	}

	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if n := sched.RunDue(t.Context()); n != 1 {
		t.Fatalf("%d runs", n)
	}
	var req, held frame
	for req == nil || held == nil {
		f := page.next()
		switch f.typ() {
		case "approval_request":
			req = f
		case "notification":
			if f.str("approval_id") != "" {
				held = f
			}
		}
	}
	if req.str("skill_name") != "write_file" || req.str("conversation_id") != job.ConversationID || held.str("approval_id") != req.str("id") ||
		held.str("job_id") != job.ID || held.str("kind") != "check" {
		t.Fatalf("approval_request %v, notification %v", req, held)
	}
	if _, err := os.Stat(filepath.Join(s.scratch, "report.txt")); err == nil {
		t.Fatal("written before the approval")
	}
	page.send(map[string]any{"type": "approve", "approval_id": req.str("id"), "approved": true, "arguments_hash": req.str("arguments_hash")})
	var ran frame
	for ran == nil {
		f := page.next()
		if f.typ() == "notification" && strings.HasPrefix(f.str("text"), "write_file ") {
			ran = f
		}
	}
	if data, err := os.ReadFile(filepath.Join(s.scratch, "report.txt")); err != nil || string(data) != "the build is red" {
		t.Fatalf("report.txt = %q, %v (notification %v)", data, err, ran)
	}

	if code, body := s.request(t, "DELETE", "/api/schedule/"+job.ID, nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	if code, body := s.request(t, "DELETE", "/api/schedule/"+job.ID, nil, nil); code != http.StatusNotFound {
		t.Fatalf("DELETE again = %d %s", code, body)
	}
}

// scheduleProxy and spendingProxy let the server be built before the
// scheduler that needs it.
type scheduleProxy struct{ s **scheduler.Scheduler }

func (p scheduleProxy) Add(ctx context.Context, sp scheduler.Spec, by string) (scheduler.Job, error) {
	return (*p.s).Add(ctx, sp, by)
}
func (p scheduleProxy) List(ctx context.Context) ([]scheduler.Job, error) { return (*p.s).List(ctx) }
func (p scheduleProxy) Remove(ctx context.Context, id string) error       { return (*p.s).Remove(ctx, id) }

type spendingProxy struct{ m **budget.Meter }

func (p spendingProxy) Report(ctx context.Context) (budget.Report, error) { return (*p.m).Report(ctx) }
func (p spendingProxy) JobSpend(ctx context.Context, conv string) (budget.Spend, error) {
	return (*p.m).JobSpend(ctx, conv)
}
