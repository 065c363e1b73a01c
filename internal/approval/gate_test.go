package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// fakeCatalog is a catalog built from a table of skills; it records the calls
// it ran.
type fakeCatalog struct {
	skills map[string]catalog.Info
	mu     sync.Mutex
	ran    []catalog.Call
}

func newFakeCatalog() *fakeCatalog {
	return &fakeCatalog{skills: map[string]catalog.Info{
		"read_file":  {Name: "read_file", Permission: catalog.ReadOnly, Policy: catalog.Trust, Status: "ready"},
		"write_file": {Name: "write_file", Permission: catalog.Mutating, Policy: catalog.Always, Status: "ready", Touches: []string{"write files in /sandbox"}},
		"remember":   {Name: "remember", Permission: catalog.Mutating, Policy: catalog.Once, Status: "ready"},
		"broken":     {Name: "broken", Permission: catalog.Mutating, Policy: catalog.Always, Status: "unavailable", Problem: "no module"},
	}}
}

func (f *fakeCatalog) List(context.Context) ([]catalog.Info, error) {
	var out []catalog.Info
	for _, s := range f.skills {
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeCatalog) Lookup(_ context.Context, name string) (catalog.Info, error) {
	s, ok := f.skills[name]
	if !ok {
		return catalog.Info{}, errs.New(errs.ErrNotFound, "no skill "+name)
	}
	return s, nil
}

func (f *fakeCatalog) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	s, err := f.Lookup(ctx, c.Skill)
	if err != nil {
		return s, err
	}
	if !s.Ready() {
		return s, errs.New(errs.ErrUnavailable, s.Problem)
	}
	if !json.Valid(c.Arguments) {
		return s, errs.New(errs.ErrInvalidInput, "arguments are not JSON")
	}
	return s, nil
}

func (f *fakeCatalog) Invoke(_ context.Context, c catalog.Call) (*catalog.Result, error) {
	f.mu.Lock()
	f.ran = append(f.ran, c)
	f.mu.Unlock()
	return &catalog.Result{Skill: c.Skill, Output: []byte(`{"ok":true}`)}, nil
}

func (f *fakeCatalog) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, f, c)
}

func (f *fakeCatalog) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ran)
}

func TestGateInvoke(t *testing.T) {
	args := json.RawMessage(`{"path":"a.txt"}`)
	tests := []struct {
		name      string
		skill     string
		args      json.RawMessage
		answer    bool
		wantErr   error
		wantAsked int
		wantRan   int
	}{
		{"read_only trusted runs without asking", "read_file", args, false, nil, 0, 1},
		{"always asks and runs when approved", "write_file", args, true, nil, 1, 1},
		{"always denied does not run", "write_file", args, false, errs.ErrDenied, 1, 0},
		{"unknown skill is not asked about", "nope", args, true, errs.ErrNotFound, 0, 0},
		{"a skill that cannot run is not asked about", "broken", args, true, errs.ErrUnavailable, 0, 0},
		{"bad arguments are not asked about", "write_file", json.RawMessage(`{`), true, errs.ErrInvalidInput, 0, 0},
		{"once from the CLI (no conversation) asks", "remember", args, false, errs.ErrDenied, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := newFakeCatalog()
			asked := 0
			var outcomes []approval.Outcome
			g := approval.New(cat, approval.Options{
				Asker: approval.AskerFunc(func(_ context.Context, r approval.Request) (bool, error) {
					asked++
					if r.Skill == "write_file" && len(r.Touches) == 0 {
						t.Error("request does not say what the skill may touch")
					}
					if want := catalog.ArgumentsHash(tt.args); r.ArgumentsHash != want {
						t.Errorf("request's arguments hash %q, want %q", r.ArgumentsHash, want)
					}
					return tt.answer, nil
				}),
				Record: func(_ context.Context, o approval.Outcome) { outcomes = append(outcomes, o) },
			})
			res, err := g.Invoke(t.Context(), catalog.Call{Skill: tt.skill, Arguments: tt.args})
			if tt.wantErr == nil && (err != nil || res == nil) {
				t.Fatalf("Invoke: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Invoke error = %v, want %v", err, tt.wantErr)
			}
			if errors.Is(tt.wantErr, errs.ErrDenied) && err.Error() != "User denied execution of "+tt.skill {
				t.Errorf("denial text = %q", err.Error())
			}
			if asked != tt.wantAsked || cat.calls() != tt.wantRan {
				t.Errorf("asked %d ran %d, want %d and %d", asked, cat.calls(), tt.wantAsked, tt.wantRan)
			}
			if len(outcomes) != 1 || !errors.Is(outcomes[0].Err, tt.wantErr) && tt.wantErr != nil {
				t.Errorf("outcomes = %+v, want one with %v", outcomes, tt.wantErr)
			}
			if len(outcomes) == 1 && outcomes[0].ArgumentsHash != catalog.ArgumentsHash(tt.args) {
				t.Errorf("outcome's arguments hash %q, want that of %s", outcomes[0].ArgumentsHash, tt.args)
			}
		})
	}
}

// TestGateHashesArgumentsOnce: a call that carries its arguments' hash (the
// front end computed it to log it) is asked about and recorded with that
// hash, not hashed again; one that does not is hashed by the gate.
func TestGateHashesArgumentsOnce(t *testing.T) {
	args := json.RawMessage(`{"path":"a.txt"}`)
	const given = "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed"
	for _, tt := range []struct {
		name, hash, want string
	}{
		{"computed by the gate", "", catalog.ArgumentsHash(args)},
		{"given by the front end", given, given},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var asked, recorded string
			g := approval.New(newFakeCatalog(), approval.Options{
				Asker: approval.AskerFunc(func(_ context.Context, r approval.Request) (bool, error) {
					asked = r.ArgumentsHash
					return true, nil
				}),
				Record: func(_ context.Context, o approval.Outcome) { recorded = o.ArgumentsHash },
			})
			if _, err := g.Invoke(t.Context(), catalog.Call{Skill: "write_file", Arguments: args, ArgumentsHash: tt.hash}); err != nil {
				t.Fatal(err)
			}
			if asked != tt.want || recorded != tt.want {
				t.Errorf("asked with hash %q, recorded %q; want %q", asked, recorded, tt.want)
			}
		})
	}
}

func TestGateOnceIsPerConversationAndForgotten(t *testing.T) {
	cat := newFakeCatalog()
	asked := 0
	g := approval.New(cat, approval.Options{Asker: approval.AskerFunc(func(context.Context, approval.Request) (bool, error) {
		asked++
		return true, nil
	})})
	call := func(conv string) {
		t.Helper()
		if _, err := g.Invoke(t.Context(), catalog.Call{Conversation: conv, Skill: "remember", Arguments: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	call("c1")
	call("c1")
	if asked != 1 {
		t.Fatalf("second call in c1 asked again: %d questions", asked)
	}
	call("c2")
	if asked != 2 {
		t.Fatalf("a new conversation was not asked: %d questions", asked)
	}
	g.EndConversation("c1")
	call("c1")
	if asked != 3 {
		t.Fatalf("an ended conversation kept its approval: %d questions", asked)
	}
	call("c2")
	if asked != 3 {
		t.Fatalf("ending c1 forgot c2: %d questions", asked)
	}
}

func TestGateTimeoutIsADenial(t *testing.T) {
	cat := newFakeCatalog()
	var expires time.Time
	g := approval.New(cat, approval.Options{
		Settings: func() approval.Settings { return approval.Settings{Timeout: 50 * time.Millisecond} },
		Asker: approval.AskerFunc(func(ctx context.Context, r approval.Request) (bool, error) {
			expires = r.Expires
			<-ctx.Done() // nobody answers
			return false, ctx.Err()
		}),
	})
	_, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c", Skill: "write_file", Arguments: json.RawMessage(`{}`)})
	if !errors.Is(err, errs.ErrDenied) || !strings.HasPrefix(err.Error(), "User denied execution of write_file") {
		t.Fatalf("err = %v, want a denial", err)
	}
	if expires.IsZero() {
		t.Error("the request did not carry its expiry")
	}
	if cat.calls() != 0 {
		t.Error("a timed-out call ran")
	}
}
