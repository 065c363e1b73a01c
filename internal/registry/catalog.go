package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
	"github.com/buddy-run/buddy/runtime"
)

// The registry is the ungated catalog behind the approval gate. Only cmd/ and
// the gate hold it as such; front ends hold the gate.
var _ catalog.Catalog = (*Registry)(nil)

// fingerprinter is what the registry needs of a store to notice installs and
// removals made by another process without listing every row on every call.
type fingerprinter interface {
	SkillsFingerprint(ctx context.Context) (string, error)
}

// refresh reconciles the installed skills with the store: a skill installed
// since is registered, a removed one is dropped (and closed once its running
// calls end), an upgraded one is replaced. Built-ins never change here: they
// come from the configuration (a new Registry on reload).
func (r *Registry) refresh(ctx context.Context) error {
	if r.opts.Store == nil {
		return nil
	}
	fp, ok := r.opts.Store.(fingerprinter)
	var mark string
	if ok {
		var err error
		if mark, err = fp.SkillsFingerprint(ctx); err != nil {
			return fmt.Errorf("checking installed skills: %w", err)
		}
		r.mu.RLock()
		same := mark == r.seen
		r.mu.RUnlock()
		if same {
			return nil
		}
	}
	rows, err := r.opts.Store.ListSkills(ctx)
	if err != nil {
		return fmt.Errorf("listing installed skills: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	present := map[string]bool{}
	var gone []*Skill
	for _, row := range rows {
		if reserved(row.Name) {
			continue
		}
		present[row.Name] = true
		old, had := r.skills[row.Name]
		if had && old.wasm != nil && !old.Builtin {
			continue // a module file run from the command line keeps its name here
		}
		if had && old.row.SHA256 == row.SHA256 && old.row.UpdatedAt.Equal(row.UpdatedAt) && old.row.WasmPath == row.WasmPath {
			continue
		}
		if had {
			gone = append(gone, old)
		}
		r.addInstalled(ctx, row)
	}
	for name, s := range r.skills {
		if !s.Builtin && !present[name] && s.wasm == nil {
			gone = append(gone, s)
			delete(r.skills, name)
		}
	}
	r.seen = mark
	for _, s := range gone {
		go func() {
			s.calls.Wait()
			_ = s.unload(context.WithoutCancel(ctx))
		}()
	}
	return nil
}

// acquire returns the skill called name, counted as running a call until
// release.
func (r *Registry) acquire(ctx context.Context, name string) (*Skill, error) {
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	r.mu.RLock()
	s, ok := r.skills[name]
	if ok {
		s.calls.Add(1)
	}
	r.mu.RUnlock()
	if !ok {
		_, err := r.get(name)
		return nil, err
	}
	return s, nil
}

// List implements catalog.Catalog.
func (r *Registry) List(ctx context.Context) ([]catalog.Info, error) {
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	skills := r.Skills()
	out := make([]catalog.Info, 0, len(skills))
	for _, s := range skills {
		out = append(out, s.Info())
	}
	return out, nil
}

// Lookup implements catalog.Catalog.
func (r *Registry) Lookup(ctx context.Context, name string) (catalog.Info, error) {
	if err := r.refresh(ctx); err != nil {
		return catalog.Info{}, err
	}
	s, err := r.Get(name)
	if err != nil {
		return catalog.Info{}, err
	}
	return s.Info(), nil
}

// Check implements catalog.Catalog: the skill exists, can run, and the
// arguments fit its input schema.
func (r *Registry) Check(ctx context.Context, c catalog.Call) (catalog.Info, error) {
	info, err := r.Lookup(ctx, c.Skill)
	if err != nil {
		return catalog.Info{}, err
	}
	if !info.Ready() {
		return info, errs.New(problemKind(info.Status), fmt.Sprintf("skill %s cannot run: %s", info.Name, info.Problem))
	}
	s, err := r.get(c.Skill)
	if err != nil {
		return catalog.Info{}, err
	}
	if err := checkArguments(s.Name, s.Manifest, c); err != nil {
		return info, err
	}
	return info, nil
}

// checkArguments validates a call's input: a JSON object fitting the schema
// ("" means {}), or any bytes for a raw call of a skill with no schema.
func checkArguments(name string, m *runtime.Manifest, c catalog.Call) error {
	if c.Raw {
		if m.InputSchema != nil {
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("skill %s declares an input schema: pass a JSON object, not raw input", name))
		}
		return nil
	}
	in := []byte(c.Arguments)
	if len(in) == 0 {
		in = []byte("{}")
	}
	return ValidateInput(m.InputSchema, in)
}

func problemKind(status string) error {
	if status == string(StatusVerificationFailed) {
		return errs.ErrForbidden
	}
	return errs.ErrUnavailable
}

// Invoke implements catalog.Catalog. It does not ask for approval: the gate
// in front of it does.
func (r *Registry) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	s, err := r.acquire(ctx, c.Skill)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	if err := checkArguments(s.Name, s.Manifest, c); err != nil {
		return nil, err
	}
	in := []byte(c.Arguments)
	if len(in) == 0 && !c.Raw {
		in = []byte("{}")
	}
	mod, err := r.load(ctx, s)
	if err != nil {
		return nil, err
	}
	var used hostfns.Usage
	res, err := mod.Call(hostfns.WithUsage(ctx, &used), in)
	if err != nil {
		if u := usage(&used); !u.Empty() {
			return nil, &catalog.UsageError{Err: err, Usage: u}
		}
		return nil, err
	}
	return &catalog.Result{
		Skill: s.Name, Version: s.Manifest.Version, SHA256: s.SHA256,
		Output: res.Output, Fuel: res.Fuel, Duration: res.Duration, Usage: usage(&used),
	}, nil
}

// Info describes s for front ends.
func (s *Skill) Info() catalog.Info {
	m := s.Manifest
	info := catalog.Info{
		Name: s.Name, Version: m.Version, Description: m.Description, Author: m.Author,
		Builtin: s.Builtin, Permission: catalog.Permission(m.Permission), Policy: s.Approval,
		InputSchema: m.InputSchema, Touches: Touches(s.Grants), Status: string(s.Status), SHA256: s.SHA256,
		PrivateData:   len(s.Grants.Read) > 0 || s.Grants.Namespace != "",
		NetworkAccess: len(s.Grants.Domains) > 0,
	}
	if s.Problem != nil {
		info.Problem = s.Problem.Error()
	}
	return info
}

// Touches says in plain words what a grant lets a skill touch.
func Touches(g hostfns.Grants) []string {
	var out []string
	for _, d := range g.Read {
		out = append(out, "read files in "+d)
	}
	for _, d := range g.Write {
		out = append(out, "write files in "+d)
	}
	for _, d := range g.Domains {
		out = append(out, "GET http(s) URLs on "+d.String())
	}
	if len(g.Env) > 0 {
		env := append([]string(nil), g.Env...)
		sort.Strings(env)
		out = append(out, "read environment variables "+strings.Join(env, ", "))
	}
	if g.Namespace != "" {
		out = append(out, "read and write its memory ("+g.Namespace+")")
	}
	return out
}

// AddModule registers a module file given on the command line (`skill run
// FILE.wasm`) under its manifest's name, with the operator's [skills.NAME]
// section as its grant, as for an installed skill. It may not borrow a
// built-in's name, its grants or the memory built-ins' namespace.
func (r *Registry) AddModule(ctx context.Context, m *runtime.Manifest, wasm []byte) error {
	if reserved(m.Name) {
		return errs.New(errs.ErrForbidden, fmt.Sprintf("skill name %q belongs to a built-in; rename it in skill.toml", m.Name))
	}
	sk := r.newSkill(m.Name, m, r.opts.Config.Skills[m.Name], false)
	sk.wasm = wasm
	sum := sha256.Sum256(wasm)
	sk.SHA256 = hex.EncodeToString(sum[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.skills[m.Name]; ok {
		go func() {
			old.calls.Wait()
			_ = old.unload(context.WithoutCancel(ctx))
		}()
	}
	r.skills[m.Name] = sk
	return nil
}
