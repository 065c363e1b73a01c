package skillmd

import (
	"context"
	"strings"

	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/catalog"
)

// Call is what the guard is shown of a call the gate has prepared.
type Call struct {
	Scope   string // the conversation's (catalog.Call.StateScope)
	Skill   string
	Type    string           // "" for a WebAssembly skill, else a SKILL.md skill's type
	Targets []catalog.Target // what it would touch, resolved by the host functions' own code
	Grant   catalog.Grant    // what it may touch
}

// Guard is the approval gate's guard (approval.Options.Guard): while a
// SKILL.md skill with permissions is active in the call's scope, what the
// call would touch must fit the active declarations (Check), else the call
// is refused (errs.ErrForbidden) before anyone is asked.
func (ss *Sessions) Guard(ctx context.Context, c Call) error {
	if ss == nil || c.Scope == "" {
		return nil
	}
	active, err := ss.Active(ctx, c.Scope)
	if err != nil || len(active) == 0 {
		return err
	}
	return ss.Check(ctx, c.Scope, c.Skill, callAccess(c))
}

// callAccess says what a call would touch: its resolved targets (the paths
// and the host read_file, write_file and fetch_url would touch); for a
// WebAssembly skill whose targets are not known, everything its grant allows
// (its arguments mean nothing to buddy); for a SKILL.md skill, nothing.
func callAccess(c Call) []Access {
	if c.Type != "" {
		return nil // a SKILL.md skill touches nothing
	}
	var out []Access
	for _, t := range c.Targets {
		switch t.Kind {
		case catalog.TargetFile:
			kind := Read
			if t.Action != "read" {
				kind = Write
			}
			out = append(out, Access{Kind: kind, Target: osfile.RealPath(t.Path)})
		case catalog.TargetURL:
			port := t.Port
			if port == 0 {
				port = 443
				if t.Scheme == "http" {
					port = 80
				}
			}
			out = append(out, Access{Kind: Network, Target: strings.ToLower(t.Host), Port: port})
		}
	}
	if len(out) > 0 {
		return out
	}
	return grantAccess(c.Grant)
}

// grantAccess is everything a grant allows, as trees.
func grantAccess(g catalog.Grant) []Access {
	var out []Access
	for _, d := range g.Read {
		out = append(out, Access{Kind: Read, Target: osfile.RealPath(d), Tree: true})
	}
	for _, d := range g.Write {
		out = append(out, Access{Kind: Write, Target: osfile.RealPath(d), Tree: true})
	}
	for _, h := range g.Hosts {
		host := h.Host
		switch {
		case h.Any:
			host = "*"
		case h.Wildcard:
			host = "*." + host
		}
		out = append(out, Access{Kind: Network, Target: host, Port: h.Port, Tree: true})
	}
	for _, v := range g.Env {
		out = append(out, Access{Kind: Env, Target: v})
	}
	return out
}
