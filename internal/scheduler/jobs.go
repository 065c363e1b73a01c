package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// Job is a job as the CLI, the API and the schedule skill show it.
type Job struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// NextRun is when it is next due (null once a one-shot job has run).
	NextRun *time.Time `json:"next_run"`
	At      *time.Time `json:"at,omitempty"`
	Every   string     `json:"every,omitempty"`
	Cron    string     `json:"cron,omitempty"`
	// TimeZone is the zone a cron expression is read in.
	TimeZone       string     `json:"time_zone,omitempty"`
	Text           string     `json:"text,omitempty"`
	Prompt         string     `json:"prompt,omitempty"`
	ConversationID string     `json:"conversation_id"`
	CreatedAt      time.Time  `json:"created_at"`
	CreatedBy      string     `json:"created_by"`
	LastRun        *time.Time `json:"last_run,omitempty"`
	LastStatus     string     `json:"last_status,omitempty"`
	LastDetail     string     `json:"last_detail,omitempty"`
	Runs           int64      `json:"runs"`
	// Running is set while a process holds the job's lease.
	Running bool `json:"running,omitempty"`
	// StoppedBy names the [budget] cap that stopped the job, until when.
	StoppedBy    string     `json:"stopped_by,omitempty"`
	StoppedUntil *time.Time `json:"stopped_until,omitempty"`
}

// view is how a stored job is shown.
func (s *Scheduler) view(j store.Job, now time.Time) Job {
	v := Job{ID: j.ID, Kind: j.Kind, Cron: j.Cron, ConversationID: j.Conversation, CreatedAt: j.CreatedAt.UTC(),
		CreatedBy: j.CreatedBy, LastStatus: j.LastStatus, LastDetail: j.LastDetail, Runs: j.Runs,
		Running: j.LeaseOwner != "" && j.LeaseUntil.After(now)}
	t := func(x time.Time) *time.Time {
		if x.IsZero() {
			return nil
		}
		u := x.UTC()
		return &u
	}
	v.NextRun, v.At, v.LastRun = t(j.NextRun), t(j.At), t(j.LastRun)
	if j.Every > 0 {
		v.Every = j.Every.String()
	}
	if j.Cron != "" {
		v.TimeZone = s.opts.Location.String()
	}
	if j.Kind == store.JobReminder {
		v.Text = j.Text
	} else {
		v.Prompt = j.Text
	}
	if j.BlockedCap != "" && (j.BlockedUntil.IsZero() || now.Before(j.BlockedUntil)) {
		v.StoppedBy, v.StoppedUntil = j.BlockedCap, t(j.BlockedUntil)
	}
	return v
}

// Origins of a job (Job.CreatedBy).
const (
	ByCLI    = "cli"
	ByAPI    = "api"
	BySkill  = "skill"
	ByConfig = "config"
)

type fromHeartbeatKey struct{}

// FromHeartbeat reports whether ctx belongs to a heartbeat turn (which may
// not schedule anything).
func FromHeartbeat(ctx context.Context) bool {
	if j, ok := ctx.Value(runKey{}).(store.Job); ok && j.Kind == store.JobHeartbeat {
		return true
	}
	v, _ := ctx.Value(fromHeartbeatKey{}).(bool)
	return v
}

// Add validates a spec and stores the job with a conversation of its own.
// A bad time, duration or cron expression is errs.ErrInvalidInput and no
// job is stored.
func (s *Scheduler) Add(ctx context.Context, sp Spec, by string) (Job, error) {
	if by == BySkill && FromHeartbeat(ctx) {
		return Job{}, errs.New(errs.ErrForbidden, "the heartbeat cannot schedule jobs")
	}
	now := s.opts.Now()
	sc, text, err := parseSpec(sp, now, s.opts.Location)
	if err != nil {
		return Job{}, err
	}
	j := store.Job{ID: newID("j_"), Kind: sp.Kind, At: sc.at, Every: sc.every, Cron: sc.cron, Text: text,
		Conversation: newID("c_"), CreatedBy: by, CreatedAt: now, NextRun: sc.firstRun(now, s.opts.Location)}
	title := map[string]string{store.JobReminder: "Reminder: ", store.JobCheck: "Check: "}[sp.Kind] + firstLine(text, 80)
	if err := s.opts.Store.InsertJob(ctx, j, title); err != nil {
		return Job{}, fmt.Errorf("storing the job: %w", err)
	}
	s.log.Info("job added", "job", j.ID, "kind", j.Kind, "by", by, "next", j.NextRun)
	s.Changed()
	return s.view(j, now), nil
}

// List returns every job, those due first.
func (s *Scheduler) List(ctx context.Context) ([]Job, error) {
	js, err := s.opts.Store.ListJobs(ctx)
	if err != nil {
		return nil, err
	}
	now := s.opts.Now()
	out := make([]Job, 0, len(js))
	for _, j := range js {
		out = append(out, s.view(j, now))
	}
	return out, nil
}

// Get returns one job (errs.ErrNotFound when there is none).
func (s *Scheduler) Get(ctx context.Context, id string) (Job, error) {
	j, err := s.opts.Store.GetJob(ctx, id)
	if err != nil {
		return Job{}, err
	}
	return s.view(j, s.opts.Now()), nil
}

// Remove removes a job (errs.ErrNotFound when there is none); its
// conversation stays. The heartbeat is [scheduler] heartbeat's to remove.
func (s *Scheduler) Remove(ctx context.Context, id string) error {
	if id == HeartbeatID {
		return errs.New(errs.ErrInvalidInput, "the heartbeat is set by [scheduler] heartbeat in buddy.toml: remove the key (and restart buddy serve) to stop it")
	}
	if err := s.opts.Store.DeleteJob(ctx, id); err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return errs.New(errs.ErrNotFound, fmt.Sprintf("no job %q (buddy schedule list shows them)", clip(id, 80)))
		}
		return err
	}
	s.log.Info("job removed", "job", id)
	s.Changed()
	return nil
}

// SyncHeartbeat puts the heartbeat's job in place as [scheduler] heartbeat
// says (an interval kept across restarts), or removes it when it is off.
func (s *Scheduler) SyncHeartbeat(ctx context.Context) error {
	if s.opts.Heartbeat <= 0 {
		err := s.opts.Store.DeleteJob(ctx, HeartbeatID)
		if err != nil && !errors.Is(err, errs.ErrNotFound) {
			return err
		}
		return nil
	}
	now := s.opts.Now()
	conv := "c_heartbeat"
	if j, err := s.opts.Store.GetJob(ctx, HeartbeatID); err == nil && j.Conversation != "" {
		conv = j.Conversation
	}
	return s.opts.Store.PutJob(ctx, store.Job{ID: HeartbeatID, Kind: store.JobHeartbeat, Every: s.opts.Heartbeat,
		Conversation: conv, CreatedBy: ByConfig, CreatedAt: now, NextRun: now.Add(s.opts.Heartbeat)}, "Heartbeat")
}

// newID is prefix + 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// firstLine is the first line of s, cut to n bytes.
func firstLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return clip(s, n)
}
