package catalog_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

var errMissing = errs.New(errs.ErrNotFound, "no such skill")

// listCatalog serves fixed skills; resolves when targets is set.
type listCatalog struct {
	infos   []catalog.Info
	ran     []string
	targets []catalog.Target
}

func (l *listCatalog) List(context.Context) ([]catalog.Info, error) { return l.infos, nil }
func (l *listCatalog) Lookup(_ context.Context, n string) (catalog.Info, error) {
	for _, i := range l.infos {
		if i.Name == n {
			return i, nil
		}
	}
	return catalog.Info{}, errMissing
}
func (l *listCatalog) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	return l.Lookup(ctx, c.Skill)
}
func (l *listCatalog) Invoke(_ context.Context, c catalog.Call) (*catalog.Result, error) {
	l.ran = append(l.ran, c.Skill)
	return &catalog.Result{Skill: c.Skill}, nil
}

func (l *listCatalog) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, l, c)
}

type resolving struct{ *listCatalog }

func (r resolving) Resolve(context.Context, catalog.Call) ([]catalog.Target, error) {
	return r.targets, nil
}
func (r resolving) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, r, c)
}

// TestUnion: both lists merged; a name both hold is the primary's and is
// reported as shadowed; calls go to the owner; Resolve asks the owner.
func TestUnion(t *testing.T) {
	wasm := &listCatalog{infos: []catalog.Info{{Name: "read_file"}, {Name: "guide"}}, targets: []catalog.Target{{Kind: catalog.TargetFile, Path: "/a"}}}
	md := &listCatalog{infos: []catalog.Info{{Name: "doc-coauthoring", Type: "instruction"}, {Name: "guide", Type: "instruction"}}}
	u := catalog.NewUnion(resolving{wasm}, md)
	ctx := t.Context()
	infos, _ := u.List(ctx)
	var names []string
	for _, i := range infos {
		names = append(names, i.Name+"/"+i.Type)
	}
	if !slices.Equal(names, []string{"doc-coauthoring/instruction", "guide/", "read_file/"}) {
		t.Errorf("List = %v", names)
	}
	if sh, _ := u.Shadowed(ctx); !slices.Equal(sh, []string{"guide"}) {
		t.Errorf("Shadowed = %v", sh)
	}
	for _, n := range []string{"guide", "doc-coauthoring", "read_file"} {
		p, err := u.Prepare(ctx, catalog.Call{Skill: n})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(wasm.ran, []string{"guide", "read_file"}) || !slices.Equal(md.ran, []string{"doc-coauthoring"}) {
		t.Errorf("ran: wasm %v, md %v", wasm.ran, md.ran)
	}
	if _, err := u.Lookup(ctx, "nothing"); !errors.Is(err, errMissing) {
		t.Errorf("Lookup(nothing) = %v", err)
	}
	if _, err := u.Prepare(ctx, catalog.Call{Skill: "nothing"}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("Prepare(nothing) = %v, want not_found", err)
	}
	if ts := targetsOf(t, u, catalog.Call{Skill: "read_file"}); len(ts) != 1 {
		t.Errorf("targets of read_file = %v", ts)
	}
	if ts := targetsOf(t, u, catalog.Call{Skill: "doc-coauthoring"}); ts != nil {
		t.Errorf("targets of doc-coauthoring = %v", ts)
	}
}
