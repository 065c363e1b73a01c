package skillmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"gopkg.in/yaml.v3"
)

// Permissions are what a skill declares it needs, in its frontmatter:
//
//	permissions:
//	  fs:
//	    read: ["$SKILL_DIR/**", "**/*.md"]
//	    write: ["$WORK_DIR/out/**"]
//	  network:
//	    allow: ["api.example.com:443", "*.wikipedia.org"]
//	  env: [LANG]
//
// While the skill is active in a conversation, every tool call there must fit
// the union of the active skills' declarations. A kind left out allows
// nothing of that kind. Declarations never widen buddy.toml's grants.
// `exec` is refused: buddy runs no commands. `services` is accepted and
// grants nothing (buddy has no such services).
type Permissions struct {
	FS       FSPermissions      `yaml:"fs,omitempty" json:"fs"`
	Network  NetworkPermissions `yaml:"network,omitempty" json:"network"`
	Env      []string           `yaml:"env,omitempty" json:"env"`
	Exec     []string           `yaml:"exec,omitempty" json:"exec,omitempty"`
	Services map[string]any     `yaml:"services,omitempty" json:"services,omitempty"`
}

// FSPermissions are file globs: "**" spans directories, "*" and "?" stay in
// one; $SKILL_DIR, $WORK_DIR and $DATA_DIR are expanded; a relative glob is
// anchored at $WORK_DIR.
type FSPermissions struct {
	Read  []string `yaml:"read,omitempty" json:"read"`
	Write []string `yaml:"write,omitempty" json:"write"`
}

// NetworkPermissions are host[:port] patterns: "*" or "*.example.com" for the
// host, a port number or "*" (absent: any port).
type NetworkPermissions struct {
	Allow []string `yaml:"allow,omitempty" json:"allow"`
}

// permError is a permissions problem at a line of the frontmatter (0-based,
// as yaml.Node counts from 1 within the frontmatter).
type permError struct {
	line int
	msg  string
}

func (e *permError) Error() string { return e.msg }

// parsePermissions reads the permissions mapping strictly: an unknown key is
// an error, not a silently ignored declaration.
func parsePermissions(n *yaml.Node) (*Permissions, error) {
	p := &Permissions{}
	if n.Kind != yaml.MappingNode {
		return nil, &permError{n.Line, "must be a mapping (fs, network, env)"}
	}
	strs := func(v *yaml.Node, key string) ([]string, error) {
		var out []string
		if v.Kind != yaml.SequenceNode || v.Decode(&out) != nil {
			return nil, &permError{v.Line, key + " must be a list of strings"}
		}
		return out, nil
	}
	sub := func(v *yaml.Node, key string, keys map[string]*[]string) error {
		if v.Kind != yaml.MappingNode {
			return &permError{v.Line, key + " must be a mapping"}
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			dst, ok := keys[k.Value]
			if !ok {
				return &permError{k.Line, fmt.Sprintf("unknown key %s.%s", key, k.Value)}
			}
			list, err := strs(val, key+"."+k.Value)
			if err != nil {
				return err
			}
			*dst = list
		}
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "fs":
			err = sub(v, "fs", map[string]*[]string{"read": &p.FS.Read, "write": &p.FS.Write})
		case "network":
			err = sub(v, "network", map[string]*[]string{"allow": &p.Network.Allow})
		case "env":
			p.Env, err = strs(v, "env")
		case "exec":
			p.Exec, err = strs(v, "exec")
			if err == nil && len(p.Exec) > 0 {
				err = &permError{k.Line, "exec is refused: buddy runs no commands (package the logic as a WebAssembly skill)"}
			}
		case "services":
			if v.Decode(&p.Services) != nil {
				err = &permError{v.Line, "services must be a mapping"}
			}
		default:
			err = &permError{k.Line, fmt.Sprintf("unknown key %q (fs, network, env)", k.Value)}
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// vars are the variables a glob may use.
var vars = []string{"$SKILL_DIR", "$WORK_DIR", "$DATA_DIR"}

func (p *Permissions) validate() error {
	if len(p.Exec) > 0 {
		return fmt.Errorf("exec is refused: buddy runs no commands (package the logic as a WebAssembly skill)")
	}
	for _, list := range [][]string{p.FS.Read, p.FS.Write} {
		for _, g := range list {
			if err := checkGlob(g); err != nil {
				return err
			}
		}
	}
	for _, h := range p.Network.Allow {
		if _, _, err := splitHostPattern(h); err != nil {
			return err
		}
	}
	for _, e := range p.Env {
		if e == "" || strings.ContainsAny(e, "= \t\n") {
			return fmt.Errorf("env %q is not a variable name", e)
		}
	}
	return nil
}

func checkGlob(g string) error {
	if strings.TrimSpace(g) == "" || strings.ContainsRune(g, 0) {
		return fmt.Errorf("fs glob %q is empty or holds a NUL", g)
	}
	rest := g
	for strings.Contains(rest, "$") {
		i := strings.IndexByte(rest, '$')
		ok := false
		for _, v := range vars {
			if strings.HasPrefix(rest[i:], v) {
				ok = true
				rest = rest[i+len(v):]
				break
			}
		}
		if !ok {
			return fmt.Errorf("fs glob %q uses an unknown variable (only %s)", g, strings.Join(vars, ", "))
		}
	}
	for _, seg := range strings.Split(filepath.ToSlash(g), "/") {
		if seg == ".." {
			return fmt.Errorf("fs glob %q may not use ..", g)
		}
		if seg != "**" {
			if _, err := path.Match(seg, ""); err != nil {
				return fmt.Errorf("fs glob %q: %v", g, err)
			}
		}
	}
	return nil
}

// splitHostPattern splits "host[:port]" (port "" = any).
func splitHostPattern(s string) (host, port string, err error) {
	host = strings.ToLower(strings.TrimSpace(s))
	if strings.Contains(host, "/") {
		return "", "", fmt.Errorf("network.allow %q must be host[:port], like api.example.com:443 or *.example.com", s)
	}
	if h, p, e := net.SplitHostPort(host); e == nil {
		host, port = h, p
		if port != "*" {
			if n, e := strconv.Atoi(port); e != nil || n < 1 || n > 65535 {
				return "", "", fmt.Errorf("network.allow %q: port must be 1-65535 or *", s)
			}
		}
	}
	if strings.Contains(host, "/") || strings.Contains(host, "://") || host == "" {
		return "", "", fmt.Errorf("network.allow %q must be host[:port], like api.example.com:443 or *.example.com", s)
	}
	if host != "*" && strings.Contains(strings.TrimPrefix(host, "*."), "*") {
		return "", "", fmt.Errorf("network.allow %q: a wildcard may only be \"*\" or lead as \"*.\"", s)
	}
	return host, port, nil
}

// Access is one thing a tool call would touch.
type Access struct {
	Kind   AccessKind
	Target string // an absolute path, a host, or an environment variable name
	Port   int    // for network: 0 = any port the grant allows
	// Tree says Target is a directory the call may touch anything under
	// (a WebAssembly skill's granted directory), or a domain pattern.
	Tree bool
}

// AccessKind is what an Access does.
type AccessKind string

// The access kinds.
const (
	Read    AccessKind = "read"
	Write   AccessKind = "write"
	Network AccessKind = "network"
	Env     AccessKind = "env"
)

func (a Access) String() string {
	switch {
	case a.Kind == Network && a.Port != 0:
		return fmt.Sprintf("network access to %s:%d", a.Target, a.Port)
	case a.Kind == Network:
		return "network access to " + a.Target
	case a.Kind == Env:
		return "environment variable " + a.Target
	case a.Tree:
		return fmt.Sprintf("%s of anything in %s", a.Kind, a.Target)
	}
	return fmt.Sprintf("%s of %s", a.Kind, a.Target)
}

// Dirs are the values of $WORK_DIR and $DATA_DIR.
type Dirs struct {
	Work, Data string
}

// fits reports whether a is within p, for a skill in skillDir.
func (p *Permissions) fits(a Access, skillDir string, d Dirs) bool {
	switch a.Kind {
	case Read, Write:
		globs := p.FS.Read
		if a.Kind == Write {
			globs = p.FS.Write
		}
		for _, g := range globs {
			pat := expandGlob(g, skillDir, d)
			if a.Tree {
				if coversTree(pat, a.Target) {
					return true
				}
			} else if matchGlob(pat, a.Target) {
				return true
			}
		}
	case Network:
		for _, h := range p.Network.Allow {
			host, port, err := splitHostPattern(h)
			if err != nil {
				continue
			}
			if port != "" && port != "*" {
				if a.Port == 0 || strconv.Itoa(a.Port) != port {
					continue
				}
			}
			if hostCovers(host, strings.ToLower(a.Target), a.Tree) {
				return true
			}
		}
	case Env:
		for _, e := range p.Env {
			if e == "*" || e == a.Target {
				return true
			}
		}
	}
	return false
}

// expandGlob replaces the variables and anchors a relative glob at $WORK_DIR;
// the wildcard-free prefix has its symbolic links resolved, as a call's path
// has.
func expandGlob(g, skillDir string, d Dirs) string {
	g = strings.NewReplacer("$SKILL_DIR", skillDir, "$WORK_DIR", d.Work, "$DATA_DIR", d.Data).Replace(g)
	g = filepath.ToSlash(g)
	if !strings.HasPrefix(g, "/") {
		g = filepath.ToSlash(d.Work) + "/" + g
	}
	segs := strings.Split(g, "/")
	lit := 0
	for lit < len(segs) && !strings.ContainsAny(segs[lit], "*?[") {
		lit++
	}
	prefix := path.Clean("/" + strings.Join(segs[:lit], "/"))
	if real, err := filepath.EvalSymlinks(prefix); err == nil {
		prefix = filepath.ToSlash(real)
	}
	if lit == len(segs) {
		return prefix
	}
	return strings.TrimSuffix(prefix, "/") + "/" + strings.Join(segs[lit:], "/")
}

// matchGlob matches a slash path against a glob whose "**" spans any number
// of segments.
func matchGlob(glob, p string) bool {
	return matchSegs(strings.Split(strings.Trim(glob, "/"), "/"), strings.Split(strings.Trim(filepath.ToSlash(p), "/"), "/"))
}

func matchSegs(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			for i := 0; i <= len(p); i++ {
				if matchSegs(g[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], p[0]); !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}

// coversTree reports whether glob matches everything under dir: it is a
// wildcard-free prefix that is dir or an ancestor of it, then "/**".
func coversTree(glob, dir string) bool {
	if !strings.HasSuffix(glob, "/**") {
		return false
	}
	prefix := strings.TrimSuffix(glob, "/**")
	if strings.ContainsAny(prefix, "*?[") {
		return false
	}
	if prefix == "" {
		return true
	}
	dir = filepath.ToSlash(filepath.Clean(dir))
	return dir == prefix || strings.HasPrefix(dir, prefix+"/")
}

// hostCovers reports whether a declared host pattern covers host (or, for a
// tree, the whole domain pattern host).
func hostCovers(pattern, host string, tree bool) bool {
	if pattern == "*" {
		return true
	}
	if !tree || !strings.HasPrefix(host, "*.") {
		if pattern == host {
			return true
		}
		if strings.HasPrefix(pattern, "*.") {
			return strings.HasSuffix(host, pattern[1:])
		}
		return false
	}
	// host is itself "*.x": the pattern must be "*.y" with x under y.
	if !strings.HasPrefix(pattern, "*.") {
		return false
	}
	return host == pattern || strings.HasSuffix(host, pattern[1:])
}

// Sessions remember which skills each conversation has loaded, and check
// calls against the declarations of the active ones. It is shared by every
// gate of a process (the server makes one gate per connection). With a
// catalog.StateStore the bindings outlive the process: each is stored when
// the skill is loaded and restored on the conversation's first use after a
// start, as it was declared then (a skill edited or removed since still
// binds the conversation with what it declared when it was loaded).
type Sessions struct {
	dirs  Dirs
	state catalog.StateStore

	load   sync.Mutex // held while a scope is restored
	mu     sync.Mutex
	active map[string]map[string]*Skill // scope → name → skill
	loaded map[string]bool              // scopes restored from state
}

// binding is what is stored of an active skill: enough to check calls
// against its declaration.
type binding struct {
	Name        string       `json:"name"`
	Dir         string       `json:"dir"`
	Permissions *Permissions `json:"permissions"`
}

// NewSessions returns an empty set of sessions; d gives $WORK_DIR and
// $DATA_DIR; st, when not nil, keeps the bindings across restarts.
func NewSessions(d Dirs, st catalog.StateStore) *Sessions {
	return &Sessions{dirs: d, state: st, active: map[string]map[string]*Skill{}, loaded: map[string]bool{}}
}

// restore loads scope's stored bindings once per process.
func (ss *Sessions) restore(ctx context.Context, scope string) error {
	if ss.state == nil || scope == "" {
		return nil
	}
	ss.load.Lock()
	defer ss.load.Unlock()
	ss.mu.Lock()
	done := ss.loaded[scope]
	ss.mu.Unlock()
	if done {
		return nil
	}
	items, err := ss.state.ConversationState(context.WithoutCancel(ctx), scope)
	if err != nil {
		return errs.Wrap(errs.ErrUnavailable, "restoring the conversation's SKILL.md bindings", err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, it := range items {
		if it.Kind != catalog.StateBinding {
			continue
		}
		var b binding
		if err := json.Unmarshal([]byte(it.Value), &b); err != nil || b.Permissions == nil {
			// A binding that does not read binds to nothing: fail closed.
			b = binding{Name: it.Key, Permissions: &Permissions{}}
		}
		if ss.active[scope] == nil {
			ss.active[scope] = map[string]*Skill{}
		}
		if _, ok := ss.active[scope][b.Name]; !ok {
			ss.active[scope][b.Name] = &Skill{Name: b.Name, Dir: b.Dir, Permissions: b.Permissions}
		}
	}
	ss.loaded[scope] = true
	return nil
}

// Activate records that scope (a conversation) loaded s, and stores it
// before it returns. A one-shot call (scope "") activates nothing: it has
// no later calls.
func (ss *Sessions) Activate(ctx context.Context, scope string, s *Skill) error {
	if ss == nil || scope == "" || s.Permissions == nil {
		return nil
	}
	if err := ss.restore(ctx, scope); err != nil {
		return err
	}
	ss.mu.Lock()
	if ss.active[scope] == nil {
		ss.active[scope] = map[string]*Skill{}
	}
	ss.active[scope][s.Name] = s
	ss.mu.Unlock()
	if ss.state == nil {
		return nil
	}
	b, err := json.Marshal(binding{Name: s.Name, Dir: s.Dir, Permissions: s.Permissions})
	if err != nil {
		return errs.Wrap(errs.ErrInternal, "storing the binding of "+s.Name, err)
	}
	return ss.state.SaveConversationState(context.WithoutCancel(ctx), scope,
		catalog.StateItem{Kind: catalog.StateBinding, Key: s.Name, Value: string(b)})
}

// Active returns the names of the skills with permissions active in scope,
// sorted.
func (ss *Sessions) Active(ctx context.Context, scope string) ([]string, error) {
	if err := ss.restore(ctx, scope); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []string
	for n := range ss.active[scope] {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// End forgets a scope (its stored bindings are forgotten with the rest of
// the conversation's state).
func (ss *Sessions) End(scope string) {
	ss.mu.Lock()
	delete(ss.active, scope)
	delete(ss.loaded, scope)
	ss.mu.Unlock()
}

// Check returns nil when every access fits the union of the declarations of
// the skills active in scope (or none is active), else an error wrapping
// errs.ErrForbidden that names the skills whose declarations leave the
// access out.
func (ss *Sessions) Check(ctx context.Context, scope, skill string, accesses []Access) error {
	if ss == nil || scope == "" {
		return nil
	}
	if err := ss.restore(ctx, scope); err != nil {
		return err
	}
	ss.mu.Lock()
	var active []*Skill
	for _, s := range ss.active[scope] {
		active = append(active, s)
	}
	ss.mu.Unlock()
	if len(active) == 0 {
		return nil
	}
	slices.SortFunc(active, func(a, b *Skill) int { return strings.Compare(a.Name, b.Name) })
	for _, a := range accesses {
		ok := false
		for _, s := range active {
			if s.Permissions.fits(a, s.Dir, ss.dirs) {
				ok = true
				break
			}
		}
		if !ok {
			names := make([]string, len(active))
			for i, s := range active {
				names[i] = s.Name
			}
			return errs.New(errs.ErrForbidden, fmt.Sprintf("%s: %s is outside the permissions declared by the active skill %s (the skill's declaration binds this conversation)",
				skill, a, strings.Join(names, ", ")))
		}
	}
	return nil
}
