package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// maxAsks is how often one call is asked about before the gate gives up on
// targets or a skill that keep changing between the answer and the call.
const maxAsks = 3

// maxRead bounds what the gate keeps of a conversation's private reads.
const maxRead = 64

// memo is what the gate knows of one conversation or scope: restored from
// Options.State on first use after a start, then kept in memory.
type memo struct {
	ready chan struct{}     // closed once loaded
	err   error             // the load failed: the next use tries again
	once  map[string]string // skill → the fingerprint approved under "once"
	read  []string          // the private data read (taint), in order
}

// memo returns what the gate knows of key ("" = a one-shot call: nothing
// to remember, an empty memo).
func (g *Gate) memo(ctx context.Context, key string) (*memo, error) {
	if key == "" {
		return &memo{once: map[string]string{}}, nil
	}
	g.mu.Lock()
	m, ok := g.memos[key]
	if !ok {
		m = &memo{ready: make(chan struct{}), once: map[string]string{}}
		g.memos[key] = m
	}
	g.mu.Unlock()
	if ok {
		select {
		case <-m.ready:
		case <-ctx.Done():
			return nil, errs.Wrap(errs.ErrCanceled, "waiting for the conversation's approval state", ctx.Err())
		}
		if m.err != nil {
			return nil, m.err
		}
		return m, nil
	}
	// The first use of key since the start: restore what is stored.
	if g.opts.State != nil {
		items, err := g.opts.State.ConversationState(context.WithoutCancel(ctx), key)
		if err != nil {
			m.err = errs.Wrap(errs.ErrUnavailable, "restoring the conversation's approval state", err)
			g.mu.Lock()
			delete(g.memos, key)
			g.mu.Unlock()
			close(m.ready)
			return nil, m.err
		}
		for _, it := range items {
			switch it.Kind {
			case catalog.StateTaint:
				if !slices.Contains(m.read, it.Key) && len(m.read) < maxRead {
					m.read = append(m.read, it.Key)
				}
			case catalog.StateOnce:
				m.once[it.Key] = it.Value
			}
		}
	}
	close(m.ready)
	return m, nil
}

// decide asks about p when its policy (or the taint rule) says so, and
// returns the prepared call that may run: p itself, or a fresh preparation
// when the skill changed while the question was open. Targets are resolved
// before the question and again after the answer: a call whose targets or
// skill changed meanwhile is asked again with what is now true.
func (g *Gate) decide(ctx context.Context, c catalog.Call, p catalog.Prepared, o *Outcome) (catalog.Prepared, error) {
	var reason string // why the user is asked beyond the policy
	var ts []catalog.Target
	resolved := false
	for asks := 1; ; asks++ {
		info := p.Info()
		o.Info = info
		if !resolved {
			var err error
			if ts, err = p.Targets(ctx); err != nil {
				return p, fmt.Errorf("resolving what %s would touch: %w", info.Name, err)
			}
		}
		o.Targets = ts
		if t, bad := catalog.Refused(ts); bad {
			how := ""
			if asks > 1 {
				how = " (changed since it was approved)"
			}
			return p, errs.New(errs.ErrForbidden, fmt.Sprintf("%s would be refused: %s%s", info.Name, t.Refused, how))
		}
		req := Request{
			Conversation: c.Conversation, Scope: c.StateScope(), CallID: c.ID, Skill: info.Name, Type: info.Type,
			Permission: info.Permission, Policy: info.Policy, Version: info.Version, ModuleSHA256: info.SHA256,
			Arguments: c.Arguments, ArgumentsHash: c.ArgumentsHash, Touches: info.Touches, Grant: info.Grant,
			Targets: ts, fingerprint: info.Fingerprint(),
		}
		if c.Conversation == "" && req.Policy == catalog.Once {
			// A one-shot call is its own conversation: "once" asks every time.
			req.Policy = catalog.Always
		}
		if g.opts.Guard != nil {
			// The guard judges the resolved targets, not its own reading
			// of the arguments.
			if err := g.opts.Guard(ctx, req); err != nil {
				return p, err
			}
		}
		if why, err := g.taint(ctx, req.Scope, info, ts); err != nil {
			return p, err
		} else if why != "" && !g.settings().AllowAfterPrivateRead && reason == "" {
			req.Policy, reason = catalog.Always, why
		}
		if reason != "" {
			req.Policy, req.Reason, o.Reason = catalog.Always, reason, reason
		}
		o.Asked = o.Asked || req.Policy != catalog.Trust
		if err := g.Approve(ctx, req); err != nil {
			return p, err
		}
		if req.Policy == catalog.Trust {
			return p, nil
		}
		// The answer applies to the prepared call only if it is still
		// what the catalog serves, touching what was shown.
		why, err := p.Current(ctx)
		if err != nil {
			return p, err
		}
		if why != "" {
			p.Release()
			next, err := g.cat.Prepare(ctx, c)
			if err != nil {
				return nil, fmt.Errorf("%s changed while its approval was asked (%s): %w", info.Name, why, err)
			}
			p, resolved = next, false
			if asks == maxAsks {
				return p, errs.New(errs.ErrDenied, fmt.Sprintf("User denied execution of %s: the skill changed after each of %d approvals", info.Name, maxAsks))
			}
			reason = why + " while the question was open: approve the skill as it is now"
			continue
		}
		now, err := p.Targets(ctx)
		if err != nil {
			return p, fmt.Errorf("resolving what %s would touch: %w", info.Name, err)
		}
		if catalog.SameTargets(now, ts) {
			return p, nil
		}
		ts, resolved = now, true
		if asks == maxAsks {
			o.Targets = ts
			return p, errs.New(errs.ErrDenied, fmt.Sprintf("User denied execution of %s: what it would touch changed after each of %d approvals", info.Name, maxAsks))
		}
		reason = fmt.Sprintf("what %s would touch changed since it was approved (a file appeared or changed, or DNS answered differently): approve the new targets", info.Name)
	}
}

// taint says why a network call must be asked in a scope that has read
// private data, or "".
func (g *Gate) taint(ctx context.Context, scope string, info catalog.Info, ts []catalog.Target) (string, error) {
	if scope == "" || !(len(info.Grant.Hosts) > 0 || info.NetworkAccess || info.Permission == catalog.Network) {
		return "", nil
	}
	m, err := g.memo(ctx, scope)
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	read := slices.Clone(m.read)
	g.mu.Unlock()
	if len(read) == 0 {
		return "", nil
	}
	what := read[0]
	if len(read) > 1 {
		what += fmt.Sprintf(" (and %d more)", len(read)-1)
	}
	dest := info.Name
	for _, t := range ts {
		if t.Kind == catalog.TargetURL {
			dest = t.URL
			break
		}
	}
	return fmt.Sprintf("this conversation has read %s; running %s (%s) could send it out", what, info.Name, dest), nil
}

// noteRead marks the call's scope as having read private data after a call
// of a skill that may read files or memory ran (catalog.Info.PrivateData),
// and stores it before the call returns.
func (g *Gate) noteRead(ctx context.Context, c catalog.Call, info catalog.Info, ts []catalog.Target, res *catalog.Result, err error) error {
	scope := c.StateScope()
	if scope == "" || !info.PrivateData {
		return nil
	}
	var what []string
	if res != nil {
		what = append(what, res.Usage.Paths...)
	}
	if ue := usageOf(err); ue != nil {
		what = append(what, ue.Usage.Paths...)
	}
	if len(what) == 0 {
		if err != nil {
			return nil // nothing was read
		}
		for _, t := range ts {
			if t.Kind == catalog.TargetFile && t.Action == "read" {
				what = append(what, t.Path)
			}
		}
	}
	if len(what) == 0 {
		if info.Grant.Memory != "" {
			what = []string{"your memory (" + info.Name + ")"}
		} else {
			what = []string{"private data through " + info.Name}
		}
	}
	m, merr := g.memo(ctx, scope)
	if merr != nil {
		return merr
	}
	var added []catalog.StateItem
	g.mu.Lock()
	for _, w := range what {
		if !slices.Contains(m.read, w) && len(m.read) < maxRead {
			m.read = append(m.read, w)
			added = append(added, catalog.StateItem{Kind: catalog.StateTaint, Key: w})
		}
	}
	g.mu.Unlock()
	if len(added) == 0 || g.opts.State == nil {
		return nil
	}
	return g.opts.State.SaveConversationState(context.WithoutCancel(ctx), scope, added...)
}

func usageOf(err error) *catalog.UsageError {
	var ue *catalog.UsageError
	if err != nil && asUsage(err, &ue) {
		return ue
	}
	return nil
}

func asUsage(err error, ue **catalog.UsageError) bool { return errors.As(err, ue) }
