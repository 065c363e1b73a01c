package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// memState is a catalog.StateStore in memory that can be made to fail.
type memState struct {
	mu    sync.Mutex
	items map[string][]catalog.StateItem
	fail  error
	loads int
}

func newMemState() *memState { return &memState{items: map[string][]catalog.StateItem{}} }

func (m *memState) ConversationState(_ context.Context, scope string) ([]catalog.StateItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	if m.fail != nil {
		return nil, m.fail
	}
	return append([]catalog.StateItem(nil), m.items[scope]...), nil
}

func (m *memState) SaveConversationState(_ context.Context, scope string, items ...catalog.StateItem) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	for _, it := range items {
		replaced := false
		for i, old := range m.items[scope] {
			if old.Kind == it.Kind && old.Key == it.Key {
				m.items[scope][i], replaced = it, true
			}
		}
		if !replaced {
			m.items[scope] = append(m.items[scope], it)
		}
	}
	return nil
}

func (m *memState) DeleteConversationState(_ context.Context, scope string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, scope)
	return nil
}

// TestStateOutlivesTheGate: what a gate learns of a conversation — its
// private reads, its "once" approvals — is stored, and a new gate on the
// same state (a restarted process) restores it on the conversation's first
// use: a trusted network call after a read is still asked, a "once" skill is
// not asked again unless it changed. A shared scope (every MCP session's)
// carries the taint across conversations; EndConversation forgets.
func TestStateOutlivesTheGate(t *testing.T) {
	st := newMemState()
	cat := newResolving(func(int, catalog.Call) []catalog.Target { return nil })
	cat.skills["fetch_url"] = catalog.Info{Name: "fetch_url", Permission: catalog.Network, Policy: catalog.Trust, Status: "ready", NetworkAccess: true}
	asker := &recordingAsker{approve: true}
	newGate := func() *approval.Gate { return approval.New(cat, approval.Options{Asker: asker, State: st}) }
	ctx := t.Context()
	call := func(g *approval.Gate, conv, scope, skill string) {
		t.Helper()
		if _, err := g.Invoke(ctx, catalog.Call{Conversation: conv, Scope: scope, Skill: skill, Arguments: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("%s in %s: %v", skill, conv, err)
		}
	}
	asks := func() int { asker.mu.Lock(); defer asker.mu.Unlock(); return len(asker.reqs) }

	g := newGate()
	call(g, "c1", "", "read_file")
	call(g, "c1", "", "remember") // once: asked
	if asks() != 1 {
		t.Fatalf("asked %d times before the restart, want 1", asks())
	}
	g = newGate() // a restart
	n := asks()
	call(g, "c1", "", "fetch_url")
	if asks() != n+1 || !strings.Contains(asker.reqs[n].Reason, "has read") {
		t.Fatalf("a trusted fetch after a restart was not asked for the stored read: %+v", asker.reqs[n:])
	}
	n = asks()
	call(g, "c1", "", "remember")
	if asks() != n {
		t.Fatalf("a once approval was asked again after a restart")
	}
	// The skill changed (its module): the stored approval does not cover it.
	cat.skills["remember"] = catalog.Info{Name: "remember", Permission: catalog.Mutating, Policy: catalog.Once, Status: "ready", SHA256: "new"}
	cat.skills["remember"] = cat.skills["remember"].WithFingerprint("another module")
	call(newGate(), "c1", "", "remember")
	if asks() != n+1 {
		t.Fatalf("a once approval covered a changed skill")
	}

	// A shared scope: a read in one session taints the next session.
	g = newGate()
	call(g, "mcp_a", "mcp", "read_file")
	g.EndConversation("mcp_a") // the session ended: its own state goes
	n = asks()
	call(newGate(), "mcp_b", "mcp", "fetch_url")
	if asks() != n+1 {
		t.Fatalf("a new session in the same scope lost the taint")
	}
	// Another conversation is clean; an ended one is forgotten.
	n = asks()
	call(g, "c2", "", "fetch_url")
	g.EndConversation("c1")
	call(newGate(), "c1", "", "fetch_url")
	if asks() != n {
		t.Fatalf("a clean or ended conversation was asked")
	}
}

// TestStateFailsClosed: a state that cannot be read refuses the call (a
// conversation that read private data must not lose it to a disk error),
// and the next call tries again.
func TestStateFailsClosed(t *testing.T) {
	st := newMemState()
	st.fail = errors.New("disk I/O error")
	cat := newResolving(func(int, catalog.Call) []catalog.Target { return nil })
	cat.skills["fetch_url"] = catalog.Info{Name: "fetch_url", Permission: catalog.Network, Policy: catalog.Trust, Status: "ready", NetworkAccess: true}
	g := approval.New(cat, approval.Options{Asker: &recordingAsker{approve: true}, State: st})
	fetch := catalog.Call{Conversation: "c", Skill: "fetch_url", Arguments: json.RawMessage(`{}`)}
	if _, err := g.Invoke(t.Context(), fetch); !errors.Is(err, errs.ErrUnavailable) || cat.calls() != 0 {
		t.Fatalf("err = %v, ran %d; want unavailable and nothing run", err, cat.calls())
	}
	st.mu.Lock()
	st.fail = nil
	st.mu.Unlock()
	if _, err := g.Invoke(t.Context(), fetch); err != nil {
		t.Fatalf("after the disk recovered: %v", err)
	}
}
