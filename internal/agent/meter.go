package agent

import (
	"context"
	"errors"
)

// LLM fuel: every model request is checked against the budget before it is
// sent (Options.Meter), as every skill call is metered with fuel. The check
// counts the worst the request can cost: its prompt as the context budget
// estimates it (calibrated by the provider's own figures) plus the answer's
// reserve ([provider] max_tokens, or the share of the window kept for the
// answer). A refusal ends the turn before the request, with an error that
// wraps ErrOverBudget; the meter says which cap and why.

// ErrOverBudget is wrapped by a Meter's refusal.
var ErrOverBudget = errors.New("over budget")

// Meter is asked before every model request (a turn's, a summary's).
type Meter interface {
	// Reserve allows the planned request or refuses it with an error
	// wrapping ErrOverBudget (or any error: a meter that cannot tell
	// refuses). An allowed request's reservation holds until done is
	// called, once its usage is recorded or it failed.
	Reserve(ctx context.Context, p Planned) (done func(), err error)
}

// Planned is a request about to be sent, as the meter sees it.
type Planned struct {
	Conversation string
	Purpose      string // store.UsageTurn or store.UsageSummary
	Model        string
	// PromptTokens is the request's estimated size; AnswerTokens the
	// answer's reserve. Tokens is their sum: the most it may cost.
	PromptTokens, AnswerTokens int64
	// CostMicroUSD is what Tokens cost at [provider] prices (0 unset).
	CostMicroUSD int64
	// TurnTokens and TurnCostMicroUSD are what the turn has spent so far.
	TurnTokens       int64
	TurnCostMicroUSD int64
}

// Tokens is the most the request may cost, in tokens.
func (p Planned) Tokens() int64 { return p.PromptTokens + p.AnswerTokens }

// reserve asks the meter, if any, about a request of about prompt tokens.
func (a *Agent) reserve(ctx context.Context, conversation, purpose string, prompt int, b budget, out *Outcome) (func(), error) {
	if a.opts.Meter == nil {
		return func() {}, nil
	}
	p := Planned{Conversation: conversation, Purpose: purpose, Model: a.opts.Model,
		PromptTokens: int64(prompt), AnswerTokens: int64(b.reserve),
		TurnTokens:       out.Usage.PromptTokens + out.Usage.CompletionTokens,
		TurnCostMicroUSD: int64(out.Usage.CostUSD*1e6 + 0.5)}
	p.CostMicroUSD = int64(float64(p.PromptTokens)*a.opts.PriceInPerMTok + float64(p.AnswerTokens)*a.opts.PriceOutPerMTok)
	done, err := a.opts.Meter.Reserve(ctx, p)
	if err != nil {
		return nil, err
	}
	if done == nil {
		done = func() {}
	}
	return done, nil
}
