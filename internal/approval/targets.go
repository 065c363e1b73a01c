package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
)

// maxAsks is how often one call is asked about before the gate gives up on
// targets that keep changing between the answer and the call.
const maxAsks = 3

// privateSkills read private data whatever their grant says.
var privateSkills = []string{"read_file", "memory_read", "recall"}

// resolve returns what c would touch, when the catalog can say.
func (g *Gate) resolve(ctx context.Context, c catalog.Call) ([]catalog.Target, error) {
	r, ok := g.cat.(catalog.Resolver)
	if !ok {
		return nil, nil
	}
	ts, err := r.Resolve(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("resolving what %s would touch: %w", c.Skill, err)
	}
	return ts, nil
}

// Resolve implements catalog.Resolver over the gate's catalog.
func (g *Gate) Resolve(ctx context.Context, c catalog.Call) ([]catalog.Target, error) {
	return g.resolve(ctx, c)
}

// approveTargets resolves what the call would touch, refuses it without
// asking if a target is refused, asks (more often than the policy does after
// a private read), and resolves again after the answer: a call whose targets
// changed meanwhile is asked again with the new ones.
func (g *Gate) approveTargets(ctx context.Context, c catalog.Call, info catalog.Info, req *Request, o *Outcome) error {
	ts, err := g.resolve(ctx, c)
	if err != nil {
		return err
	}
	req.Targets, o.Targets = ts, ts
	if t, bad := catalog.Refused(ts); bad {
		return errs.New(errs.ErrForbidden, fmt.Sprintf("%s would be refused: %s", info.Name, t.Refused))
	}
	if g.opts.Guard != nil {
		// The guard judges the resolved targets, not its own reading of
		// the arguments.
		if err := g.opts.Guard(ctx, *req); err != nil {
			return err
		}
	}
	if why := g.taint(c.Conversation, info, ts); why != "" && !g.opts.AllowAfterPrivateRead {
		req.Policy, req.Reason, o.Reason = catalog.Always, why, why
	}
	for asks := 1; ; asks++ {
		o.Asked = o.Asked || req.Policy != catalog.Trust
		if err := g.Approve(ctx, *req); err != nil {
			return err
		}
		if req.Policy == catalog.Trust || g.cat == nil {
			return nil
		}
		if _, ok := g.cat.(catalog.Resolver); !ok {
			return nil
		}
		now, err := g.resolve(ctx, c)
		if err != nil {
			return err
		}
		if catalog.SameTargets(now, req.Targets) {
			return nil
		}
		req.Targets, o.Targets = now, now
		if t, bad := catalog.Refused(now); bad {
			return errs.New(errs.ErrForbidden, fmt.Sprintf("%s would be refused: %s (changed since it was approved)", info.Name, t.Refused))
		}
		if asks == maxAsks {
			return errs.New(errs.ErrDenied, fmt.Sprintf("User denied execution of %s: what it would touch changed after each of %d approvals", info.Name, maxAsks))
		}
		why := fmt.Sprintf("what %s would touch changed since it was approved (a file appeared or changed, or DNS answered differently): approve the new targets", info.Name)
		req.Policy, req.Reason, o.Reason = catalog.Always, why, why
	}
}

// taint says why a network call must be asked in a conversation that has
// read private data, or "".
func (g *Gate) taint(conv string, info catalog.Info, ts []catalog.Target) string {
	if conv == "" || !(info.NetworkAccess || info.Permission == catalog.Network) {
		return ""
	}
	g.mu.Lock()
	read := slices.Clone(g.read[conv])
	g.mu.Unlock()
	if len(read) == 0 {
		return ""
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
	return fmt.Sprintf("this conversation has read %s; running %s (%s) could send it out", what, info.Name, dest)
}

// noteRead marks the conversation as having read private data after a call
// of a skill that reads files or memory ran.
func (g *Gate) noteRead(c catalog.Call, info catalog.Info, ts []catalog.Target, res *catalog.Result, err error) {
	if c.Conversation == "" || !(info.PrivateData || slices.Contains(privateSkills, info.Name)) {
		return
	}
	var what []string
	if res != nil {
		what = append(what, res.Usage.Paths...)
	}
	var ue *catalog.UsageError
	if err != nil && asUsage(err, &ue) {
		what = append(what, ue.Usage.Paths...)
	}
	if len(what) == 0 {
		if err != nil {
			return // nothing was read
		}
		for _, t := range ts {
			if t.Kind == catalog.TargetFile && t.Action == "read" {
				what = append(what, t.Path)
			}
		}
	}
	if len(what) == 0 {
		if strings.HasPrefix(info.Name, "memory") || info.Name == "recall" {
			what = []string{"your memory (" + info.Name + ")"}
		} else {
			what = []string{"private data through " + info.Name}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range what {
		if !slices.Contains(g.read[c.Conversation], w) && len(g.read[c.Conversation]) < 64 {
			g.read[c.Conversation] = append(g.read[c.Conversation], w)
		}
	}
}

func asUsage(err error, ue **catalog.UsageError) bool { return errors.As(err, ue) }
