package store

import (
	"context"
	"fmt"
	"time"
)

// Usage is one model request's token figures.
type Usage struct {
	Conversation string // "" for a request outside a conversation
	Time         time.Time
	// Purpose says what the request was for: UsageTurn, UsageSummary, ...
	Purpose          string
	Model            string
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	// Reported says the provider reported the figures; otherwise they are
	// buddy's estimate.
	Reported bool
	// WindowTokens is the context window the request was sent into.
	WindowTokens int64
	CostMicroUSD int64
}

// Purposes of a model request.
const (
	UsageTurn    = "turn"    // a turn of the agent loop
	UsageSummary = "summary" // summarising earlier messages (compaction)
)

// AppendUsage records one model request. A zero Time means now. Under a
// Deferred context it returns at once and the context's wait reports the
// write.
func (s *Store) AppendUsage(ctx context.Context, u Usage) error {
	if u.Purpose == "" {
		return invalid("usage: empty purpose")
	}
	if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 || u.CostMicroUSD < 0 {
		return invalid("usage: negative figures")
	}
	if u.Time.IsZero() {
		u.Time = s.now()
	}
	op := fmt.Sprintf("recording usage of conversation %q", u.Conversation)
	_, err := s.writeBehind(ctx, op, func(ctx context.Context, tx txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO usage (conversation, time, purpose, model, prompt_tokens,
			completion_tokens, cached_tokens, reported, window_tokens, cost_micro_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			u.Conversation, unixNanos(u.Time), u.Purpose, u.Model, u.PromptTokens, u.CompletionTokens, u.CachedTokens,
			u.Reported, u.WindowTokens, u.CostMicroUSD)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
	return err
}

// UsageTotals are the sums of some usage rows, and the last of them.
type UsageTotals struct {
	Requests         int64
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	CostMicroUSD     int64
	// Last is the most recent request (zero when there is none).
	Last Usage
}

// ConversationUsage sums the usage of one conversation.
func (s *Store) ConversationUsage(ctx context.Context, conversation string) (UsageTotals, error) {
	return s.usageTotals(ctx, fmt.Sprintf("reading the usage of conversation %q", conversation),
		`WHERE conversation = ?`, conversation)
}

// UsageSince sums the usage of every request at or after since (a day's or
// a month's spend).
func (s *Store) UsageSince(ctx context.Context, since time.Time) (UsageTotals, error) {
	return s.usageTotals(ctx, "reading usage", `WHERE time >= ?`, unixNanos(since))
}

func (s *Store) usageTotals(ctx context.Context, op, where string, args ...any) (UsageTotals, error) {
	var t UsageTotals
	err := s.reader.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0),
		coalesce(sum(cached_tokens), 0), coalesce(sum(cost_micro_usd), 0) FROM usage `+where, args...).
		Scan(&t.Requests, &t.PromptTokens, &t.CompletionTokens, &t.CachedTokens, &t.CostMicroUSD)
	if err != nil {
		return t, dbErr(ctx, op, err)
	}
	if t.Requests == 0 {
		return t, nil
	}
	var at int64
	err = s.reader.QueryRowContext(ctx, `SELECT conversation, time, purpose, model, prompt_tokens, completion_tokens,
		cached_tokens, reported, window_tokens, cost_micro_usd FROM usage `+where+` ORDER BY id DESC LIMIT 1`, args...).
		Scan(&t.Last.Conversation, &at, &t.Last.Purpose, &t.Last.Model, &t.Last.PromptTokens, &t.Last.CompletionTokens,
			&t.Last.CachedTokens, &t.Last.Reported, &t.Last.WindowTokens, &t.Last.CostMicroUSD)
	if err != nil {
		return t, dbErr(ctx, op, err)
	}
	t.Last.Time = fromUnixNanos(at)
	return t, nil
}
