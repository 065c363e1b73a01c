package scheduler

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	cron "github.com/netresearch/go-cron"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// Spec is a job as a user asks for it: a reminder at a time, or a check at
// a time, at an interval or on a cron expression.
type Spec struct {
	Kind string `json:"kind"` // "reminder" or "check"
	// At is RFC 3339 ("2026-12-01T08:00:00+01:00") or "+DURATION" from now
	// ("+90m", "+2h30m").
	At string `json:"at,omitempty"`
	// Every is a Go duration ("30m", "24h"), at least MinEvery.
	Every string `json:"every,omitempty"`
	// Cron is a five-field cron expression read in the scheduler's time
	// zone ("0 8 * * 1-5"), or a descriptor (@daily, @hourly, ...).
	Cron string `json:"cron,omitempty"`
	// Text is a reminder's text, delivered verbatim.
	Text string `json:"text,omitempty"`
	// Prompt is a check's prompt, run as an agent turn.
	Prompt string `json:"prompt,omitempty"`
}

// Limits of a spec.
const (
	// MinEvery is the shortest interval of an every job.
	MinEvery = time.Minute
	// MaxTextBytes caps a reminder's text and a check's prompt.
	MaxTextBytes = 16 << 10
	// MaxAhead is how far ahead a job may first be due.
	MaxAhead = 10 * 366 * 24 * time.Hour
)

// cronParser reads standard five-field expressions and descriptors, with
// Vixie cron's rule for the two day fields (a day matches when either
// restricted field does).
var cronParser = cron.MustNewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor | cron.DowOrDom)

// schedule is a spec's timing, checked.
type schedule struct {
	at    time.Time
	every time.Duration
	cron  string
	sched cron.Schedule
}

// invalid is an invalid_input error.
func invalid(format string, args ...any) error {
	return errs.New(errs.ErrInvalidInput, fmt.Sprintf(format, args...))
}

// parseSpec checks a spec at now; it returns the job's schedule and text.
func parseSpec(sp Spec, now time.Time, loc *time.Location) (schedule, string, error) {
	var text string
	switch sp.Kind {
	case store.JobReminder:
		if sp.Prompt != "" {
			return schedule{}, "", invalid("a reminder has a text, not a prompt")
		}
		text = sp.Text
		if strings.TrimSpace(text) == "" {
			return schedule{}, "", invalid("a reminder needs a text")
		}
		if sp.Every != "" || sp.Cron != "" {
			return schedule{}, "", invalid("a reminder fires once: give it --at, not --every or --cron")
		}
	case store.JobCheck:
		if sp.Text != "" {
			return schedule{}, "", invalid("a check has a prompt, not a text")
		}
		text = sp.Prompt
		if strings.TrimSpace(text) == "" {
			return schedule{}, "", invalid("a check needs a prompt")
		}
	case "":
		return schedule{}, "", invalid(`a job needs a kind: "reminder" or "check"`)
	default:
		return schedule{}, "", invalid("%q is not a kind of job: \"reminder\" or \"check\"", clip(sp.Kind, 40))
	}
	if len(text) > MaxTextBytes {
		return schedule{}, "", invalid("the %s is %d bytes, over the %d-byte cap", map[string]string{store.JobReminder: "text", store.JobCheck: "prompt"}[sp.Kind], len(text), MaxTextBytes)
	}
	if !utf8.ValidString(text) {
		return schedule{}, "", invalid("the text is not valid UTF-8")
	}
	n := 0
	for _, s := range []string{sp.At, sp.Every, sp.Cron} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return schedule{}, "", invalid("a job needs exactly one of at, every and cron")
	}
	var s schedule
	switch {
	case sp.At != "":
		t, err := ParseTime(sp.At, now)
		if err != nil {
			return schedule{}, "", err
		}
		s.at = t
	case sp.Every != "":
		d, err := time.ParseDuration(sp.Every)
		if err != nil {
			return schedule{}, "", invalid("every %q is not a duration (like 30m, 2h or 24h)", clip(sp.Every, 40))
		}
		if d < MinEvery || d > MaxAhead {
			return schedule{}, "", invalid("every %s: an interval is from %s to %s", d, MinEvery, MaxAhead)
		}
		s.every = d
	default:
		c, err := parseCron(sp.Cron)
		if err != nil {
			return schedule{}, "", err
		}
		s.cron, s.sched = strings.TrimSpace(sp.Cron), c
		if next := cronNext(c, now, time.Time{}, loc); next.IsZero() {
			return schedule{}, "", invalid("cron %q never fires", clip(sp.Cron, 80))
		}
	}
	return s, text, nil
}

// parseCron reads a cron expression. The time zone is [scheduler]
// timezone: an expression may not carry its own.
func parseCron(expr string) (cron.Schedule, error) {
	e := strings.TrimSpace(expr)
	if e == "" {
		return nil, invalid("empty cron expression")
	}
	if len(e) > 200 {
		return nil, invalid("cron expression over 200 bytes")
	}
	up := strings.ToUpper(e)
	if strings.HasPrefix(up, "TZ=") || strings.HasPrefix(up, "CRON_TZ=") {
		return nil, invalid("cron %q names a time zone: jobs run in [scheduler] timezone", clip(e, 80))
	}
	if strings.HasPrefix(e, "@every") {
		return nil, invalid("cron %q: use every for an interval", clip(e, 80))
	}
	s, err := cronParser.Parse(e)
	if err != nil {
		return nil, invalid("cron %q is not a cron expression (minute hour day-of-month month day-of-week, like \"0 8 * * 1-5\"): %v", clip(e, 80), err)
	}
	return s, nil
}

// ParseTime reads a job's time: RFC 3339, or "+DURATION" from now.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutPrefix(s, "+"); ok {
		dur, err := time.ParseDuration(d)
		if err != nil || dur <= 0 {
			return time.Time{}, invalid("at %q: +DURATION must be a positive duration (like +10m or +2h30m)", clip(s, 40))
		}
		if dur > MaxAhead {
			return time.Time{}, invalid("at %q is more than ten years ahead", clip(s, 40))
		}
		return now.Add(dur), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, invalid("at %q is neither an RFC 3339 time (2026-12-01T08:00:00+01:00) nor +DURATION (+90m)", clip(s, 60))
	}
	if !t.After(now) {
		return time.Time{}, invalid("at %s is in the past", t.Format(time.RFC3339))
	}
	if t.Sub(now) > MaxAhead {
		return time.Time{}, invalid("at %s is more than ten years ahead", t.Format(time.RFC3339))
	}
	return t, nil
}

// cronNext is the first time after from that c fires in loc. A fall-back
// change of the clock repeats an hour; a time that would fire again at the
// same wall-clock time as prev (the run it follows) is skipped: a daily
// 01:30 runs once on that day, at its first 01:30. A time a spring-forward
// change skips fires once, as Go's calendar resolves it (02:30 → 03:30).
// It returns zero when c never fires within MaxAhead.
func cronNext(c cron.Schedule, from, prev time.Time, loc *time.Location) time.Time {
	t := from.In(loc)
	limit := from.Add(MaxAhead)
	for i := 0; i < 4; i++ {
		n := c.Next(t)
		if n.IsZero() || n.After(limit) {
			return time.Time{}
		}
		if !prev.IsZero() && sameWallClock(n, prev, loc) {
			t = n
			continue
		}
		return n
	}
	return time.Time{}
}

// sameWallClock reports whether a and b read the same minute on loc's clock.
func sameWallClock(a, b time.Time, loc *time.Location) bool {
	a, b = a.In(loc), b.In(loc)
	return a.Year() == b.Year() && a.YearDay() == b.YearDay() && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

// nextRun is when a job is due after a run that was due at due and ended
// at now (the catch-up rule: however many runs were missed, one was made;
// the next is the schedule's first after now). Zero: never (one-shot).
func nextRun(j store.Job, due, now time.Time, loc *time.Location) time.Time {
	switch {
	case j.Every > 0:
		if due.IsZero() || due.After(now) {
			return now.Add(j.Every)
		}
		// The grid the job was created on: due + k×every, the first after now.
		k := now.Sub(due)/j.Every + 1
		return due.Add(k * j.Every)
	case j.Cron != "":
		c, err := parseCron(j.Cron)
		if err != nil {
			return time.Time{}
		}
		return cronNext(c, now, due, loc)
	}
	return time.Time{}
}

// firstRun is when a new job is first due.
func (s schedule) firstRun(now time.Time, loc *time.Location) time.Time {
	switch {
	case !s.at.IsZero():
		return s.at
	case s.every > 0:
		return now.Add(s.every)
	}
	return cronNext(s.sched, now, time.Time{}, loc)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
