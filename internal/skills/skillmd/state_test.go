package skillmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// memState is a catalog.StateStore in memory.
type memState struct {
	mu    sync.Mutex
	items map[string][]catalog.StateItem
	fail  error
}

func (m *memState) ConversationState(_ context.Context, scope string) ([]catalog.StateItem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	return append([]catalog.StateItem(nil), m.items[scope]...), nil
}

func (m *memState) SaveConversationState(_ context.Context, scope string, items ...catalog.StateItem) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[scope] = append(m.items[scope], items...)
	return nil
}

func (m *memState) DeleteConversationState(_ context.Context, scope string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, scope)
	return nil
}

// TestBindingsOutliveTheProcess: a SKILL.md skill loaded in a conversation
// binds it after a restart (new Sessions on the same state), with what it
// declared when it was loaded even if the skill is gone since; another
// conversation stays free; a state that cannot be read refuses.
func TestBindingsOutliveTheProcess(t *testing.T) {
	work, skills := t.TempDir(), t.TempDir()
	st := &memState{items: map[string][]catalog.StateItem{}}
	ctx := t.Context()
	mdOnly := mustSkill(t, skills, "md-only", "permissions:\n  fs:\n    read: [\"**/*.md\"]\n")
	if err := NewSessions(Dirs{Work: work}, st).Activate(ctx, "c1", mdOnly); err != nil {
		t.Fatal(err)
	}
	secret := []Access{{Kind: Read, Target: filepath.Join(work, "secret.txt")}}
	notes := []Access{{Kind: Read, Target: filepath.Join(work, "a.md")}}
	after := NewSessions(Dirs{Work: work}, st) // the restart
	if active, err := after.Active(ctx, "c1"); err != nil || len(active) != 1 || active[0] != "md-only" {
		t.Fatalf("active after a restart = %v, %v", active, err)
	}
	if err := after.Check(ctx, "c1", "read_file", secret); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("after a restart a read outside the declaration = %v, want forbidden", err)
	}
	if err := after.Check(ctx, "c1", "read_file", notes); err != nil {
		t.Fatalf("after a restart a declared read = %v", err)
	}
	if err := after.Check(ctx, "c2", "read_file", secret); err != nil {
		t.Fatalf("another conversation is bound: %v", err)
	}
	st.fail = errors.New("disk I/O error")
	if err := NewSessions(Dirs{Work: work}, st).Check(ctx, "c1", "read_file", notes); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("an unreadable state = %v, want unavailable", err)
	}
}

// TestCatalogSeesFolderChanges: a SKILL.md folder added, changed or removed
// while the catalog serves is seen by its next List or Prepare; a prepared
// call of a skill changed since is not current.
func TestCatalogSeesFolderChanges(t *testing.T) {
	dir := t.TempDir()
	st := NewStore(dir)
	ctx := t.Context()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte("---\nname: "+name+"\ndescription: d\n---\n"+body+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first", "one")
	skills, _ := st.ListActive(ctx)
	var reloads int
	c := NewCatalog(skills, CatalogOptions{Source: st, Recheck: time.Nanosecond, OnReload: func([]*Skill, []error) { reloads++ }})
	has := func(name string) bool {
		infos, _ := c.List(ctx)
		for _, i := range infos {
			if i.Name == name {
				return true
			}
		}
		return false
	}
	if !has("first") || has("second") {
		t.Fatal("initial list wrong")
	}
	write("second", "two")
	if !has("second") {
		t.Fatal("an added folder was not seen")
	}
	p, err := c.Prepare(ctx, catalog.Call{Skill: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if why, _ := p.Current(ctx); why != "" {
		t.Fatalf("unchanged skill not current: %s", why)
	}
	time.Sleep(10 * time.Millisecond) // a later modification time
	write("first", "one, edited")
	if why, _ := p.Current(ctx); why == "" {
		t.Fatal("an edited skill's prepared call is still current")
	}
	p.Release()
	if err := os.RemoveAll(filepath.Join(dir, "second")); err != nil {
		t.Fatal(err)
	}
	if has("second") {
		t.Fatal("a removed folder is still listed")
	}
	if reloads < 3 {
		t.Fatalf("%d reloads, want one per change", reloads)
	}
	n := reloads
	c.List(ctx)
	c.List(ctx)
	if reloads != n {
		t.Fatal("an unchanged folder was reloaded")
	}
}
