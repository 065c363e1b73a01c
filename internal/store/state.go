package store

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/catalog"
)

// The store keeps what the approval gate and the SKILL.md sessions must
// remember of a conversation across restarts (catalog.StateStore).
var _ catalog.StateStore = (*Store)(nil)

// Bounds of conversation state.
const (
	maxStateScope = 256
	maxStateKey   = 8 << 10
	maxStateValue = 256 << 10
)

// validState checks one item of state.
func validState(scope string, it catalog.StateItem) error {
	switch it.Kind {
	case catalog.StateTaint, catalog.StateOnce, catalog.StateBinding:
	default:
		return invalid("conversation state of %q: unknown kind %q", scope, it.Kind)
	}
	switch {
	case it.Key == "":
		return invalid("conversation state of %q: empty %s key", scope, it.Kind)
	case len(it.Key) > maxStateKey || len(it.Value) > maxStateValue:
		return invalid("conversation state of %q: %s item over %d bytes", scope, it.Kind, maxStateValue)
	case !utf8.ValidString(it.Key) || !utf8.ValidString(it.Value):
		return invalid("conversation state of %q: %s item is not UTF-8", scope, it.Kind)
	}
	return nil
}

// ConversationState implements catalog.StateStore: scope's items, oldest
// first.
func (s *Store) ConversationState(ctx context.Context, scope string) ([]catalog.StateItem, error) {
	return query(ctx, s.reader, fmt.Sprintf("reading the state of %q", scope), func(r scanner) (catalog.StateItem, error) {
		var it catalog.StateItem
		err := r.Scan(&it.Kind, &it.Key, &it.Value)
		return it, err
	}, `SELECT kind, key, value FROM conversation_state WHERE scope = ? ORDER BY created_at, kind, key`, scope)
}

// SaveConversationState implements catalog.StateStore: the items are stored
// durably before it returns; an item with the kind and key of a stored one
// replaces its value.
func (s *Store) SaveConversationState(ctx context.Context, scope string, items ...catalog.StateItem) error {
	if scope == "" || len(scope) > maxStateScope || !utf8.ValidString(scope) {
		return invalid("conversation state: scope %q must be 1 to %d bytes of UTF-8", scope, maxStateScope)
	}
	for _, it := range items {
		if err := validState(scope, it); err != nil {
			return err
		}
	}
	if len(items) == 0 {
		return nil
	}
	at := unixNanos(s.now())
	op := fmt.Sprintf("storing the state of %q", scope)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		for _, it := range items {
			if _, err := tx.ExecContext(ctx, `INSERT INTO conversation_state (scope, kind, key, value, created_at)
				VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, kind, key) DO UPDATE SET value = excluded.value`,
				scope, it.Kind, it.Key, it.Value, at); err != nil {
				return dbErr(ctx, op, err)
			}
		}
		return nil
	})
}

// DeleteConversationState implements catalog.StateStore.
func (s *Store) DeleteConversationState(ctx context.Context, scope string) error {
	op := fmt.Sprintf("forgetting the state of %q", scope)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM conversation_state WHERE scope = ?`, scope); err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
}
