package budget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/budget"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

// fakeUsage answers from fixed totals, or fails.
type fakeUsage struct {
	all, conv store.UsageTotals
	since     []time.Time
	err       error
}

func (f *fakeUsage) UsageSince(_ context.Context, since time.Time) (store.UsageTotals, error) {
	f.since = append(f.since, since)
	return f.all, f.err
}

func (f *fakeUsage) ConversationUsageSince(_ context.Context, _ string, since time.Time) (store.UsageTotals, error) {
	f.since = append(f.since, since)
	return f.conv, f.err
}

func TestReserve(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	now := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC) // 03:30 in Paris, the day summer time starts
	planned := agent.Planned{PromptTokens: 400, AnswerTokens: 100, CostMicroUSD: 2000, TurnTokens: 1000}
	job := budget.WithJob(context.Background(), budget.Job{ID: "j_1", Conversation: "c_1"})
	cases := []struct {
		name string
		caps config.Budget
		ctx  context.Context
		use  fakeUsage
		cap  string // "" = allowed
	}{
		{"no caps", config.Budget{}, context.Background(), fakeUsage{}, ""},
		{"turn", config.Budget{TokensPerTurn: 1499}, context.Background(), fakeUsage{}, budget.TokensPerTurn},
		{"turn fits", config.Budget{TokensPerTurn: 1500}, context.Background(), fakeUsage{}, ""},
		{"day", config.Budget{TokensPerDay: 10_000}, context.Background(), fakeUsage{all: store.UsageTotals{PromptTokens: 9000, CompletionTokens: 501}}, budget.TokensPerDay},
		{"month in dollars", config.Budget{USDPerMonth: 1}, context.Background(), fakeUsage{all: store.UsageTotals{CostMicroUSD: 999_000}}, budget.USDPerMonth},
		{"job", config.Budget{TokensPerJobPerDay: 5000}, job, fakeUsage{conv: store.UsageTotals{PromptTokens: 4600}}, budget.TokensPerJobPerDay},
		{"job cap on a turn that is no job's", config.Budget{TokensPerJobPerDay: 5000}, context.Background(), fakeUsage{conv: store.UsageTotals{PromptTokens: 4600}}, ""},
		{"fail closed", config.Budget{TokensPerDay: 10_000}, context.Background(), fakeUsage{err: errors.New("disk on fire")}, "closed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := c.use
			m := budget.New(budget.Options{Usage: &u, Caps: func() config.Budget { return c.caps }, Location: paris, Now: func() time.Time { return now }})
			done, err := m.Reserve(c.ctx, planned)
			switch {
			case c.cap == "":
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				done()
			case c.cap == "closed":
				if err == nil || errs.KindOf(err) != errs.KindUnavailable {
					t.Fatalf("a store that fails: %v", err)
				}
			default:
				var be *budget.Error
				if !errors.As(err, &be) || be.Cap != c.cap || !errors.Is(err, agent.ErrOverBudget) || errs.KindOf(err) != errs.KindFuelExhausted {
					t.Fatalf("err = %v, want cap %s", err, c.cap)
				}
			}
			for _, s := range u.since {
				if d := s.In(paris); d.Hour() != 0 || d.Minute() != 0 || (d.Day() != 29 && d.Day() != 1) {
					t.Errorf("window starts at %v", d)
				}
			}
		})
	}
}

// TestInFlightCounts: two requests checked before either is recorded
// cannot both take the last of a cap.
func TestInFlightCounts(t *testing.T) {
	m := budget.New(budget.Options{Usage: &fakeUsage{}, Caps: func() config.Budget { return config.Budget{TokensPerDay: 1000} }})
	p := agent.Planned{PromptTokens: 300, AnswerTokens: 200}
	done, err := m.Reserve(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(context.Background(), agent.Planned{PromptTokens: 301, AnswerTokens: 200}); err == nil {
		t.Fatal("a second request over what is left was allowed")
	}
	done()
	if _, err := m.Reserve(context.Background(), agent.Planned{PromptTokens: 301, AnswerTokens: 200}); err != nil {
		t.Fatalf("after the first was recorded: %v", err)
	}
}
