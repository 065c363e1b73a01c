package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
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

// Prepare implements catalog.Catalog: the skill is looked up once (seeing
// installs and removals made meanwhile), must be ready, and the arguments
// must fit its input schema. The prepared call holds the skill: it runs the
// module and grants it was prepared with, even if the skill is replaced
// before it runs (Current says so).
func (r *Registry) Prepare(ctx context.Context, c catalog.Call) (catalog.Prepared, error) {
	s, err := r.acquire(ctx, c.Skill)
	if err != nil {
		return nil, err
	}
	p := &prepared{r: r, s: s, call: c, info: s.Info()}
	if !p.info.Ready() {
		p.Release()
		return nil, errs.New(problemKind(p.info.Status), fmt.Sprintf("skill %s cannot run: %s", p.info.Name, p.info.Problem))
	}
	if err := checkArguments(s.Name, s.Manifest, c); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// prepared is a call of one registered skill, ready to run.
type prepared struct {
	r    *Registry
	s    *Skill
	call catalog.Call
	info catalog.Info
	done atomic.Bool // ran or released
}

var _ catalog.Prepared = (*prepared)(nil)

func (p *prepared) Info() catalog.Info { return p.info }

// Targets implements catalog.Prepared with the skill's own host functions.
func (p *prepared) Targets(ctx context.Context) ([]catalog.Target, error) {
	return p.r.resolve(ctx, p.s, p.call)
}

// Current implements catalog.Prepared: the registry still serves the same
// skill (installs, upgrades and removals made since are seen).
func (p *prepared) Current(ctx context.Context) (string, error) {
	if err := p.r.refresh(ctx); err != nil {
		return "", err
	}
	p.r.mu.RLock()
	now, ok := p.r.skills[p.s.Name]
	p.r.mu.RUnlock()
	switch {
	case !ok:
		return fmt.Sprintf("%s was removed", p.s.Name), nil
	case now == p.s:
		if why := p.s.problem(); why != nil {
			return fmt.Sprintf("%s can no longer run: %s", p.s.Name, why), nil
		}
		return "", nil
	}
	return changedOr(p.info, now.Info(), p.s.Name), nil
}

// changedOr is catalog.Changed, or a note that the skill was replaced by
// an equal one (the same module and grants: still current).
func changedOr(was, now catalog.Info, name string) string {
	if !now.Ready() {
		return fmt.Sprintf("%s can no longer run: %s", name, now.Problem)
	}
	return catalog.Changed(was, now)
}

// Run implements catalog.Prepared.
func (p *prepared) Run(ctx context.Context) (*catalog.Result, error) {
	if p.done.Swap(true) {
		return nil, catalog.ErrAlreadyRun
	}
	defer p.s.calls.Done()
	return p.r.run(ctx, p.s, p.call)
}

// Release implements catalog.Prepared.
func (p *prepared) Release() {
	if !p.done.Swap(true) {
		p.s.calls.Done()
	}
}

// validations counts checkArguments (tests: one validation per call).
var validations atomic.Int64

// checkArguments validates a call's input: a JSON object fitting the schema
// ("" means {}), or any bytes for a raw call of a skill with no schema.
func checkArguments(name string, m *runtime.Manifest, c catalog.Call) error {
	validations.Add(1)
	if c.Raw {
		if m.DeclaresInput() {
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

// Invoke prepares and runs c without asking: for cmd/ and tests only (the
// gate in front of the registry asks).
func (r *Registry) Invoke(ctx context.Context, c catalog.Call) (*catalog.Result, error) {
	p, err := r.Prepare(ctx, c)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx)
}

// run runs a prepared call of s.
func (r *Registry) run(ctx context.Context, s *Skill, c catalog.Call) (*catalog.Result, error) {
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
		InputSchema: m.InputSchema, Touches: Touches(s.Grants), SHA256: s.SHA256,
		PrivateData:   len(s.Grants.Read) > 0 || s.Grants.Namespace != "",
		NetworkAccess: len(s.Grants.Domains) > 0,
		Grant:         grantOf(s.Grants),
	}
	s.state.Lock()
	info.Status = string(s.Status)
	if s.Problem != nil {
		info.Problem = s.Problem.Error()
	}
	s.state.Unlock()
	return info.WithFingerprint(s.fingerprint)
}

// grantOf is a grant as the catalog shows it.
func grantOf(g hostfns.Grants) catalog.Grant {
	out := catalog.Grant{Read: g.Read, Write: g.Write, Env: g.Env, Memory: g.Namespace}
	for _, d := range g.Domains {
		out.Hosts = append(out.Hosts, catalog.HostGrant{Host: d.Host(), Wildcard: d.Wildcard(), Any: d.Any(), Port: int(d.Port())})
	}
	for _, c := range g.Credentials {
		out.Credentials = append(out.Credentials, catalog.CredentialGrant{Name: c.Name, Hosts: allow.Strings(c.Hosts)})
	}
	return out
}

// fingerprint digests what an approval of s covers beyond the arguments:
// the module, the effective manifest (limits, schema, permission), the
// grants and the policy (catalog.Info.Fingerprint).
func fingerprint(s *Skill) string {
	h := sha256.New()
	m := s.Manifest
	fmt.Fprintf(h, "buddy-skill/1\x00%s\x00%s\x00%s\x00%s\x00%s\x00%+v\x00", s.Name, s.SHA256, m.Version, m.Permission, s.Approval, m.Resources)
	schema, _ := json.Marshal(m.InputSchema)
	h.Write(schema)
	g := s.Grants
	fmt.Fprintf(h, "\x00%q\x00%q\x00%q\x00%s\x00%d\x00%d\x00%d\x00%s", g.Read, g.Write, g.Env, g.Namespace, g.MaxReadBytes, g.MaxWriteBytes, g.MaxFetchBytes, g.FetchTimeout)
	if g.Schedule {
		h.Write([]byte("\x00schedule"))
	}
	for _, d := range g.Domains {
		fmt.Fprintf(h, "\x00%s|%t", d.String(), d.Local())
	}
	for _, c := range g.Credentials {
		fmt.Fprintf(h, "\x00credential %q %q %q", c.Name, c.As, c.Param)
		for _, d := range c.Hosts {
			fmt.Fprintf(h, "|%s|%t", d.String(), d.Local())
		}
	}
	return hex.EncodeToString(h.Sum(nil))
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
		out = append(out, "send HTTP requests to "+d.String())
	}
	if len(g.Domains) > 0 {
		out = append(out, NetworkMethods)
	}
	if len(g.Env) > 0 {
		env := append([]string(nil), g.Env...)
		sort.Strings(env)
		out = append(out, "read environment variables "+strings.Join(env, ", "))
	}
	if g.Namespace != "" {
		out = append(out, "read and write its memory ("+g.Namespace+")")
	}
	for _, c := range g.Credentials {
		out = append(out, fmt.Sprintf("have buddy send the credential %s (%s) to %s", c.Name, credentialWay(c.As, c.Param), strings.Join(allow.Strings(c.Hosts), ", ")))
	}
	if g.Schedule {
		out = append(out, "create, list and remove scheduled reminders and checks")
	}
	return out
}

// NetworkMethods says, in the words of Touches, what the requests of a
// network grant may be: every network grant links http_request, whatever
// the module imports.
var NetworkMethods = "send requests of the methods " + buddyhttp.RequestsInWords()

// credentialWay says how a credential is sent, in a few words.
func credentialWay(as, param string) string {
	switch as {
	case "header":
		return "header " + param
	case "query":
		return "query parameter " + param
	}
	return as
}

// AddModule registers a module file given on the command line (`skill run
// FILE.wasm`) under its manifest's name, with the operator's [skills.NAME]
// section as its grant, as for an installed skill. It may not borrow a
// built-in's name, its grants or the memory built-ins' namespace.
func (r *Registry) AddModule(ctx context.Context, m *runtime.Manifest, wasm []byte) error {
	if why := builtins.Reserved(m.Name); why != "" {
		return errs.New(errs.ErrForbidden, why)
	}
	sk := r.newSkill(m.Name, m, r.opts.Config.Skills[m.Name], false)
	sk.wasm = wasm
	sum := sha256.Sum256(wasm)
	sk.SHA256 = hex.EncodeToString(sum[:])
	sk.fingerprint = fingerprint(sk)
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
