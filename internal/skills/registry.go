// Package skills knows every skill buddy can run: the built-ins enabled in
// buddy.toml and the skills installed in the store. For each it computes the
// effective grant — the intersection of what its manifest declares and what
// the operator grants — and the effective limits, and it loads the module into
// the runtime on first use, verifying an installed module's sha256 every time.
//
//	reg, err := skills.New(ctx, skills.Options{Runtime: rt, Config: cfg, Store: st, Deps: deps})
//	if err != nil { ... }                         // config errors: a built-in granted nothing
//	defer reg.Close(ctx)
//	for _, s := range reg.Skills() { fmt.Println(s.Name, s.Manifest.Permission, s.Status) }
//	res, err := reg.Call(ctx, "read_file", []byte(`{"path":"notes.txt"}`))
//
// The rules are documented in docs/CONFIG.md ("Effective grants").
package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	buddyhttp "github.com/buddy-run/buddy/hostfns/http"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// MemorySection is the buddy.toml section that enables the memory built-ins,
// and MemoryNamespace the namespace they share (owned by builtins-wasm).
const (
	MemorySection   = builtins.MemorySection
	MemoryNamespace = builtins.MemoryNamespace
)

// ScheduleSkill is the built-in that creates scheduled jobs: the one skill
// the schedule host function is granted to.
const ScheduleSkill = "schedule"

// IsMemoryBuiltin reports whether name is one of the four memory built-ins.
func IsMemoryBuiltin(name string) bool { return builtins.IsMemory(name) }

// Status of a skill in the registry.
type Status string

const (
	StatusReady              Status = catalog.StatusReady              // can be called
	StatusVerificationFailed Status = catalog.StatusVerificationFailed // the module on disk is not what was installed
	StatusUnavailable        Status = catalog.StatusUnavailable        // cannot run: see Skill.Problem
)

// Installed is what the registry needs of the store.
type Installed interface {
	ListSkills(ctx context.Context) ([]store.InstalledSkill, error)
	SetSkillStatus(ctx context.Context, name, status string) error
}

// Options configure a Registry.
type Options struct {
	Runtime *runtime.Runtime
	Config  *config.Config
	// Store lists installed skills; nil = built-ins only.
	Store Installed
	// Deps are handed to hostfns.Link (the store as KV and Memories, ...).
	Deps hostfns.Deps
}

// Skill is one registered skill. Skills and Get return snapshots: Status and
// Problem may change when the skill is loaded (a module that no longer
// verifies, an import not granted); ask again to see it.
type Skill struct {
	Name     string
	Builtin  bool
	Manifest *runtime.Manifest // with the effective resources
	Declared runtime.Resources // what the manifest asked for
	Grants   hostfns.Grants
	Approval catalog.Policy
	Status   Status
	Problem  error  // why the skill cannot run, when Status is not ready
	SHA256   string // of the module
	WasmPath string // installed skills: the module file

	wasm []byte               // built-ins and module files
	row  store.InstalledSkill // installed skills: the row it was made from
	// fingerprint is catalog.Info.Fingerprint, fixed when s is made.
	fingerprint string

	// calls counts the calls running on mod, so that a skill removed or
	// replaced while the server runs is closed only once they are done.
	calls sync.WaitGroup

	mu   sync.Mutex // held while loading
	mod  *runtime.Module
	host *hostfns.Set

	// state guards Status and Problem once the registry is shared; it is
	// never held for long, so listing skills does not wait for a compile.
	state sync.Mutex
}

// snapshot copies the exported fields of s.
func (s *Skill) snapshot() *Skill {
	s.state.Lock()
	defer s.state.Unlock()
	return &Skill{
		Name: s.Name, Builtin: s.Builtin, Manifest: s.Manifest, Declared: s.Declared, Grants: s.Grants,
		Approval: s.Approval, Status: s.Status, Problem: s.Problem, SHA256: s.SHA256, WasmPath: s.WasmPath,
		fingerprint: s.fingerprint,
	}
}

// fail records why s cannot run.
func (s *Skill) fail(status Status, problem error) {
	s.state.Lock()
	s.Status, s.Problem = status, problem
	s.state.Unlock()
}

// problem is why s cannot run, or nil.
func (s *Skill) problem() error {
	s.state.Lock()
	defer s.state.Unlock()
	return s.Problem
}

// Registry holds the registered skills. It is safe for concurrent use, and it
// sees skills installed, upgraded or removed by another process (the CLI while
// the server runs) at the next List, Lookup, Check or Invoke.
type Registry struct {
	opts Options

	mu     sync.RWMutex
	skills map[string]*Skill
	// seen is the store's fingerprint of installed_skills when skills was
	// last reconciled with it.
	seen string
}

// New registers the enabled built-ins and the installed skills. A built-in
// whose section grants it nothing it could use is a configuration error.
func New(ctx context.Context, opts Options) (*Registry, error) {
	if opts.Runtime == nil || opts.Config == nil {
		return nil, errs.New(errs.ErrInternal, "registry needs a runtime and a config")
	}
	r := &Registry{opts: opts, skills: map[string]*Skill{}}
	cfg := opts.Config
	var problems []string
	for _, b := range builtins.All() {
		m, err := runtime.ParseManifest(b.Manifest)
		if err != nil {
			return nil, fmt.Errorf("built-in %s: %w", b.Name, err)
		}
		sec, ok := BuiltinSection(cfg, b.Name, m.Permission)
		if !ok {
			continue // a built-in with no section is not registered
		}
		sk := r.newSkill(b.Name, m, sec, true)
		sk.wasm = b.Wasm
		sum := sha256.Sum256(b.Wasm)
		sk.SHA256 = hex.EncodeToString(sum[:])
		sk.fingerprint = fingerprint(sk)
		if msg := missingGrant(b.Name, m, sk.Grants); msg != "" {
			problems = append(problems, msg)
		}
		if IsMemoryBuiltin(b.Name) && (opts.Deps.KV == nil || opts.Deps.Memories == nil) {
			sk.Status, sk.Problem = StatusUnavailable, errs.New(errs.ErrConfig, "the memory skills need the store")
		}
		r.skills[b.Name] = sk
	}
	if len(problems) > 0 {
		return nil, errs.New(errs.ErrConfig, strings.Join(problems, "; "))
	}
	if opts.Store != nil {
		rows, err := opts.Store.ListSkills(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing installed skills: %w", err)
		}
		for _, row := range rows {
			if reserved(row.Name) {
				// The installer refuses these names; a row that has one
				// anyway (an older buddy, a hand-edited database) never
				// takes a built-in's place, enabled or not.
				continue
			}
			r.addInstalled(ctx, row)
		}
	}
	return r, nil
}

// BuiltinSection returns the buddy.toml section that enables a built-in of
// permission level perm: its own, or [skills.memory] for the memory skills
// (their own section, when present, overrides approval and limits). The
// approval of [skills.memory] applies to the mutating memory skills only: the
// read-only ones keep their default (trust) unless their own section sets one.
func BuiltinSection(cfg *config.Config, name string, perm runtime.Permission) (config.Skill, bool) {
	own, hasOwn := cfg.Skills[name]
	if !IsMemoryBuiltin(name) {
		return own, hasOwn
	}
	mem, hasMem := cfg.Skills[MemorySection]
	if !hasOwn && !hasMem {
		return config.Skill{}, false
	}
	merged := mem
	merged.Memory = true
	if perm == runtime.ReadOnly {
		merged.Approval = ""
	}
	if hasOwn {
		if own.Approval != "" {
			merged.Approval = own.Approval
		}
		if own.Timeout != 0 {
			merged.Timeout = own.Timeout
		}
		if own.Fuel != 0 {
			merged.Fuel = own.Fuel
		}
		if own.MaxBytes != 0 {
			merged.MaxBytes = own.MaxBytes
		}
	}
	return merged, true
}

// reserved reports whether name belongs to buddy: a built-in's, or the memory
// built-ins' section (builtins.Reserved).
func reserved(name string) bool { return builtins.Reserved(name) != "" }

// missingGrant explains a built-in that could do nothing with its grant.
func missingGrant(name string, m *runtime.Manifest, g hostfns.Grants) string {
	c := m.Capabilities
	switch {
	case c.FilesRead && !c.FilesWrite && len(g.Read) == 0:
		return fmt.Sprintf("skills.%s: no allowed_directories: %s could read nothing", name, name)
	case c.FilesWrite && !c.FilesRead && len(g.Write) == 0:
		return fmt.Sprintf("skills.%s: no allowed_directories: %s could write nothing", name, name)
	case len(c.Network) > 0 && len(g.Domains) == 0:
		return fmt.Sprintf("skills.%s: no allowed_domains: %s could reach nothing", name, name)
	}
	return ""
}

func (r *Registry) newSkill(name string, m *runtime.Manifest, sec config.Skill, builtin bool) *Skill {
	eff := EffectiveManifest(m, sec, r.opts.Config.Limits)
	return &Skill{
		Name:     name,
		Builtin:  builtin,
		Manifest: eff,
		Declared: m.Resources,
		Grants:   EffectiveGrants(name, m, sec, r.opts.Config.Limits),
		Approval: EffectiveApproval(m.Permission, sec.Approval),
		Status:   StatusReady,
	}
}

func (r *Registry) addInstalled(ctx context.Context, row store.InstalledSkill) {
	m, err := runtime.ParseManifest([]byte(row.Manifest))
	if err != nil {
		sk := &Skill{Name: row.Name, Status: StatusUnavailable, WasmPath: row.WasmPath, SHA256: row.SHA256,
			Manifest: runtime.DefaultManifest(row.Name), Approval: catalog.Always, row: row,
			Problem: fmt.Errorf("stored manifest: %w", err)}
		sk.fingerprint = fingerprint(sk)
		r.skills[row.Name] = sk
		return
	}
	sec := r.opts.Config.Skills[row.Name]
	sk := r.newSkill(row.Name, m, sec, false)
	sk.WasmPath, sk.SHA256, sk.row = row.WasmPath, row.SHA256, row
	sk.fingerprint = fingerprint(sk)
	if _, err := r.verify(sk); err != nil {
		sk.Status, sk.Problem = StatusVerificationFailed, err
		if row.Status != string(StatusVerificationFailed) {
			_ = r.opts.Store.SetSkillStatus(ctx, row.Name, string(StatusVerificationFailed))
		}
	} else if row.Status == string(StatusVerificationFailed) {
		_ = r.opts.Store.SetSkillStatus(ctx, row.Name, store.StatusVerified)
	}
	r.skills[row.Name] = sk
}

// verify reads an installed module and checks it against the recorded sha256.
func (r *Registry) verify(sk *Skill) ([]byte, error) {
	data, err := os.ReadFile(sk.WasmPath)
	if err != nil {
		return nil, errs.Wrap(errs.ErrForbidden, fmt.Sprintf("verification failed: cannot read %s", sk.WasmPath), err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != sk.SHA256 {
		return nil, errs.New(errs.ErrForbidden, fmt.Sprintf("verification failed: %s has sha256 %s, installed as %s", sk.WasmPath, got[:16]+"…", sk.SHA256[:min(16, len(sk.SHA256))]+"…"))
	}
	return data, nil
}

// EffectiveManifest returns m with the resources the operator allows: the
// section's fuel and timeout override the manifest's, and every resource is
// capped by [limits].
func EffectiveManifest(m *runtime.Manifest, sec config.Skill, lim config.Limits) *runtime.Manifest {
	eff := *m
	r := &eff.Resources
	if sec.Fuel != 0 {
		r.Fuel = sec.Fuel
	}
	if sec.Timeout != 0 {
		r.Timeout = sec.Timeout
	}
	if lim.MaxFuel != 0 && r.Fuel > lim.MaxFuel {
		r.Fuel = lim.MaxFuel
	}
	if lim.MaxMemoryMB != 0 && r.MemoryMB > lim.MaxMemoryMB {
		r.MemoryMB = lim.MaxMemoryMB
	}
	if lim.MaxTimeout != 0 && r.Timeout > lim.MaxTimeout {
		r.Timeout = lim.MaxTimeout
	}
	return &eff
}

// EffectiveGrants is the intersection of what the manifest declares and what
// the section grants:
//   - reads: allowed_directories ∪ read_directories, if files_read;
//   - writes: allowed_directories ∪ write_directories, if files_write;
//   - domains: allow.Intersect(manifest network, allowed_domains): only an
//     entry the operator wrote exactly may reach private addresses;
//   - env: names in both lists;
//   - memory: the manifest's memory capability and the section's memory = true,
//     in the skill's own namespace (the memory built-ins share "memory");
//   - credentials: each [credentials.NAME] of the manifest whose name the
//     section lists in credentials, sent to allow.Intersect(its hosts,
//     allowed_domains) (none when that is empty).
//
// Caps come from max_bytes or [limits]; the fetch deadline is
// limits.fetch_timeout, or the skill's timeout if that is shorter.
func EffectiveGrants(name string, m *runtime.Manifest, sec config.Skill, lim config.Limits) hostfns.Grants {
	c := m.Capabilities
	g := hostfns.Grants{
		MaxReadBytes:  lim.MaxReadBytes,
		MaxWriteBytes: lim.MaxWriteBytes,
		MaxFetchBytes: lim.MaxFetchBytes,
		FetchTimeout:  lim.FetchTimeout,
	}
	if sec.MaxBytes != 0 {
		g.MaxReadBytes, g.MaxWriteBytes, g.MaxFetchBytes = sec.MaxBytes, sec.MaxBytes, sec.MaxBytes
	}
	if sec.Timeout != 0 && (g.FetchTimeout == 0 || sec.Timeout < g.FetchTimeout) {
		g.FetchTimeout = sec.Timeout
	}
	if c.FilesRead {
		g.Read = union(sec.AllowedDirectories, sec.ReadDirectories)
	}
	if c.FilesWrite {
		g.Write = union(sec.AllowedDirectories, sec.WriteDirectories)
	}
	g.Domains = allow.Intersect(c.Network, sec.AllowedDomains)
	for _, e := range c.Env {
		if slices.Contains(sec.Env, e) {
			g.Env = append(g.Env, e)
		}
	}
	// Only the built-in schedule skill may schedule: no installed skill
	// can take its name (builtins.Reserved).
	if c.Schedule && name == ScheduleSkill {
		g.Schedule = true
	}
	if c.Memory && sec.Memory {
		if IsMemoryBuiltin(name) {
			g.Namespace = MemoryNamespace
		} else {
			g.Namespace = "skill:" + name
		}
	}
	for _, cr := range m.Credentials {
		if !slices.Contains(sec.Credentials, cr.Name) {
			continue
		}
		if hosts := allow.Intersect(cr.Hosts, sec.AllowedDomains); len(hosts) > 0 {
			g.Credentials = append(g.Credentials, buddyhttp.Credential{Name: cr.Name, Hosts: hosts, As: cr.As, Param: cr.Param})
		}
	}
	return g
}

func union(a, b []string) []string {
	var out []string
	for _, d := range slices.Concat(a, b) {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// EffectiveApproval is the section's approval policy, or the default for the
// permission level: trust for read_only, always otherwise.
func EffectiveApproval(p runtime.Permission, configured string) catalog.Policy {
	if pol, err := catalog.ParsePolicy(configured); err == nil {
		return pol
	}
	return catalog.DefaultPolicy(catalog.Permission(p))
}

// Skills returns (snapshots of) the registered skills sorted by name.
func (r *Registry) Skills() []*Skill {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Skill, 0, len(r.skills))
	for _, s := range r.skills {
		out = append(out, s.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns (a snapshot of) a registered skill.
func (r *Registry) Get(name string) (*Skill, error) {
	s, err := r.get(name)
	if err != nil {
		return nil, err
	}
	return s.snapshot(), nil
}

func (r *Registry) get(name string) (*Skill, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok := r.skills[name]; ok {
		return s, nil
	}
	names := make([]string, 0, len(r.skills))
	for n := range r.skills {
		names = append(names, n)
	}
	sort.Strings(names)
	hint := "none are registered: enable built-ins in buddy.toml or install a skill"
	if len(names) > 0 {
		hint = "registered: " + strings.Join(names, ", ")
	}
	if _, ok := builtins.Get(name); ok {
		hint = fmt.Sprintf("the built-in %s is not enabled: add a [skills.%s] section to buddy.toml", name, sectionFor(name))
	}
	return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("no skill %q (%s)", name, hint))
}

func sectionFor(name string) string {
	if IsMemoryBuiltin(name) {
		return MemorySection
	}
	return name
}

// Call runs a skill with a JSON input through the runtime, loading it first if
// needed. It does not ask for approval: the caller's gate does.
func (r *Registry) Call(ctx context.Context, name string, input []byte) (*runtime.Result, error) {
	s, err := r.acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	if err := ValidateInput(s.Manifest.InputSchema, input); err != nil {
		return nil, err
	}
	mod, err := r.load(ctx, s)
	if err != nil {
		return nil, err
	}
	return mod.Call(ctx, input)
}

// Load compiles a skill without calling it (and reports why it cannot run).
func (r *Registry) Load(ctx context.Context, name string) error {
	s, err := r.get(name)
	if err != nil {
		return err
	}
	_, err = r.load(ctx, s)
	return err
}

func (r *Registry) load(ctx context.Context, s *Skill) (*runtime.Module, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.problem(); p != nil {
		return nil, fmt.Errorf("skill %s: %w", s.Name, p)
	}
	if s.mod != nil {
		return s.mod, nil
	}
	wasm := s.wasm
	if !s.Builtin && s.wasm == nil {
		// An installed skill: the sha256 is checked at every load, not only
		// at install. (A module file given on the command line is in memory.)
		data, err := r.verify(s)
		if err != nil {
			s.fail(StatusVerificationFailed, err)
			if r.opts.Store != nil {
				_ = r.opts.Store.SetSkillStatus(ctx, s.Name, string(StatusVerificationFailed))
			}
			return nil, fmt.Errorf("skill %s: %w", s.Name, err)
		}
		wasm = data
	}
	host, err := hostfns.Link(s.Grants, r.opts.Deps)
	if err != nil {
		return nil, fmt.Errorf("skill %s: %w", s.Name, err)
	}
	mod, err := r.opts.Runtime.Load(ctx, wasm, runtime.Spec{Name: s.Name, Manifest: s.Manifest, Host: host})
	if err != nil {
		host.Close(ctx)
		var ie *runtime.ImportError
		if errors.As(err, &ie) {
			s.fail(StatusUnavailable, err)
		}
		return nil, fmt.Errorf("skill %s: %w", s.Name, err)
	}
	s.mod, s.host = mod, host
	return mod, nil
}

// Close unloads every loaded skill.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var err error
	for _, s := range r.skills {
		err = errors.Join(err, s.unload(ctx))
	}
	return err
}

// unload closes s's module and host functions.
func (s *Skill) unload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.mod != nil {
		err = errors.Join(err, s.mod.Close(ctx))
		s.mod = nil
	}
	if s.host != nil {
		err = errors.Join(err, s.host.Close(ctx))
		s.host = nil
	}
	return err
}
