package catalog_test

import (
	"context"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// oneSkill is a catalog of one skill; resolving it gives targets when set.
type oneSkill struct {
	name    string
	targets []catalog.Target
}

func (o oneSkill) List(context.Context) ([]catalog.Info, error) {
	return []catalog.Info{{Name: o.name}}, nil
}
func (o oneSkill) Lookup(_ context.Context, name string) (catalog.Info, error) {
	if name != o.name {
		return catalog.Info{}, errs.New(errs.ErrNotFound, name)
	}
	return catalog.Info{Name: name}, nil
}
func (o oneSkill) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	return o.Lookup(ctx, c.Skill)
}
func (o oneSkill) Invoke(context.Context, catalog.Call) (*catalog.Result, error) { return nil, nil }
func (o oneSkill) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, o, c)
}

type resolvingSkill struct{ oneSkill }

func (r resolvingSkill) Resolve(context.Context, catalog.Call) ([]catalog.Target, error) {
	return r.targets, nil
}
func (r resolvingSkill) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	return catalog.PrepareChecked(ctx, r, c)
}

// targetsOf prepares c on cat and returns its targets.
func targetsOf(t *testing.T, cat catalog.Catalog, c catalog.Call) []catalog.Target {
	t.Helper()
	p, err := cat.Prepare(t.Context(), c)
	if err != nil {
		t.Fatalf("Prepare(%s): %v", c.Skill, err)
	}
	defer p.Release()
	ts, err := p.Targets(t.Context())
	if err != nil {
		t.Fatalf("Targets(%s): %v", c.Skill, err)
	}
	return ts
}

// TestUnionTargets: a call prepared by the union resolves its targets with
// the catalog that holds the skill.
func TestUnionTargets(t *testing.T) {
	file := []catalog.Target{{Kind: catalog.TargetFile, Path: "/d/a", Action: "read"}}
	u := catalog.NewUnion(resolvingSkill{oneSkill{"read_file", file}}, oneSkill{name: "howto"})
	if got := targetsOf(t, u, catalog.Call{Skill: "read_file"}); !catalog.SameTargets(got, file) {
		t.Fatalf("targets of read_file = %v", got)
	}
	if got := targetsOf(t, u, catalog.Call{Skill: "howto"}); got != nil {
		t.Fatalf("targets of howto = %v; want none", got)
	}
}

func TestTargets(t *testing.T) {
	a := []catalog.Target{{Kind: catalog.TargetURL, URL: "https://x/", Host: "x", Port: 443,
		Addresses: []catalog.TargetAddress{{IP: "93.184.215.14", Allowed: true}}}}
	b := []catalog.Target{{Kind: catalog.TargetURL, URL: "https://x/", Host: "x", Port: 443,
		Addresses: []catalog.TargetAddress{{IP: "10.0.0.1", Reason: "private"}}, Refused: "address 10.0.0.1 is private"}}
	if !catalog.SameTargets(a, a) || catalog.SameTargets(a, b) || catalog.SameTargets(a, nil) {
		t.Error("SameTargets does not compare what is shown")
	}
	if _, bad := catalog.Refused(a); bad {
		t.Error("an allowed target is refused")
	}
	if r, bad := catalog.Refused(b); !bad || r.Refused == "" {
		t.Error("a refused target is not")
	}
	if got := b[0].String(); got != "fetch https://x/ (, host x, port 443, addresses 10.0.0.1 refused) — REFUSED: address 10.0.0.1 is private" {
		t.Errorf("String = %q", got)
	}
}
