package approval

import (
	"context"
	"errors"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// guardCatalog is a one-skill catalog counting runs.
type guardCatalog struct{ runs int }

func (c *guardCatalog) info() catalog.Info {
	return catalog.Info{Name: "write_file", Permission: catalog.Mutating, Policy: catalog.Always, Status: "ready"}
}
func (c *guardCatalog) List(context.Context) ([]catalog.Info, error) {
	return []catalog.Info{c.info()}, nil
}
func (c *guardCatalog) Lookup(context.Context, string) (catalog.Info, error) { return c.info(), nil }
func (c *guardCatalog) Check(context.Context, catalog.Call) (catalog.Info, error) {
	return c.info(), nil
}
func (c *guardCatalog) Prepare(ctx context.Context, call catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, c, call)
}
func (c *guardCatalog) Invoke(context.Context, catalog.Call) (*catalog.Result, error) {
	c.runs++
	return &catalog.Result{Skill: "write_file"}, nil
}

// TestGuard: a guard's refusal stops the call before anyone is asked, is
// recorded, and keeps its kind; a guard that passes changes nothing.
func TestGuard(t *testing.T) {
	for _, refuse := range []bool{true, false} {
		cat := &guardCatalog{}
		asked := 0
		var recorded error
		var seen Request
		g := New(cat, Options{
			Asker: AskerFunc(func(context.Context, Request) (bool, error) { asked++; return true, nil }),
			Guard: func(_ context.Context, req Request) error {
				seen = req
				if refuse {
					return errs.New(errs.ErrForbidden, "write_file: outside the permissions declared by the active skill md-only")
				}
				return nil
			},
			Record: func(_ context.Context, o Outcome) { recorded = o.Err },
		})
		_, err := g.Invoke(t.Context(), catalog.Call{Conversation: "c1", Skill: "write_file", Arguments: []byte(`{"path":"hack.sh"}`)})
		if seen.Conversation != "c1" || seen.Skill != "write_file" || string(seen.Arguments) != `{"path":"hack.sh"}` {
			t.Errorf("guard saw %+v", seen)
		}
		if refuse {
			if !errors.Is(err, errs.ErrForbidden) || asked != 0 || cat.runs != 0 || !errors.Is(recorded, errs.ErrForbidden) {
				t.Errorf("refused: err %v, asked %d, runs %d, recorded %v", err, asked, cat.runs, recorded)
			}
		} else if err != nil || asked != 1 || cat.runs != 1 {
			t.Errorf("passed: err %v, asked %d, runs %d", err, asked, cat.runs)
		}
	}
}
