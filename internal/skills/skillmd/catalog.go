package skillmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
)

// Catalog serves SKILL.md skills as read_only catalog skills: they run in
// process, touch nothing, and go through the same approval gate as the
// WebAssembly skills (wrap it in a catalog.Union with the registry).
type Catalog struct {
	opts CatalogOptions

	mu     sync.RWMutex
	skills map[string]*Skill

	// watch: the folder's fingerprint when skills were last loaded from
	// opts.Source, and when it was last compared.
	watch    sync.Mutex
	seen     string
	lastSeen time.Time
}

var _ catalog.Catalog = (*Catalog)(nil)

// CatalogOptions configure a Catalog.
type CatalogOptions struct {
	// Sessions, when set, learns which skills with permissions each
	// conversation loads (and binds the conversation to them).
	Sessions *Sessions
	// Source, when set, is the folder the skills were loaded from: a
	// skill added, changed or removed there is seen by the next List,
	// Lookup or Prepare (the folder is compared at most every Recheck),
	// as a WebAssembly install is.
	Source *Store
	// Recheck is how often the folder is compared at most; default
	// DefaultRecheck.
	Recheck time.Duration
	// OnReload, if set, is told what a reload from Source loaded and the
	// folders that did not load.
	OnReload func(skills []*Skill, problems []error)
}

// DefaultRecheck is how often a Catalog compares its Source folder at most.
const DefaultRecheck = 250 * time.Millisecond

// NewCatalog serves skills (as loaded by Store.ListActive).
func NewCatalog(skills []*Skill, opts CatalogOptions) *Catalog {
	if opts.Recheck <= 0 {
		opts.Recheck = DefaultRecheck
	}
	c := &Catalog{opts: opts}
	if opts.Source != nil {
		c.seen, _ = opts.Source.Fingerprint()
		c.lastSeen = time.Now()
	}
	c.Replace(skills)
	return c
}

// Reload loads the skills from Source again now (SIGHUP), whether or not
// the folder changed.
func (c *Catalog) Reload(ctx context.Context) {
	if c.opts.Source == nil {
		return
	}
	c.watch.Lock()
	defer c.watch.Unlock()
	c.reload(ctx)
}

// reload loads from Source; c.watch is held.
func (c *Catalog) reload(ctx context.Context) {
	fp, _ := c.opts.Source.Fingerprint()
	skills, problems := c.opts.Source.ListActive(ctx)
	c.Replace(skills)
	c.seen, c.lastSeen = fp, time.Now()
	if c.opts.OnReload != nil {
		c.opts.OnReload(skills, problems)
	}
}

// refresh reloads from Source when the folder changed since it was last
// compared (at most every Recheck).
func (c *Catalog) refresh(ctx context.Context) {
	if c.opts.Source == nil {
		return
	}
	c.watch.Lock()
	defer c.watch.Unlock()
	if time.Since(c.lastSeen) < c.opts.Recheck {
		return
	}
	fp, err := c.opts.Source.Fingerprint()
	c.lastSeen = time.Now()
	if err != nil || fp == c.seen {
		return
	}
	c.reload(ctx)
}

// Replace swaps the skills served (a reload); calls in flight keep theirs.
func (c *Catalog) Replace(skills []*Skill) {
	m := make(map[string]*Skill, len(skills))
	for _, s := range skills {
		m[s.Name] = s
	}
	c.mu.Lock()
	c.skills = m
	c.mu.Unlock()
}

// Skill returns a copy of one skill.
func (c *Catalog) Skill(name string) (*Skill, bool) {
	c.mu.RLock()
	s, ok := c.skills[name]
	c.mu.RUnlock()
	if !ok {
		return nil, false
	}
	cp := *s
	return &cp, true
}

// info describes s for front ends; its SHA256 is the digest of what the
// skill says (Digest).
func info(s *Skill) catalog.Info {
	d := Digest(s)
	i := catalog.Info{
		Name: s.Name, Description: s.DescriptionOrDefault(), Permission: catalog.ReadOnly,
		Policy: catalog.Trust, InputSchema: inputSchema(s), Status: catalog.StatusReady, Type: s.Type, SHA256: d,
	}
	i = i.WithFingerprint(d)
	if s.Source != "" {
		i.Author = s.Source
	}
	if s.Type == TypeScript {
		i.Status, i.Problem = catalog.StatusUnavailable, scriptRefusal(s.Name)
	}
	return i
}

// Digest is the hex SHA-256 of what a skill says and declares: its type,
// description, body, template, plan, script, parameters and permissions. A
// changed SKILL.md has another digest.
func Digest(s *Skill) string {
	h := sha256.New()
	steps, _ := json.Marshal(s.Steps)
	params, _ := json.Marshal(s.Parameters)
	perms, _ := json.Marshal(s.Permissions)
	for _, part := range []string{"buddy-skillmd/1", s.Name, s.Type, s.Description, s.Content, s.Template, string(steps), s.Script, string(params), string(perms), s.Dir} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func scriptRefusal(name string) string {
	return fmt.Sprintf("%s is a script skill: buddy stores it but never runs it (buddy runs no shell); package its logic as a WebAssembly skill (buddy skill init NAME --lang tinygo) and install that", name)
}

// inputSchema is what a call takes: nothing for an instruction or composite
// skill, the parameters for a template skill.
func inputSchema(s *Skill) map[string]any {
	if s.Type != TypeTemplate || len(s.Parameters) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	if t, _ := s.Parameters["type"].(string); t == "object" {
		return s.Parameters
	}
	props := map[string]any{}
	for k, v := range s.Parameters {
		switch v := v.(type) {
		case string:
			props[k] = map[string]any{"description": v}
		case map[string]any:
			props[k] = v
		default:
			props[k] = map[string]any{}
		}
	}
	return map[string]any{"type": "object", "properties": props}
}

// List implements catalog.Catalog.
func (c *Catalog) List(ctx context.Context) ([]catalog.Info, error) {
	c.refresh(ctx)
	c.mu.RLock()
	out := make([]catalog.Info, 0, len(c.skills))
	for _, s := range c.skills {
		out = append(out, info(s))
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b catalog.Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Lookup implements catalog.Catalog.
func (c *Catalog) Lookup(ctx context.Context, name string) (catalog.Info, error) {
	c.refresh(ctx)
	c.mu.RLock()
	s, ok := c.skills[name]
	c.mu.RUnlock()
	if !ok {
		return catalog.Info{}, errs.New(errs.ErrNotFound, fmt.Sprintf("no skill named %q", name))
	}
	return info(s), nil
}

// Prepare implements catalog.Catalog: the skill exists, can run, and its
// arguments are a JSON object (or nothing). The prepared call runs the skill
// as it was when prepared; Current says when the folder changed it since.
func (c *Catalog) Prepare(ctx context.Context, call catalog.Call) (catalog.Prepared, error) {
	c.refresh(ctx)
	s, ok := c.Skill(call.Skill)
	if !ok {
		return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("no skill named %q", call.Skill))
	}
	i := info(s)
	if s.Type == TypeScript {
		return nil, errs.New(errs.ErrForbidden, scriptRefusal(s.Name))
	}
	if call.Raw {
		return nil, errs.New(errs.ErrInvalidInput, fmt.Sprintf("skill %s takes a JSON object, not raw input", s.Name))
	}
	p, err := params(call.Arguments)
	if err != nil {
		return nil, errs.Wrap(errs.ErrInvalidInput, "arguments of "+s.Name, err)
	}
	return &prepared{c: c, s: s, call: call, info: i, params: p}, nil
}

// prepared is a call of one SKILL.md skill, ready to run.
type prepared struct {
	c      *Catalog
	s      *Skill
	call   catalog.Call
	info   catalog.Info
	params map[string]any
	done   atomic.Bool
}

func (p *prepared) Info() catalog.Info { return p.info }

// Targets implements catalog.Prepared: a SKILL.md skill touches nothing.
func (p *prepared) Targets(context.Context) ([]catalog.Target, error) { return nil, nil }

// Current implements catalog.Prepared.
func (p *prepared) Current(ctx context.Context) (string, error) {
	p.c.refresh(ctx)
	now, ok := p.c.Skill(p.s.Name)
	if !ok {
		return fmt.Sprintf("%s was removed", p.s.Name), nil
	}
	if Digest(now) != p.info.SHA256 {
		return fmt.Sprintf("the SKILL.md of %s changed", p.s.Name), nil
	}
	return "", nil
}

// Run implements catalog.Prepared.
func (p *prepared) Run(ctx context.Context) (*catalog.Result, error) {
	if p.done.Swap(true) {
		return nil, catalog.ErrAlreadyRun
	}
	return p.c.run(ctx, p.s, p.call, p.params, p.info.SHA256)
}

// Release implements catalog.Prepared.
func (p *prepared) Release() { p.done.Store(true) }

func params(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("must be a JSON object")
	}
	return m, nil
}

// Loaded is what loading an instruction skill returns to the model.
type Loaded struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Source      string `json:"source"`
	Content     string `json:"content"`
	// Permissions, when declared, now bind the conversation.
	Permissions *Permissions `json:"permissions,omitempty"`
}

// Plan is what calling a composite skill returns: steps for the model to
// make one tool call at a time, each through the approval gate.
type Plan struct {
	Name        string     `json:"name"`
	Type        string     `json:"type"`
	Description string     `json:"description"`
	Steps       []PlanStep `json:"steps"`
	Note        string     `json:"note"`
}

// PlanStep is one numbered step of a plan.
type PlanStep struct {
	Step   int            `json:"step"`
	Tool   string         `json:"tool"`
	Params map[string]any `json:"params"`
}

// Invoke prepares and runs call without asking (tests; front ends go
// through the gate): an instruction skill returns its content (and, with
// Sessions, becomes active in the call's conversation), a template skill
// its rendering, a composite skill its plan; a script skill refuses.
func (c *Catalog) Invoke(ctx context.Context, call catalog.Call) (*catalog.Result, error) {
	p, err := c.Prepare(ctx, call)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx)
}

// run runs a prepared call of s.
func (c *Catalog) run(ctx context.Context, s *Skill, call catalog.Call, p map[string]any, digest string) (*catalog.Result, error) {
	start := time.Now()
	var out []byte
	var err error
	switch s.Type {
	case TypeInstruction:
		out, err = json.Marshal(Loaded{Name: s.Name, Type: s.Type, Description: s.DescriptionOrDefault(),
			Source: s.Source, Content: s.Content, Permissions: s.Permissions})
		if err == nil {
			err = c.opts.Sessions.Activate(ctx, call.StateScope(), s)
		}
	case TypeTemplate:
		var text string
		if text, err = RenderTemplate(ctx, s, p); err == nil {
			out = []byte(text)
		}
	case TypeComposite:
		plan := Plan{Name: s.Name, Type: s.Type, Description: s.DescriptionOrDefault(),
			Note: "A plan, not a result: make these tool calls one at a time, in order, checking each result; each goes through the user's approval."}
		for i, st := range s.Steps {
			sp := st.Params
			if sp == nil {
				sp = map[string]any{}
			}
			plan.Steps = append(plan.Steps, PlanStep{Step: i + 1, Tool: st.Tool, Params: sp})
		}
		out, err = json.Marshal(plan)
	default:
		return nil, errs.New(errs.ErrForbidden, scriptRefusal(s.Name))
	}
	if err != nil {
		return nil, err
	}
	return &catalog.Result{Skill: s.Name, SHA256: digest, Output: out, Duration: time.Since(start)}, nil
}
