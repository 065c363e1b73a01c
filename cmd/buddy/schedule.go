package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/budget"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/scheduler"
)

// schedule is `buddy schedule add|list|rm`: jobs in the database, whether
// or not buddy serve runs (a running one sees them within a second).
func (a *app) schedule(ctx context.Context, args []string) error {
	return a.subcommand(ctx, verbs{cmd: "schedule", listed: "add, list, rm", run: map[string]func(context.Context, []string) error{
		"add": a.scheduleAdd, "list": a.scheduleList, "rm": a.scheduleRemove, "remove": a.scheduleRemove,
	}}, args)
}

// scheduleEnv opens the store and a scheduler over it that runs nothing.
func (a *app) scheduleEnv(ctx context.Context, configPath string) (*env, *scheduler.Scheduler, error) {
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return nil, nil, err
	}
	s, err := e.newScheduler(slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		_ = e.Close(ctx)
		return nil, nil, err
	}
	return e, s, nil
}

func (a *app) scheduleAdd(ctx context.Context, args []string) (err error) {
	var sp scheduler.Spec
	var asJSON bool
	pos, configPath, err := parseCommand("schedule add", args, 1, "reminder --at TIME --text TEXT | check (--at TIME | --every DURATION | --cron EXPR) --prompt TEXT [--json]", func(fs *flag.FlagSet) {
		fs.StringVar(&sp.At, "at", "", "when: RFC 3339 (2026-12-01T08:00:00+01:00) or +DURATION from now (+90m)")
		fs.StringVar(&sp.Every, "every", "", "a check's interval (30m, 24h)")
		fs.StringVar(&sp.Cron, "cron", "", `a check's cron expression, in [scheduler] timezone ("0 8 * * 1-5")`)
		fs.StringVar(&sp.Text, "text", "", "a reminder's text, delivered verbatim")
		fs.StringVar(&sp.Prompt, "prompt", "", "a check's prompt, run as an agent turn")
		fs.BoolVar(&asJSON, "json", false, "print the job as JSON")
	})
	if err != nil {
		return err
	}
	sp.Kind = pos[0]
	e, s, err := a.scheduleEnv(ctx, configPath)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	j, err := s.Add(ctx, sp, scheduler.ByCLI)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.stdout, j)
	}
	fmt.Fprintf(a.stdout, "%s: %s, next %s\n", j.ID, j.Kind, nextText(j))
	return nil
}

func (a *app) scheduleList(ctx context.Context, args []string) (err error) {
	var asJSON bool
	_, configPath, err := parseCommand("schedule list", args, 0, "[--json]", func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, `print {"jobs":[...]}`)
	})
	if err != nil {
		return err
	}
	e, s, err := a.scheduleEnv(ctx, configPath)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	jobs, err := s.List(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if jobs == nil {
			jobs = []scheduler.Job{}
		}
		return writeJSON(a.stdout, map[string]any{"jobs": jobs})
	}
	if len(jobs) == 0 {
		fmt.Fprintln(a.stdout, "no jobs")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tWHEN\tNEXT\tLAST\tTEXT")
	for _, j := range jobs {
		when := j.Every
		switch {
		case j.Cron != "":
			when = "cron " + j.Cron
		case j.At != nil:
			when = "at " + j.At.Format(time.RFC3339)
		case when != "":
			when = "every " + when
		}
		text := j.Text
		if text == "" {
			text = j.Prompt
		}
		last := orDash(j.LastStatus)
		if j.StoppedBy != "" {
			last = "stopped by " + j.StoppedBy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safe(j.ID), j.Kind, safe(orDash(when)), nextText(j), safe(last), safe(clipRunes(firstLine(text), 60)))
	}
	return tw.Flush()
}

func (a *app) scheduleRemove(ctx context.Context, args []string) (err error) {
	pos, configPath, err := parseCommand("schedule rm", args, 1, "ID", nil)
	if err != nil {
		return err
	}
	e, s, err := a.scheduleEnv(ctx, configPath)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	if err := s.Remove(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "removed %s\n", safe(pos[0]))
	return nil
}

func nextText(j scheduler.Job) string {
	if j.NextRun == nil {
		return "-"
	}
	return j.NextRun.Local().Format(time.RFC3339)
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// newMeter is the process's LLM fuel meter: [budget] as it is now, days in
// [scheduler] timezone.
func (e *env) newMeter(loc *time.Location) *budget.Meter {
	return budget.New(budget.Options{Usage: e.st, Caps: func() config.Budget { return e.config().Budget }, Location: loc})
}

// newScheduler builds the scheduler of the configuration; page and
// deliverer may be nil (the CLI: nothing runs).
func (e *env) newScheduler(log *slog.Logger, page scheduler.Page, deliverer scheduler.Deliverer) (*scheduler.Scheduler, error) {
	loc, err := e.cfg.Scheduler.Location()
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "scheduler.timezone", err)
	}
	return scheduler.New(scheduler.Options{
		Store: e.st, Location: loc, Heartbeat: e.cfg.Scheduler.Heartbeat, DataDir: e.dataDir,
		Caps: func() config.Budget { return e.config().Budget }, Page: page, Deliverer: deliverer, Logger: log,
	}), nil
}

// pageProxy is the scheduler's Page before the server exists (the server
// needs the scheduler for /api/schedule, the scheduler the server for
// notifications).
type pageProxy struct {
	p atomic.Pointer[scheduler.Page]
}

func (x *pageProxy) set(p scheduler.Page) { x.p.Store(&p) }

func (x *pageProxy) Notify(n scheduler.Notification) {
	if p := x.p.Load(); p != nil {
		(*p).Notify(n)
	}
}

func (x *pageProxy) AskHeld(ctx context.Context, req approval.Request, asked func(string)) (bool, error) {
	p := x.p.Load()
	if p == nil {
		return false, errs.New(errs.ErrUnavailable, "the page is not up yet")
	}
	return (*p).AskHeld(ctx, req, asked)
}

// scheduleHost serves the schedule host function (hostfns.Jobs) with the
// scheduler in force: JSON requests of the built-in schedule skill.
type scheduleHost struct {
	s atomic.Pointer[scheduler.Scheduler]
}

func (h *scheduleHost) set(s *scheduler.Scheduler) { h.s.Store(s) }

// jobsDep is the env's hostfns.Jobs, nil without a store.
func (e *env) jobsDep() hostfns.Jobs {
	if e.jobs == nil {
		return nil
	}
	return e.jobs
}

// scheduleRequest is what the schedule skill sends (docs/HOST_ABI.md).
type scheduleRequest struct {
	Action string `json:"action"` // add, list, remove
	ID     string `json:"id"`
	scheduler.Spec
}

// Schedule answers one request: add a job (created_by "skill"), list them,
// remove one.
func (h *scheduleHost) Schedule(ctx context.Context, req []byte) ([]byte, error) {
	s := h.s.Load()
	if s == nil {
		return nil, errs.New(errs.ErrUnavailable, "the scheduler is not running")
	}
	var r scheduleRequest
	dec := json.NewDecoder(bytes.NewReader(req))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, errs.New(errs.ErrInvalidInput, "schedule: the request is not the JSON object expected: "+err.Error())
	}
	switch r.Action {
	case "add":
		j, err := s.Add(ctx, r.Spec, scheduler.BySkill)
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"job": j})
	case "list":
		jobs, err := s.List(ctx)
		if err != nil {
			return nil, err
		}
		if jobs == nil {
			jobs = []scheduler.Job{}
		}
		return json.Marshal(map[string]any{"jobs": jobs})
	case "remove":
		if err := s.Remove(ctx, r.ID); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"removed": r.ID})
	}
	return nil, errs.New(errs.ErrInvalidInput, fmt.Sprintf("schedule: action %q is not add, list or remove", clipRunes(r.Action, 40)))
}
