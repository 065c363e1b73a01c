package instructions

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
	"time"

	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/errs"
)

// Catalog serves SKILL.md skills as read_only catalog skills: they run in
// process, touch nothing, and go through the same approval gate as the
// WebAssembly skills (wrap it in a catalog.Union with the registry).
type Catalog struct {
	opts CatalogOptions

	mu     sync.RWMutex
	skills map[string]*Skill
}

var _ catalog.Catalog = (*Catalog)(nil)

// CatalogOptions configure a Catalog.
type CatalogOptions struct {
	// Sessions, when set, learns which skills with permissions each
	// conversation loads (and binds the conversation to them).
	Sessions *Sessions
}

// NewCatalog serves skills (as loaded by Store.ListActive).
func NewCatalog(skills []*Skill, opts CatalogOptions) *Catalog {
	c := &Catalog{opts: opts}
	c.Replace(skills)
	return c
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

// info describes s for front ends.
func info(s *Skill) catalog.Info {
	i := catalog.Info{
		Name: s.Name, Description: s.DescriptionOrDefault(), Permission: catalog.ReadOnly,
		Policy: catalog.Trust, InputSchema: inputSchema(s), Status: "ready", Type: s.Type,
	}
	if s.Source != "" {
		i.Author = s.Source
	}
	if s.Type == TypeScript {
		i.Status, i.Problem = "unavailable", scriptRefusal(s.Name)
	}
	return i
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
	c.mu.RLock()
	s, ok := c.skills[name]
	c.mu.RUnlock()
	if !ok {
		return catalog.Info{}, errs.New(errs.ErrNotFound, fmt.Sprintf("no skill named %q", name))
	}
	return info(s), nil
}

// Check implements catalog.Catalog: the skill exists, can run, and its
// arguments are a JSON object (or nothing).
func (c *Catalog) Check(ctx context.Context, call catalog.Call) (catalog.Info, error) {
	i, err := c.Lookup(ctx, call.Skill)
	if err != nil {
		return i, err
	}
	if i.Type == TypeScript {
		return i, errs.New(errs.ErrForbidden, scriptRefusal(i.Name))
	}
	if call.Raw {
		return i, errs.New(errs.ErrInvalidInput, fmt.Sprintf("skill %s takes a JSON object, not raw input", i.Name))
	}
	if _, err := params(call.Arguments); err != nil {
		return i, errs.Wrap(errs.ErrInvalidInput, "arguments of "+i.Name, err)
	}
	return i, nil
}

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

// Invoke implements catalog.Invoker: an instruction skill returns its
// content (and, with Sessions, becomes active in the call's conversation), a
// template skill its rendering, a composite skill its plan; a script skill
// refuses.
func (c *Catalog) Invoke(ctx context.Context, call catalog.Call) (*catalog.Result, error) {
	start := time.Now()
	if _, err := c.Check(ctx, call); err != nil {
		return nil, err
	}
	s, ok := c.Skill(call.Skill)
	if !ok {
		return nil, errs.New(errs.ErrNotFound, fmt.Sprintf("no skill named %q", call.Skill))
	}
	var out []byte
	var err error
	switch s.Type {
	case TypeInstruction:
		out, err = json.Marshal(Loaded{Name: s.Name, Type: s.Type, Description: s.DescriptionOrDefault(),
			Source: s.Source, Content: s.Content, Permissions: s.Permissions})
		if err == nil {
			c.opts.Sessions.Activate(call.Conversation, s)
		}
	case TypeTemplate:
		p, _ := params(call.Arguments)
		var text string
		if text, err = RenderTemplate(ctx, s, p); err == nil {
			out = []byte(text)
		}
	case TypeComposite:
		plan := Plan{Name: s.Name, Type: s.Type, Description: s.DescriptionOrDefault(),
			Note: "A plan, not a result: make these tool calls one at a time, in order, checking each result; each goes through the user's approval."}
		for i, st := range s.Steps {
			p := st.Params
			if p == nil {
				p = map[string]any{}
			}
			plan.Steps = append(plan.Steps, PlanStep{Step: i + 1, Tool: st.Tool, Params: p})
		}
		out, err = json.Marshal(plan)
	default:
		return nil, errs.New(errs.ErrForbidden, scriptRefusal(s.Name))
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(s.Content + s.Template + s.Script))
	return &catalog.Result{Skill: s.Name, SHA256: hex.EncodeToString(sum[:]), Output: out, Duration: time.Since(start)}, nil
}
