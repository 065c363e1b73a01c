package server

import (
	"context"
	"net/http"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/budget"
	"github.com/buddy-run/buddy/internal/scheduler"
)

// Schedule is what the server needs of the scheduler (GET, POST
// /api/schedule, DELETE /api/schedule/{id}).
type Schedule interface {
	Add(ctx context.Context, sp scheduler.Spec, by string) (scheduler.Job, error)
	List(ctx context.Context) ([]scheduler.Job, error)
	Remove(ctx context.Context, id string) error
}

// Spending is today's spend against the [budget] caps (the page shows it).
type Spending interface {
	Report(ctx context.Context) (budget.Report, error)
	JobSpend(ctx context.Context, conversation string) (budget.Spend, error)
}

// notificationFrame is what a job delivers, sent to every connection.
type notificationFrame struct {
	Type           string    `json:"type"` // "notification"
	JobID          string    `json:"job_id"`
	Kind           string    `json:"kind"`
	ConversationID string    `json:"conversation_id"`
	Text           string    `json:"text"`
	DueAt          time.Time `json:"due_at"`
	ApprovalID     string    `json:"approval_id,omitempty"`
}

// Notify sends a job's notification to every connection (scheduler.Page).
func (s *Server) Notify(n scheduler.Notification) {
	s.broadcastAll(encode(notificationFrame{Type: "notification", JobID: n.JobID, Kind: n.Kind, ConversationID: n.ConversationID,
		Text: n.Text, DueAt: n.DueAt, ApprovalID: n.ApprovalID}))
}

// TurnSink is the sink of a turn the server does not run (a scheduled
// check): its frames go to the conversation's subscribers, as a send's do.
func (s *Server) TurnSink(conversation string) agent.Sink { return sink{s: s, conv: conversation} }

// scheduledJob is a job as GET /api/schedule lists it: with what its
// conversation spent today.
type scheduledJob struct {
	scheduler.Job
	SpentToday *budget.Spend `json:"spent_today,omitempty"`
}

// listSchedule is GET /api/schedule: {"jobs": [...], "budget": {...}}.
func (s *Server) listSchedule(w http.ResponseWriter, r *http.Request) {
	if s.opts.Schedule == nil {
		writeError(w, http.StatusServiceUnavailable, errs.KindUnavailable, "the scheduler is not running")
		return
	}
	jobs, err := s.opts.Schedule.List(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]scheduledJob, 0, len(jobs))
	for _, j := range jobs {
		sj := scheduledJob{Job: j}
		if s.opts.Spending != nil && j.Kind != "reminder" {
			if sp, err := s.opts.Spending.JobSpend(r.Context(), j.ConversationID); err == nil {
				sj.SpentToday = &sp
			}
		}
		out = append(out, sj)
	}
	resp := map[string]any{"jobs": out}
	if s.opts.Spending != nil {
		rep, err := s.opts.Spending.Report(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		resp["budget"] = rep
	}
	writeJSON(w, http.StatusOK, resp)
}

// addSchedule is POST /api/schedule with a scheduler.Spec: 201 and the job.
func (s *Server) addSchedule(w http.ResponseWriter, r *http.Request) {
	if s.opts.Schedule == nil {
		writeError(w, http.StatusServiceUnavailable, errs.KindUnavailable, "the scheduler is not running")
		return
	}
	var sp scheduler.Spec
	if err := decodeBody(w, r, &sp); err != nil {
		writeError(w, http.StatusBadRequest, errs.KindInvalidInput, err.Error())
		return
	}
	j, err := s.opts.Schedule.Add(r.Context(), sp, scheduler.ByAPI)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, j)
}

// removeSchedule is DELETE /api/schedule/{id}: 204.
func (s *Server) removeSchedule(w http.ResponseWriter, r *http.Request) {
	if s.opts.Schedule == nil {
		writeError(w, http.StatusServiceUnavailable, errs.KindUnavailable, "the scheduler is not running")
		return
	}
	if err := s.opts.Schedule.Remove(r.Context(), r.PathValue("id")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
