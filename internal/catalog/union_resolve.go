package catalog

import "context"

var _ Resolver = (*Union)(nil)

// Resolve implements Resolver: the targets as the catalog that holds the
// skill resolves them (none when it cannot say).
func (u *Union) Resolve(ctx context.Context, c Call) ([]Target, error) {
	if r, ok := u.owner(ctx, c.Skill).(Resolver); ok {
		return r.Resolve(ctx, c)
	}
	return nil, nil
}
