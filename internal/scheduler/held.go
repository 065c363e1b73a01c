package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/store"
)

// Held approvals. A scheduled turn has nobody to ask while it runs: a call
// whose policy asks (always, once; a network call after a private read) is
// held. The question goes to the page (every connection may answer it) and
// to the paired channel (HeldAsker), the model is told at once that the call
// waits for approval, and the turn goes on without it. The call itself stays
// inside the gate, prepared as it was asked about, for up to HoldFor: if the
// owner approves, that prepared call runs (the gate's own binding of an
// answer to the module and arguments holds), and what became of it is told
// in the job's conversation and as a notification. trust runs at once, as
// elsewhere. The gate is the process's one gate (built by cmd's newGate with
// this Asker and a timeout of HoldFor).

// ErrHeld is matched (errors.Is) by the error a scheduled turn's held call
// returns to the model.
var ErrHeld = errors.New("waiting for approval")

// hold is the signal between a held call's Invoke and its Asker.
type hold struct {
	once sync.Once
	id   chan string
}

type holdKey struct{}

// heldCount counts a run's held calls (its status says so).
type heldCount struct{ v atomic.Int64 }

func (h *heldCount) n() int64 { return h.v.Load() }

type heldCountKey struct{}

// Asker is the approval.Asker of the scheduler's gate: it asks on the page
// and the paired channel and tells the waiting Invoke that its call is held.
func (s *Scheduler) Asker() approval.Asker {
	return approval.AskerFunc(s.ask)
}

func (s *Scheduler) ask(ctx context.Context, req approval.Request) (bool, error) {
	if s.opts.Page == nil {
		return false, errors.New("nobody to ask: a scheduled turn's approvals are asked on buddy serve's page")
	}
	j, _ := ctx.Value(runKey{}).(store.Job)
	h, _ := ctx.Value(holdKey{}).(*hold)
	return s.opts.Page.AskHeld(ctx, req, func(id string) {
		if c, ok := ctx.Value(heldCountKey{}).(*heldCount); ok {
			c.v.Add(1)
		}
		if h != nil {
			h.once.Do(func() { h.id <- id })
		}
		s.log.Info("a scheduled turn's call is held for approval", "job", j.ID, "approval", id, "skill", req.Skill)
		s.notify(ctx, Notification{JobID: j.ID, Kind: j.Kind, ConversationID: req.Conversation, ApprovalID: id,
			DueAt: j.NextRun.UTC(),
			Text:  fmt.Sprintf("waiting for approval: %s wants to run (%s); answer on the page", req.Skill, req.Permission)})
		if ha, ok := s.opts.Deliverer.(HeldAsker); ok {
			err := ha.AskHeld(context.WithoutCancel(ctx), Held{ApprovalID: id, JobID: j.ID, ConversationID: req.Conversation,
				Skill: req.Skill, Permission: string(req.Permission), Arguments: req.Arguments, ArgumentsHash: req.ArgumentsHash,
				Description: approval.Describe(req, approval.DefaultWidth), Expires: req.Expires})
			if err != nil {
				s.log.Warn("asking the paired channel about a held call", "approval", id, "err", err)
			}
		}
	})
}

// Skills wraps the gate for scheduled turns: a call that is held returns
// at once with ErrHeld while it waits inside the gate. For the heartbeat,
// the schedule skill is neither offered nor callable.
func (s *Scheduler) Skills(gate catalog.Skills, heartbeat bool) catalog.Skills {
	return &heldSkills{s: s, gate: gate, heartbeat: heartbeat}
}

type heldSkills struct {
	s         *Scheduler
	gate      catalog.Skills
	heartbeat bool
}

func (h *heldSkills) List(ctx context.Context) ([]catalog.Info, error) {
	infos, err := h.gate.List(ctx)
	if err != nil || !h.heartbeat {
		return infos, err
	}
	out := infos[:0:0]
	for _, i := range infos {
		if i.Name != ScheduleSkill {
			out = append(out, i)
		}
	}
	return out, nil
}

func (h *heldSkills) Lookup(ctx context.Context, name string) (catalog.Info, error) {
	if h.heartbeat && name == ScheduleSkill {
		return catalog.Info{}, errs.New(errs.ErrNotFound, "the heartbeat cannot schedule jobs")
	}
	return h.gate.Lookup(ctx, name)
}

type invoked struct {
	res *catalog.Result
	err error
}

func (h *heldSkills) Invoke(ctx context.Context, call catalog.Call) (*catalog.Result, error) {
	if h.heartbeat && call.Skill == ScheduleSkill {
		return nil, errs.New(errs.ErrForbidden, "the heartbeat cannot schedule jobs")
	}
	if h.heartbeat {
		ctx = context.WithValue(ctx, fromHeartbeatKey{}, true)
	}
	hd := &hold{id: make(chan string, 1)}
	// The call may outlive the turn (held): it runs under the scheduler's
	// lifetime, and the turn's end cancels it only until it is held.
	ictx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), holdKey{}, hd))
	stopScheduler := context.AfterFunc(h.s.ctx, cancel)
	var isHeld atomic.Bool
	stopTurn := context.AfterFunc(ctx, func() {
		if !isHeld.Load() {
			cancel()
		}
	})
	done := make(chan invoked, 1)
	go func() {
		res, err := h.gate.Invoke(ictx, call)
		done <- invoked{res, err}
	}()
	select {
	case o := <-done:
		stopTurn()
		stopScheduler()
		cancel()
		return o.res, o.err
	case id := <-hd.id:
		isHeld.Store(true)
		stopTurn()
		j, _ := ctx.Value(runKey{}).(store.Job)
		h.s.runs.Add(1)
		go func() {
			defer h.s.runs.Done()
			defer stopScheduler()
			defer cancel()
			h.s.afterHeld(j, call, id, <-done)
		}()
		return nil, errs.Wrap(errs.ErrDenied, fmt.Sprintf(
			"waiting for approval: %s was held (approval %s) because nobody can approve it while a scheduled turn runs; "+
				"the user is asked, and it runs if they approve. Do not call it again; say in your answer that it waits for approval",
			call.Skill, id), ErrHeld)
	}
}

// afterHeld tells the job's conversation and the owner what became of a
// held call once it was answered (or expired).
func (s *Scheduler) afterHeld(j store.Job, call catalog.Call, id string, o invoked) {
	var text string
	switch {
	case o.err == nil:
		text = fmt.Sprintf("%s ran after your approval (%s): %s", call.Skill, id, clip(string(o.res.Output), 2000))
	case errors.Is(o.err, errs.ErrCanceled):
		text = fmt.Sprintf("%s was not run (%s): buddy stopped before it was answered", call.Skill, id)
	default:
		text = fmt.Sprintf("%s was not run (%s): %s", call.Skill, id, o.err.Error())
	}
	conv := call.Conversation
	ctx := context.WithoutCancel(s.ctx)
	if _, err := s.opts.Store.AppendMessage(ctx, store.Message{Conversation: conv, Role: store.RoleAssistant, Text: text}); err != nil {
		s.log.Error("storing what became of a held call", "approval", id, "err", err)
	}
	s.notify(ctx, Notification{JobID: j.ID, Kind: j.Kind, ConversationID: conv, Text: text, DueAt: j.NextRun.UTC()})
}
