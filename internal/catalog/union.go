package catalog

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Union is two catalogs served as one: the WebAssembly skills (primary) and
// the SKILL.md skills (secondary). A name both hold is the primary's: the
// secondary's is hidden and reported by Shadowed. The approval gate wraps the
// union, so both kinds go through the same gate.
//
//	all := catalog.NewUnion(registry, instructionsCatalog)
//	gate := approval.New(all, approval.Options{...})
type Union struct {
	primary, secondary Catalog
}

var _ Catalog = (*Union)(nil)

// NewUnion returns the union of primary and secondary; primary wins clashes.
func NewUnion(primary, secondary Catalog) *Union {
	return &Union{primary: primary, secondary: secondary}
}

// List implements Catalog: both lists merged by name, without the
// secondary's shadowed skills.
func (u *Union) List(ctx context.Context) ([]Info, error) {
	a, b, err := u.lists(ctx)
	if err != nil {
		return nil, err
	}
	have := names(a)
	out := append(make([]Info, 0, len(a)+len(b)), a...)
	for _, i := range b {
		if !have[i.Name] {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(x, y Info) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// Shadowed returns the names of the secondary's skills hidden by a primary
// skill of the same name, sorted.
func (u *Union) Shadowed(ctx context.Context) ([]string, error) {
	a, b, err := u.lists(ctx)
	if err != nil {
		return nil, err
	}
	have := names(a)
	var out []string
	for _, i := range b {
		if have[i.Name] {
			out = append(out, i.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// lists returns the primary's and the secondary's lists.
func (u *Union) lists(ctx context.Context) (primary, secondary []Info, err error) {
	if primary, err = u.primary.List(ctx); err != nil {
		return nil, nil, err
	}
	if secondary, err = u.secondary.List(ctx); err != nil {
		return nil, nil, err
	}
	return primary, secondary, nil
}

// names is the set of the skills' names in list.
func names(list []Info) map[string]bool {
	have := make(map[string]bool, len(list))
	for _, i := range list {
		have[i.Name] = true
	}
	return have
}

// owner is the catalog that serves name: the secondary (asked first: it is
// in memory) only when it has the name and the primary does not.
func (u *Union) owner(ctx context.Context, name string) Lister {
	if _, err := u.secondary.Lookup(ctx, name); err != nil {
		return u.primary
	}
	if _, err := u.primary.Lookup(ctx, name); err == nil {
		return u.primary
	}
	return u.secondary
}

// Lookup implements Catalog.
func (u *Union) Lookup(ctx context.Context, name string) (Info, error) {
	return u.owner(ctx, name).Lookup(ctx, name)
}

// Prepare implements Catalog: the primary prepares the call when it holds
// the skill, else the secondary (one lookup in each at most).
func (u *Union) Prepare(ctx context.Context, c Call) (Prepared, error) {
	p, err := u.primary.Prepare(ctx, c)
	if err == nil || !isNotFound(err) {
		return p, err
	}
	p2, err2 := u.secondary.Prepare(ctx, c)
	if err2 != nil && isNotFound(err2) {
		return nil, err // the primary's "not found" names the skills it has
	}
	return p2, err2
}

func isNotFound(err error) bool { return errors.Is(err, errs.ErrNotFound) }
