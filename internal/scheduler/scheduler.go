// Package scheduler runs buddy's jobs while buddy serve runs: reminders,
// checks and the heartbeat, kept in the store so that they survive a
// restart and so that the CLI can add and remove them whether or not the
// server runs.
//
//	s := scheduler.New(scheduler.Options{Store: st, Location: loc, Page: srv, Deliverer: chat})
//	gate := newGate(s.Asker())                        // held approvals (held.go)
//	s.SetAgents(newAgent(s.Skills(gate, false)), newLeanAgent(s.Skills(gate, true)))
//	job, err := s.Add(ctx, scheduler.Spec{Kind: "reminder", At: "+10m", Text: "call the plumber"}, "cli")
//	go s.Run(ctx)                                     // until ctx ends; Close waits for runs
//
// A reminder delivers its text verbatim: no model call, so nothing can judge
// it away. A check runs its prompt as an agent turn in its own conversation
// and delivers the answer when it has something to say (SomethingToSay). The
// heartbeat reads HEARTBEAT.md in the data directory and, unless it is empty
// or absent (then no model call is made), runs it as a lean turn that cannot
// schedule anything. Delivery is a Notification to the page (every
// connection), into the job's conversation, and to a paired channel
// (Deliverer) when there is one.
//
// # Runs, leases and the catch-up rule
//
// A job is due when its next_run has come. Before running it a process
// claims it (store.ClaimJob): one statement that only one process wins; the
// lease is renewed while a check runs and released when the run ends, in the
// same transaction that moves next_run on (and, for a reminder, stores its
// message). Two buddy processes on one database therefore run a job once. A
// process that dies mid-run leaves a lease that runs out (Options.Lease):
// the run is made again then — at least once, never twice at once.
//
// Runs missed while buddy was down are caught up once: a job due in the past
// runs once when buddy is back (however many runs it missed), then goes on
// on its schedule from now (an interval keeps its grid; a one-shot reminder
// is delivered late, once, its notification carrying when it was due).
//
// # Budgets
//
// A check's and the heartbeat's turns run under budget.WithJob: [budget]
// tokens_per_job_per_day applies to them, and every cap is checked before
// every model request. A run the budget stops ends at once, says why in the
// job's conversation and in the audit log, and the job does not run again
// until the cap's period ends or the cap is raised (runs skipped meanwhile
// make no model request).
package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/budget"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

// Store is what the scheduler keeps in the database (store.Store).
type Store interface {
	InsertJob(ctx context.Context, j store.Job, title string) error
	PutJob(ctx context.Context, j store.Job, title string) error
	GetJob(ctx context.Context, id string) (store.Job, error)
	ListJobs(ctx context.Context) ([]store.Job, error)
	DueJobs(ctx context.Context, now time.Time) ([]store.Job, error)
	NextDue(ctx context.Context) (time.Time, bool, error)
	DeleteJob(ctx context.Context, id string) error
	ClaimJob(ctx context.Context, id, owner string, due, now, until time.Time) (bool, error)
	RenewJobLease(ctx context.Context, id, owner string, until time.Time) error
	FinishJob(ctx context.Context, r store.JobRun) (int64, error)
	AppendMessage(ctx context.Context, m store.Message) (int64, error)
	AppendAudit(ctx context.Context, e store.AuditEntry) (int64, error)
}

// Agent runs a turn (agent.Agent).
type Agent interface {
	Turn(ctx context.Context, conversation, text string, sink agent.Sink) agent.Outcome
}

// Notification is what a job delivers: the page's notification frame, and
// what a paired channel is handed.
type Notification struct {
	JobID          string `json:"job_id"`
	Kind           string `json:"kind"` // reminder, check or heartbeat
	ConversationID string `json:"conversation_id"`
	// Text is a reminder's text verbatim, a check's answer, or what
	// happened (a held call, a stop over budget, a failure).
	Text string `json:"text"`
	// DueAt is when the run was due (a reminder delivered after a restart
	// says so by it).
	DueAt time.Time `json:"due_at"`
	// ApprovalID is set when the text says a call is held for approval.
	ApprovalID string `json:"approval_id,omitempty"`
}

// Deliverer delivers notifications to a paired channel (the chat app the
// owner uses). An error is logged; the page and the conversation have the
// notification anyway.
type Deliverer interface {
	Deliver(ctx context.Context, n Notification) error
}

// HeldAsker is implemented by a Deliverer that can also ask the owner about
// a call a scheduled turn held for approval. It shows the question and
// returns; the owner's answer comes back through the server's Answer
// (the same answer the page gives, bound to the approval id and the
// arguments' hash).
type HeldAsker interface {
	AskHeld(ctx context.Context, h Held) error
}

// Held is a call a scheduled turn held for the owner's approval.
type Held struct {
	ApprovalID     string
	JobID          string
	ConversationID string
	Skill          string
	Permission     string
	// Arguments are exactly what runs if approved; ArgumentsHash is what
	// an answer is bound to.
	Arguments     []byte
	ArgumentsHash string
	// Description is the question as approval.Describe renders it.
	Description string
	Expires     time.Time
}

// Page is the buddy page (the server): notification frames to every
// connection, and held questions asked there.
type Page interface {
	Notify(n Notification)
	// AskHeld asks about a held call on the page (an approval_request to
	// every connection, which any of them may answer) and waits for the
	// answer or ctx's end; asked is called with the approval's id once the
	// question is stored and sent.
	AskHeld(ctx context.Context, req approval.Request, asked func(id string)) (bool, error)
}

// Options configure a Scheduler.
type Options struct {
	Store Store
	// Location is the time zone of cron expressions and days
	// ([scheduler] timezone); nil = time.Local.
	Location *time.Location
	// Now is the clock; nil = time.Now. Tests give a fake one.
	Now func() time.Time
	// Owner names this process in leases; "" = a random id.
	Owner string
	// Lease is how long a claim holds without renewal; default
	// DefaultLease.
	Lease time.Duration
	// Heartbeat is [scheduler] heartbeat (0: off); DataDir holds
	// HEARTBEAT.md.
	Heartbeat time.Duration
	DataDir   string
	// Caps returns [budget] as it is now (whether a stopped job may run
	// again); nil = no caps.
	Caps func() config.Budget
	// Page and Deliverer receive notifications; either may be nil.
	Page      Page
	Deliverer Deliverer
	// Poll is how often the loop looks at the store for jobs added by
	// another process (the CLI); default DefaultPoll.
	Poll   time.Duration
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultLease = 2 * time.Minute
	DefaultPoll  = time.Second
	// HoldFor is how long a held call waits for the owner's answer.
	HoldFor = 24 * time.Hour
	// HeartbeatFile is the heartbeat's checklist, in the data directory.
	HeartbeatFile = "HEARTBEAT.md"
	// MaxHeartbeatBytes caps HEARTBEAT.md.
	MaxHeartbeatBytes = 64 << 10
	// HeartbeatID is the heartbeat's job id.
	HeartbeatID = "heartbeat"
	// ScheduleSkill is the built-in skill that creates jobs, which the
	// heartbeat may not call.
	ScheduleSkill = "schedule"
)

// Statuses of a run (Job.LastStatus).
const (
	StatusDelivered   = "delivered"        // a reminder, or a check's answer
	StatusNothing     = "nothing_to_say"   // a check with nothing to say
	StatusEmpty       = "nothing_to_check" // the heartbeat with an empty or absent HEARTBEAT.md
	StatusWaiting     = "waiting_for_approval"
	StatusOverBudget  = "over_budget"
	StatusSkipped     = "skipped_over_budget"
	StatusError       = "error"
	StatusNoProvider  = "no_provider"
	auditKindSchedule = "schedule"
)

// Scheduler runs due jobs.
type Scheduler struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context // ends runs and held calls when the scheduler closes
	cancel context.CancelFunc
	runs   sync.WaitGroup
	wake   chan struct{}
	// noOwner: the paired channel had nobody to deliver to, and it was said.
	noOwner atomic.Bool

	mu        sync.Mutex
	check     Agent
	heartbeat Agent
	running   map[string]bool // job ids running here
	sinkFor   func(conversation string) agent.Sink
}

// New returns a scheduler; nothing runs until Run (or RunDue).
func New(opts Options) *Scheduler {
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Owner == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		host, _ := os.Hostname()
		opts.Owner = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Caps == nil {
		opts.Caps = func() config.Budget { return config.Budget{} }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), running: map[string]bool{}}
}

// SetAgents gives the scheduler the agents its checks and heartbeat run on
// (built over s.Skills of the gate); nil: no provider, checks fail saying so.
func (s *Scheduler) SetAgents(check, heartbeat Agent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.check, s.heartbeat = check, heartbeat
}

// Close cancels runs in flight and held calls, and waits for them (until
// ctx ends).
func (s *Scheduler) Close(ctx context.Context) error {
	s.cancel()
	done := make(chan struct{})
	go func() { s.runs.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for scheduled runs to end: %w", ctx.Err())
	}
}

// Changed tells the loop that jobs changed (an add through the API): it
// looks at the store at once instead of at its next poll.
func (s *Scheduler) Changed() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run runs due jobs until ctx ends: it wakes at the next due time, at
// every poll (jobs another process added) and on Changed. It first puts
// the heartbeat's job in place ([scheduler] heartbeat) or removes it.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := s.SyncHeartbeat(ctx); err != nil {
		return err
	}
	for {
		// One query a poll when nothing is due (an idle server): the due
		// jobs are listed only when the earliest says it is time.
		next, ok, err := s.opts.Store.NextDue(ctx)
		if err != nil || ok && !next.After(s.opts.Now()) {
			s.runDue(ctx, false)
			next, ok, err = s.opts.Store.NextDue(ctx)
		}
		wait := s.opts.Poll
		if err == nil && ok {
			if d := next.Sub(s.opts.Now()); d < wait {
				wait = max(d, 0)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.ctx.Done():
			t.Stop()
			return nil
		case <-s.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// RunDue runs the jobs due now and waits for their runs to end (tests, and
// a process that wants one pass). It returns how many it ran.
func (s *Scheduler) RunDue(ctx context.Context) int {
	return s.runDue(ctx, true)
}

func (s *Scheduler) runDue(ctx context.Context, wait bool) int {
	now := s.opts.Now()
	due, err := s.opts.Store.DueJobs(ctx, now)
	if err != nil {
		s.log.Error("reading due jobs", "err", err)
		return 0
	}
	var wg sync.WaitGroup
	n := 0
	for _, j := range due {
		s.mu.Lock()
		busy := s.running[j.ID]
		s.mu.Unlock()
		if busy {
			continue
		}
		ok, err := s.opts.Store.ClaimJob(ctx, j.ID, s.opts.Owner, j.NextRun, now, now.Add(s.opts.Lease))
		if err != nil {
			s.log.Error("claiming a job", "job", j.ID, "err", err)
			continue
		}
		if !ok {
			continue // another process has it
		}
		n++
		s.mu.Lock()
		s.running[j.ID] = true
		s.mu.Unlock()
		s.runs.Add(1)
		wg.Add(1)
		go func() {
			defer s.runs.Done()
			defer wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.running, j.ID)
				s.mu.Unlock()
			}()
			s.run(j, now)
		}()
	}
	if wait {
		wg.Wait()
	}
	return n
}

// runKey carries the job a turn runs for (held.go reads it).
type runKey struct{}

// run makes one run of a job this process claimed.
func (s *Scheduler) run(j store.Job, now time.Time) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	ctx = context.WithValue(ctx, runKey{}, j)
	stop := s.keepLease(ctx, j)
	defer stop()
	late := now.Sub(j.NextRun)
	s.log.Info("job due", "job", j.ID, "kind", j.Kind, "due", j.NextRun, "late", late.Round(time.Second))
	var r store.JobRun
	var notes []Notification
	switch j.Kind {
	case store.JobReminder:
		r, notes = s.remind(j)
	case store.JobCheck, store.JobHeartbeat:
		r, notes = s.turn(ctx, j)
	default:
		r = store.JobRun{Status: StatusError, Detail: "unknown kind " + j.Kind}
	}
	r.ID, r.Owner = j.ID, s.opts.Owner
	r.Ran = s.opts.Now()
	if r.Status != StatusSkipped || r.NextRun.IsZero() {
		r.NextRun = nextRun(j, j.NextRun, r.Ran, s.opts.Location)
	}
	if _, err := s.opts.Store.FinishJob(context.WithoutCancel(ctx), r); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			s.log.Warn("a job's run ended after its lease was lost (removed, or taken over): nothing delivered", "job", j.ID, "err", err)
			return
		}
		s.log.Error("recording a job's run", "job", j.ID, "err", err)
		return
	}
	s.log.Info("job ran", "job", j.ID, "kind", j.Kind, "status", r.Status, "next", r.NextRun)
	for _, n := range notes {
		s.notify(ctx, n)
	}
}

// keepLease renews the claim on j while its run lasts.
func (s *Scheduler) keepLease(ctx context.Context, j store.Job) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.opts.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.opts.Store.RenewJobLease(ctx, j.ID, s.opts.Owner, s.opts.Now().Add(s.opts.Lease)); err != nil {
					s.log.Warn("renewing a job's lease", "job", j.ID, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// remind delivers a reminder: its text, verbatim, with no model call.
func (s *Scheduler) remind(j store.Job) (store.JobRun, []Notification) {
	return store.JobRun{
		Status: StatusDelivered, Counted: true,
		Message: &store.Message{Conversation: j.Conversation, Role: store.RoleAssistant, Text: j.Text},
	}, []Notification{{JobID: j.ID, Kind: j.Kind, ConversationID: j.Conversation, Text: j.Text, DueAt: j.NextRun.UTC()}}
}

// notify delivers n to the page and the paired channel.
func (s *Scheduler) notify(ctx context.Context, n Notification) {
	if s.opts.Page != nil {
		s.opts.Page.Notify(n)
	}
	if s.opts.Deliverer != nil {
		err := s.opts.Deliverer.Deliver(context.WithoutCancel(ctx), n)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			// Nobody is paired: said once, not at every notification,
			// until a delivery gets through again.
			if s.noOwner.CompareAndSwap(false, true) {
				s.log.Warn("no paired chat: notifications reach the page only until one is paired (buddy pair list)", "err", err)
			}
		case err != nil:
			s.log.Warn("delivering a notification to the paired channel", "job", n.JobID, "err", err)
		default:
			s.noOwner.Store(false)
		}
	}
}

// NothingToSay is what a scheduled turn answers when the owner need not be
// told anything (SomethingToSay).
const NothingToSay = "NOTHING_TO_SAY"

// scheduledPrompt is added to the system prompt of scheduled turns.
const scheduledPrompt = "\n\nThis turn was started by a schedule, not by the user, who is not watching. " +
	"Do what the message asks. If the result is something the user needs to know now, answer with it, briefly. " +
	"If there is nothing worth telling the user, answer exactly " + NothingToSay + " and nothing else. " +
	"Nobody can approve a call now: a call that needs approval is held and the user is asked later; do not call it again."

// SystemPrompt is the system prompt of scheduled turns: base, and the rule
// that lets a turn stay silent.
func SystemPrompt(base string) string {
	if base == "" {
		base = agent.DefaultSystemPrompt
	}
	return base + scheduledPrompt
}

// HeartbeatPrompt is the heartbeat's lean system prompt.
const HeartbeatPrompt = "You are buddy's heartbeat, a personal assistant's periodic look at the user's checklist. " +
	"Go through the checklist the user wrote; use a tool only when an item needs it."

// SomethingToSay is the rule by which a check or the heartbeat delivers its
// answer: an answer that is empty, or that is the word NOTHING_TO_SAY alone
// (in any case, with any spaces, punctuation or Markdown emphasis around
// it), says nothing; otherwise the answer is delivered, without that word if
// it starts or ends it.
func SomethingToSay(answer string) (string, bool) {
	core := strings.Trim(answer, " \t\r\n*_`.!\"'")
	if core == "" || strings.EqualFold(core, NothingToSay) {
		return "", false
	}
	t := strings.TrimSpace(answer)
	if len(t) >= len(NothingToSay) && strings.EqualFold(t[:len(NothingToSay)], NothingToSay) {
		t = t[len(NothingToSay):]
	}
	if len(t) >= len(NothingToSay) && strings.EqualFold(t[len(t)-len(NothingToSay):], NothingToSay) {
		t = t[:len(t)-len(NothingToSay)]
	}
	t = strings.Trim(t, " \t\r\n*_`")
	if strings.Trim(t, ".!:;,-") == "" {
		return "", false
	}
	return t, true
}

// turn runs a check or the heartbeat.
func (s *Scheduler) turn(ctx context.Context, j store.Job) (store.JobRun, []Notification) {
	note := func(text string) Notification {
		return Notification{JobID: j.ID, Kind: j.Kind, ConversationID: j.Conversation, Text: text, DueAt: j.NextRun.UTC()}
	}
	s.mu.Lock()
	a := s.check
	if j.Kind == store.JobHeartbeat {
		a = s.heartbeat
	}
	s.mu.Unlock()
	text := j.Text
	if j.Kind == store.JobHeartbeat {
		checklist, err := s.readHeartbeat()
		if err != nil {
			return store.JobRun{Status: StatusError, Detail: err.Error(), Counted: true}, nil
		}
		if checklist == "" {
			// Nothing to check: no model call at all.
			return store.JobRun{Status: StatusEmpty, Counted: true}, nil
		}
		text = checklist
	}
	// A job the budget stopped runs again once the cap's period ended or
	// the cap was raised; until then a run is skipped without a request.
	if j.BlockedCap != "" {
		limit := budget.Limit(s.opts.Caps(), j.BlockedCap)
		raised := limit == 0 || limit > j.BlockedLimit
		ended := !j.BlockedUntil.IsZero() && !s.opts.Now().Before(j.BlockedUntil)
		if !raised && !ended {
			return store.JobRun{Status: StatusSkipped, Detail: "stopped by [budget] " + j.BlockedCap + " until " + j.BlockedUntil.In(s.opts.Location).Format("2006-01-02 15:04 MST"),
				BlockedCap: j.BlockedCap, BlockedLimit: j.BlockedLimit, BlockedUntil: j.BlockedUntil}, nil
		}
	}
	if a == nil {
		msg := "this " + j.Kind + " cannot run: no LLM provider is configured ([provider] in buddy.toml)"
		r := store.JobRun{Status: StatusNoProvider, Detail: msg, Counted: true,
			Message: &store.Message{Conversation: j.Conversation, Role: store.RoleAssistant, Text: msg}}
		if j.LastStatus == StatusNoProvider {
			return r, nil
		}
		return r, []Notification{note(msg)}
	}
	ctx = budget.WithJob(ctx, budget.Job{ID: j.ID, Conversation: j.Conversation})
	hc := &heldCount{}
	ctx = context.WithValue(ctx, heldCountKey{}, hc)
	out := a.Turn(ctx, j.Conversation, text, s.sink(j.Conversation))
	r := store.JobRun{Counted: true}
	var be *budget.Error
	switch {
	case out.Reason == agent.ReasonError && errors.As(out.Err, &be):
		// Stopped by the budget: say why in the conversation and the
		// audit log; no more runs until the period ends or the cap rises.
		msg := "This " + j.Kind + " stopped: " + be.Error() + "."
		r.Status, r.Detail = StatusOverBudget, be.Error()
		r.Message = &store.Message{Conversation: j.Conversation, Role: store.RoleAssistant, Text: msg,
			ErrorKind: string(errs.KindFuelExhausted), ErrorDetail: be.Error()}
		if !be.Until.IsZero() {
			r.BlockedCap, r.BlockedLimit, r.BlockedUntil = be.Cap, be.Limit, be.Until
		}
		s.audit(ctx, j, "over_budget", be.Error())
		return r, []Notification{note(msg)}
	case out.Reason == agent.ReasonError, out.Reason == agent.ReasonCanceled:
		detail := "canceled"
		if out.Err != nil {
			detail = fmt.Sprintf("%s: %s", errs.KindOf(out.Err), out.Err.Error())
		}
		msg := "This " + j.Kind + " failed: " + detail
		r.Status, r.Detail = StatusError, detail
		r.Message = &store.Message{Conversation: j.Conversation, Role: store.RoleAssistant, Text: msg,
			ErrorKind: string(errs.KindOf(out.Err)), ErrorDetail: detail}
		if j.LastStatus == StatusError {
			return r, nil // said once; the conversation keeps each failure
		}
		return r, []Notification{note(msg)}
	}
	said, ok := SomethingToSay(out.Text)
	switch {
	case hc.n() > 0:
		r.Status = StatusWaiting
	case ok:
		r.Status = StatusDelivered
	default:
		r.Status = StatusNothing
	}
	if !ok {
		return r, nil
	}
	return r, []Notification{note(said)}
}

// readHeartbeat reads HEARTBEAT.md: "" when it is absent or holds only
// white space.
func (s *Scheduler) readHeartbeat() (string, error) {
	if s.opts.DataDir == "" {
		return "", nil
	}
	p := filepath.Join(s.opts.DataDir, HeartbeatFile)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > MaxHeartbeatBytes {
		return "", fmt.Errorf("%s is %d bytes, over the %d-byte cap of a checklist", p, fi.Size(), MaxHeartbeatBytes)
	}
	b := make([]byte, fi.Size())
	n, err := f.Read(b)
	if err != nil && n == 0 && fi.Size() > 0 {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return strings.TrimSpace(string(b[:n])), nil
}

// audit writes an audit row about a job.
func (s *Scheduler) audit(ctx context.Context, j store.Job, outcome, detail string) {
	_, err := s.opts.Store.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{Kind: auditKindSchedule, Conversation: j.Conversation,
		Skill: "scheduler:" + j.ID, Outcome: outcome, Detail: detail})
	if err != nil {
		s.log.Error("writing the audit log", "job", j.ID, "err", err)
	}
}

// SinkFor, when set before runs start, gives the sink a scheduled turn's
// frames go to (the server's: whoever watches the job's conversation sees
// the turn); nil discards them.
func (s *Scheduler) SinkFor(f func(conversation string) agent.Sink) {
	s.mu.Lock()
	s.sinkFor = f
	s.mu.Unlock()
}

func (s *Scheduler) sink(conversation string) agent.Sink {
	s.mu.Lock()
	f := s.sinkFor
	s.mu.Unlock()
	if f != nil {
		if k := f(conversation); k != nil {
			return k
		}
	}
	return discard{}
}

// discard is a sink that drops everything.
type discard struct{}

func (discard) Delta(string)                                                   {}
func (discard) Message(string, string)                                         {}
func (discard) ToolCall(catalog.Call)                                          {}
func (discard) ToolResult(catalog.Call, *catalog.Result, error, time.Duration) {}
