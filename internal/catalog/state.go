package catalog

import "context"

// StateItem is one fact about a conversation that outlives the process: what
// private data it read (taint), which skills it approved under "once", which
// SKILL.md skills bind it. The gate and the SKILL.md sessions keep them
// through a StateStore and restore them on the conversation's first use
// after a start.
type StateItem struct {
	Kind  string // StateTaint, StateOnce or StateBinding
	Key   string // what was read; the skill's name
	Value string // StateOnce: the approved Info.Fingerprint; StateBinding: the binding as JSON
}

// Kinds of StateItem.
const (
	StateTaint   = "taint"
	StateOnce    = "once"
	StateBinding = "binding"
)

// StateStore keeps conversations' state (internal/store implements it). The
// scope is Call.StateScope() for taint and bindings, the conversation for
// "once" approvals.
type StateStore interface {
	// ConversationState returns what is kept of scope, oldest first.
	ConversationState(ctx context.Context, scope string) ([]StateItem, error)
	// SaveConversationState adds items to scope durably (an item with the
	// same kind and key replaces the old one) before it returns.
	SaveConversationState(ctx context.Context, scope string, items ...StateItem) error
	// DeleteConversationState forgets scope (a conversation deleted).
	DeleteConversationState(ctx context.Context, scope string) error
}
