package catalog

import (
	"context"
	"fmt"
	"sync"
)

// Prepared is one call made ready to run: the skill looked up once, the
// arguments validated once, the module (its sha256) and the effective
// grants fixed. The approval gate asks about a Prepared and runs exactly
// it: if the catalog stops serving the same skill while the question is
// open (an upgrade, a removal, a reload that changed its grants or policy),
// Current says so and the gate prepares and decides afresh instead of
// running under the old answer.
//
//	p, err := cat.Prepare(ctx, c) // one lookup, one validation
//	if err != nil { ... }
//	defer p.Release()
//	ts, _ := p.Targets(ctx)       // what it would touch now
//	... ask about p.Info() and ts ...
//	if why, _ := p.Current(ctx); why != "" { /* prepare again and ask again */ }
//	res, err := p.Run(ctx)
type Prepared interface {
	// Info is the skill as prepared: Info().SHA256 is the module that
	// runs, Info().Grant what it may touch, Info().Policy when to ask.
	Info() Info
	// Targets returns what the call would touch now, resolved by the
	// prepared skill's own host functions without side effect; nil when
	// the skill's targets cannot be known from its arguments.
	Targets(ctx context.Context) ([]Target, error)
	// Current returns "" while the catalog still serves the prepared skill
	// unchanged (the same module, grants, limits and policy), or why not
	// in plain words ("its module changed from 1a2b… to 3c4d…").
	Current(ctx context.Context) (string, error)
	// Run runs the prepared call. A Prepared runs at most once; Run
	// releases it.
	Run(ctx context.Context) (*Result, error)
	// Release frees a prepared call that will not run (idempotent).
	Release()
}

// ErrAlreadyRun is returned by Run on a Prepared that already ran or was
// released.
var ErrAlreadyRun = fmt.Errorf("catalog: a prepared call runs once")

// Fingerprint is a short stable digest of what an approval of a skill
// covers beyond the call's arguments: the module, the grants, the limits
// and the policy. Two preparations of one skill with equal fingerprints
// run the same code under the same grants.
func (i Info) Fingerprint() string { return i.fingerprint }

// WithFingerprint returns i with its fingerprint set (catalogs compute it
// once, when a skill is registered).
func (i Info) WithFingerprint(fp string) Info {
	i.fingerprint = fp
	return i
}

// Changed says in plain words how now differs from was, "" when it does
// not: the module, then the version, the grants or limits, the policy.
func Changed(was, now Info) string {
	if was.Fingerprint() == now.Fingerprint() && was.SHA256 == now.SHA256 && was.Policy == now.Policy {
		return ""
	}
	switch {
	case was.SHA256 != now.SHA256:
		return fmt.Sprintf("the module of %s changed (sha256 %s → %s, version %s → %s)", now.Name, short(was.SHA256), short(now.SHA256), orNone(was.Version), orNone(now.Version))
	case was.Policy != now.Policy:
		return fmt.Sprintf("the approval policy of %s changed (%s → %s)", now.Name, was.Policy, now.Policy)
	default:
		return fmt.Sprintf("the grants or limits of %s changed", now.Name)
	}
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + "…"
	}
	return orNone(sum)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Checker is a simple catalog that checks and invokes calls by name (a test
// fake, an in-memory catalog): PrepareChecked prepares its calls.
type Checker interface {
	Lookup(ctx context.Context, name string) (Info, error)
	Check(ctx context.Context, c Call) (Info, error)
	Invoke(ctx context.Context, c Call) (*Result, error)
}

// PrepareChecked prepares c on a Checker: Check now, Resolve (when cat is a
// Resolver) for Targets, Lookup for Current, Invoke for Run.
func PrepareChecked(ctx context.Context, cat Checker, c Call) (Prepared, error) {
	info, err := cat.Check(ctx, c)
	if err != nil {
		return nil, err
	}
	return &checked{cat: cat, call: c, info: info}, nil
}

type checked struct {
	cat  Checker
	call Call
	info Info
	once sync.Once
}

func (p *checked) Info() Info { return p.info }

func (p *checked) Targets(ctx context.Context) ([]Target, error) {
	if r, ok := p.cat.(Resolver); ok {
		return r.Resolve(ctx, p.call)
	}
	return nil, nil
}

func (p *checked) Current(ctx context.Context) (string, error) {
	now, err := p.cat.Lookup(ctx, p.info.Name)
	if err != nil {
		return fmt.Sprintf("%s is no longer registered", p.info.Name), nil
	}
	return Changed(p.info, now), nil
}

func (p *checked) Run(ctx context.Context) (*Result, error) {
	ran := true
	p.once.Do(func() { ran = false })
	if ran {
		return nil, ErrAlreadyRun
	}
	return p.cat.Invoke(ctx, p.call)
}

func (p *checked) Release() { p.once.Do(func() {}) }
