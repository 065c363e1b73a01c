// Package budget is LLM fuel: the [budget] caps on what the model may
// spend, checked before every model request (agent.Meter), failing closed.
//
//	m := budget.New(budget.Options{Usage: st, Caps: func() config.Budget { return cfg.Budget }, Location: loc})
//	a := agent.New(agent.Options{..., Meter: m})
//	ctx = budget.WithJob(ctx, budget.Job{ID: "j_…", Conversation: "c_…"}) // a scheduled job's turn
//	rep, err := m.Report(ctx) // today's and this month's spend against each cap
//
// A request is counted at the most it may cost: its prompt as the agent
// estimates it plus the answer's reserve (agent.Planned). It is allowed
// only if, for every cap set, what was spent in the cap's window (the
// usage rows of the store: the providers' own figures), plus the requests
// in flight, plus this one, stays within it:
//
//   - tokens_per_turn, usd_per_turn: the turn so far;
//   - tokens_per_job_per_day, usd_per_job_per_day: the job's conversation
//     since midnight (a scheduled job's turns only);
//   - tokens_per_day, usd_per_day: every request since midnight;
//   - tokens_per_month, usd_per_month: every request since the first of
//     the month.
//
// Days and months are the calendar's in Options.Location ([scheduler]
// timezone). A refusal is an *Error (errs.ErrFuelExhausted,
// agent.ErrOverBudget) naming the cap, what was spent and when its period
// ends; a store that cannot say what was spent refuses too.
package budget

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

var _ agent.Meter = (*Meter)(nil)

// Usage is what the meter reads of the store.
type Usage interface {
	UsageSince(ctx context.Context, since time.Time) (store.UsageTotals, error)
	ConversationUsageSince(ctx context.Context, conversation string, since time.Time) (store.UsageTotals, error)
}

// Options configure a Meter.
type Options struct {
	Usage Usage
	// Caps returns [budget] as it is now (a reload applies to the next
	// request).
	Caps func() config.Budget
	// Location is where days and months are counted; nil = time.Local.
	Location *time.Location
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Meter checks requests against the caps.
type Meter struct {
	opts Options

	mu       sync.Mutex
	inflight map[*reservation]struct{}
}

type reservation struct {
	job    string
	tokens int64
	cost   int64
}

// New returns a meter.
func New(opts Options) *Meter {
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Caps == nil {
		opts.Caps = func() config.Budget { return config.Budget{} }
	}
	return &Meter{opts: opts, inflight: map[*reservation]struct{}{}}
}

// Job is the scheduled job a turn runs for.
type Job struct {
	ID           string
	Conversation string
}

type jobKey struct{}

// WithJob marks ctx's model requests as a scheduled job's: the per-job caps
// apply to them.
func WithJob(ctx context.Context, j Job) context.Context { return context.WithValue(ctx, jobKey{}, j) }

// JobOf is the job WithJob put in ctx.
func JobOf(ctx context.Context) (Job, bool) {
	j, ok := ctx.Value(jobKey{}).(Job)
	return j, ok
}

// Caps, by name (the [budget] keys).
const (
	TokensPerTurn      = "tokens_per_turn"
	TokensPerJobPerDay = "tokens_per_job_per_day"
	TokensPerDay       = "tokens_per_day"
	TokensPerMonth     = "tokens_per_month"
	USDPerTurn         = "usd_per_turn"
	USDPerJobPerDay    = "usd_per_job_per_day"
	USDPerDay          = "usd_per_day"
	USDPerMonth        = "usd_per_month"
)

// Error is a refusal: Cap would be passed.
type Error struct {
	Cap   string  // the [budget] key
	Limit float64 // its value (tokens, or dollars)
	// Spent is what its window had spent (in flight included), Planned
	// the most this request may cost, in the cap's unit.
	Spent, Planned float64
	// Until is when its window ends (zero for a turn's cap).
	Until time.Time
}

// Error says which cap, what was spent, and when it may run again.
func (e *Error) Error() string {
	unit := func(v float64) string {
		if dollars(e.Cap) {
			return fmt.Sprintf("$%.4f", v)
		}
		return fmt.Sprintf("%.0f tokens", v)
	}
	what := map[string]string{
		TokensPerTurn: "this turn", USDPerTurn: "this turn",
		TokensPerJobPerDay: "this job today", USDPerJobPerDay: "this job today",
		TokensPerDay: "buddy today", USDPerDay: "buddy today",
		TokensPerMonth: "buddy this month", USDPerMonth: "buddy this month",
	}[e.Cap]
	msg := fmt.Sprintf("over budget: [budget] %s is %s and %s has spent %s; the next model request could take up to %s more (its prompt and the answer's reserve), so it was not sent",
		e.Cap, unit(e.Limit), what, unit(e.Spent), unit(e.Planned))
	if !e.Until.IsZero() {
		msg += fmt.Sprintf(". It may run again from %s, or once %s is raised", e.Until.Format("2006-01-02 15:04 MST"), e.Cap)
	}
	return msg
}

// Unwrap makes the refusal match errs.ErrFuelExhausted and
// agent.ErrOverBudget.
func (e *Error) Unwrap() []error { return []error{errs.ErrFuelExhausted, agent.ErrOverBudget} }

func dollars(cap string) bool {
	switch cap {
	case USDPerTurn, USDPerJobPerDay, USDPerDay, USDPerMonth:
		return true
	}
	return false
}

// Limit is the value of a cap in caps (0: none).
func Limit(caps config.Budget, cap string) float64 {
	switch cap {
	case TokensPerTurn:
		return float64(caps.TokensPerTurn)
	case TokensPerJobPerDay:
		return float64(caps.TokensPerJobPerDay)
	case TokensPerDay:
		return float64(caps.TokensPerDay)
	case TokensPerMonth:
		return float64(caps.TokensPerMonth)
	case USDPerTurn:
		return caps.USDPerTurn
	case USDPerJobPerDay:
		return caps.USDPerJobPerDay
	case USDPerDay:
		return caps.USDPerDay
	case USDPerMonth:
		return caps.USDPerMonth
	}
	return 0
}

// DayStart is the start of t's day in loc; MonthStart of its month.
func DayStart(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
}

// MonthStart is the start of t's month in loc.
func MonthStart(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), 1, 0, 0, 0, 0, loc)
}

// Reserve allows p or refuses it (agent.Meter).
func (m *Meter) Reserve(ctx context.Context, p agent.Planned) (func(), error) {
	caps := m.opts.Caps()
	now := m.opts.Now()
	job, isJob := JobOf(ctx)
	tokens, cost := float64(p.Tokens()), float64(p.CostMicroUSD)/1e6
	check := func(cap string, spent, planned float64, until time.Time) error {
		limit := Limit(caps, cap)
		if limit > 0 && spent+planned > limit {
			return &Error{Cap: cap, Limit: limit, Spent: spent, Planned: planned, Until: until}
		}
		return nil
	}
	if err := check(TokensPerTurn, float64(p.TurnTokens), tokens, time.Time{}); err != nil {
		return nil, err
	}
	if err := check(USDPerTurn, float64(p.TurnCostMicroUSD)/1e6, cost, time.Time{}); err != nil {
		return nil, err
	}
	day, month := DayStart(now, m.opts.Location), MonthStart(now, m.opts.Location)
	nextDay, nextMonth := day.AddDate(0, 0, 1), month.AddDate(0, 1, 0)
	windows := []struct {
		tok, usd string
		since    time.Time
		until    time.Time
		job      bool
	}{
		{TokensPerJobPerDay, USDPerJobPerDay, day, nextDay, true},
		{TokensPerDay, USDPerDay, day, nextDay, false},
		{TokensPerMonth, USDPerMonth, month, nextMonth, false},
	}
	r := &reservation{job: job.ID, tokens: p.Tokens(), cost: p.CostMicroUSD}
	// The store is read outside the lock; the in-flight sum and the
	// reservation are taken together under it, so that two requests
	// checked at once cannot both take the last of a cap.
	spent := make([]store.UsageTotals, len(windows))
	for i, w := range windows {
		if Limit(caps, w.tok) == 0 && Limit(caps, w.usd) == 0 || w.job && !isJob {
			continue
		}
		var t store.UsageTotals
		var err error
		if w.job {
			t, err = m.opts.Usage.ConversationUsageSince(ctx, job.Conversation, w.since)
		} else {
			t, err = m.opts.Usage.UsageSince(ctx, w.since)
		}
		if err != nil {
			// Fail closed: what cannot be counted is not spent.
			return nil, errs.Wrap(errs.ErrUnavailable, "over budget: cannot read what was spent, so no model request is sent", err)
		}
		spent[i] = t
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, w := range windows {
		if Limit(caps, w.tok) == 0 && Limit(caps, w.usd) == 0 || w.job && !isJob {
			continue
		}
		flightTok, flightCost := m.inFlight(w.job, job.ID)
		tok := float64(spent[i].PromptTokens + spent[i].CompletionTokens + flightTok)
		usd := float64(spent[i].CostMicroUSD+flightCost) / 1e6
		if err := check(w.tok, tok, tokens, w.until); err != nil {
			return nil, err
		}
		if err := check(w.usd, usd, cost, w.until); err != nil {
			return nil, err
		}
	}
	m.inflight[r] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.inflight, r)
			m.mu.Unlock()
		})
	}, nil
}

// inFlight sums the reservations open (of one job when forJob). m.mu held.
func (m *Meter) inFlight(forJob bool, job string) (tokens, cost int64) {
	for r := range m.inflight {
		if forJob && r.job != job {
			continue
		}
		tokens += r.tokens
		cost += r.cost
	}
	return tokens, cost
}

// Spend is what a window has spent, against its caps.
type Spend struct {
	Tokens int64   `json:"tokens"`
	USD    float64 `json:"usd"`
	// TokensCap and USDCap are the caps (0: none).
	TokensCap int64   `json:"tokens_cap"`
	USDCap    float64 `json:"usd_cap"`
	// Requests counts the model requests.
	Requests int64 `json:"requests"`
}

// Report is today's and this month's spend against each cap.
type Report struct {
	Day   Spend `json:"day"`
	Month Spend `json:"month"`
	// Turn and JobPerDay are the caps of one turn and of one job a day
	// (0: none); each job's spend today is listed with the job.
	TurnTokens      int64   `json:"turn_tokens_cap"`
	TurnUSD         float64 `json:"turn_usd_cap"`
	JobPerDayTokens int64   `json:"job_per_day_tokens_cap"`
	JobPerDayUSD    float64 `json:"job_per_day_usd_cap"`
	// DayStart is when "today" began ([scheduler] timezone).
	DayStart time.Time `json:"day_start"`
}

// Report reads today's and this month's spend.
func (m *Meter) Report(ctx context.Context) (Report, error) {
	caps := m.opts.Caps()
	now := m.opts.Now()
	day, month := DayStart(now, m.opts.Location), MonthStart(now, m.opts.Location)
	d, err := m.opts.Usage.UsageSince(ctx, day)
	if err != nil {
		return Report{}, err
	}
	mo, err := m.opts.Usage.UsageSince(ctx, month)
	if err != nil {
		return Report{}, err
	}
	return Report{
		Day: Spend{Tokens: d.PromptTokens + d.CompletionTokens, USD: usd(d.CostMicroUSD), Requests: d.Requests,
			TokensCap: caps.TokensPerDay, USDCap: caps.USDPerDay},
		Month: Spend{Tokens: mo.PromptTokens + mo.CompletionTokens, USD: usd(mo.CostMicroUSD), Requests: mo.Requests,
			TokensCap: caps.TokensPerMonth, USDCap: caps.USDPerMonth},
		TurnTokens: caps.TokensPerTurn, TurnUSD: caps.USDPerTurn,
		JobPerDayTokens: caps.TokensPerJobPerDay, JobPerDayUSD: caps.USDPerJobPerDay,
		DayStart: day.UTC(),
	}, nil
}

// JobSpend is what a job's conversation spent today.
func (m *Meter) JobSpend(ctx context.Context, conversation string) (Spend, error) {
	caps := m.opts.Caps()
	t, err := m.opts.Usage.ConversationUsageSince(ctx, conversation, DayStart(m.opts.Now(), m.opts.Location))
	if err != nil {
		return Spend{}, err
	}
	return Spend{Tokens: t.PromptTokens + t.CompletionTokens, USD: usd(t.CostMicroUSD), Requests: t.Requests,
		TokensCap: caps.TokensPerJobPerDay, USDCap: caps.USDPerJobPerDay}, nil
}

func usd(micro int64) float64 { return math.Round(float64(micro)) / 1e6 }
