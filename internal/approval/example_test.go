package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// notes is a one-skill catalog: write_note, a mutating skill that asks
// every time.
type notes struct{}

func (notes) info() catalog.Info {
	return catalog.Info{Name: "write_note", Version: "1.0.0", SHA256: "5be5cc1a6d9a0f0e", Permission: catalog.Mutating,
		Policy: catalog.Always, Status: catalog.StatusReady}
}
func (n notes) List(context.Context) ([]catalog.Info, error) { return []catalog.Info{n.info()}, nil }
func (n notes) Lookup(_ context.Context, name string) (catalog.Info, error) {
	if name != "write_note" {
		return catalog.Info{}, errs.New(errs.ErrNotFound, "no skill "+name)
	}
	return n.info(), nil
}
func (n notes) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	return n.Lookup(ctx, c.Skill)
}
func (notes) Invoke(_ context.Context, c catalog.Call) (*catalog.Result, error) {
	return &catalog.Result{Skill: c.Skill, Output: []byte(`{"ok":true}`)}, nil
}
func (n notes) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, n, c)
}

// The gate asks about a mutating call before it runs, showing the module
// that will run; a "no" is an error fit to hand the model.
func ExampleGate() {
	answer := true
	gate := approval.New(notes{}, approval.Options{
		Asker: approval.AskerFunc(func(_ context.Context, req approval.Request) (bool, error) {
			fmt.Printf("asked: %s %s (%s, module %s) with %s\n", req.Skill, req.Version, req.Permission, req.ModuleSHA256, req.Arguments)
			return answer, nil
		}),
	})
	call := catalog.Call{Conversation: "c1", Skill: "write_note", Arguments: json.RawMessage(`{"text":"buy milk"}`)}
	res, err := gate.Invoke(context.Background(), call)
	fmt.Println(string(res.Output), err)

	answer = false
	_, err = gate.Invoke(context.Background(), call)
	fmt.Println(err, errors.Is(err, errs.ErrDenied))
	// Output:
	// asked: write_note 1.0.0 (mutating, module 5be5cc1a6d9a0f0e) with {"text":"buy milk"}
	// {"ok":true} <nil>
	// asked: write_note 1.0.0 (mutating, module 5be5cc1a6d9a0f0e) with {"text":"buy milk"}
	// User denied execution of write_note true
}
