package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/textsafe"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/internal/skills/skillmd"
	"github.com/buddy-run/buddy/runtime"
)

// skillJSON is the --json form of a skill in list and info.
type skillJSON struct {
	Name         string               `json:"name"`
	Version      string               `json:"version"`
	Description  string               `json:"description"`
	Author       string               `json:"author,omitempty"`
	Builtin      bool                 `json:"builtin"`
	Permission   runtime.Permission   `json:"permission"`
	Approval     string               `json:"approval"`
	Status       skills.Status        `json:"status"`
	Problem      string               `json:"problem,omitempty"`
	Capabilities runtime.Capabilities `json:"capabilities"`
	// Credentials are what the skill.toml declares ([credentials.NAME]).
	Credentials []runtime.Credential `json:"credentials"`
	Grants      grantsJSON           `json:"grants"`
	Resources   resourcesJSON        `json:"resources"`
	SHA256      string               `json:"sha256"`
	WasmPath    string               `json:"wasm_path,omitempty"`
	InputSchema map[string]any       `json:"input_schema,omitempty"`
}

type grantsJSON struct {
	Read      []string `json:"read"`
	Write     []string `json:"write"`
	Domains   []string `json:"domains"`
	Env       []string `json:"env"`
	Namespace string   `json:"memory_namespace,omitempty"`
	// Credentials are the credentials granted, and the hosts buddy sends
	// each to (names only).
	Credentials []catalog.CredentialGrant `json:"credentials"`
}

type resourcesJSON struct {
	Fuel     uint64 `json:"fuel"`
	MemoryMB int    `json:"memory_mb"`
	Timeout  string `json:"timeout"`
}

func toJSON(s *skills.Skill, withSchema bool) skillJSON {
	m := s.Manifest
	j := skillJSON{
		Name: s.Name, Version: m.Version, Description: m.Description, Author: m.Author,
		Builtin: s.Builtin, Permission: m.Permission, Approval: string(s.Approval), Status: s.Status,
		Capabilities: m.Capabilities, SHA256: s.SHA256, WasmPath: s.WasmPath,
		Credentials: m.Credentials,
		Grants: grantsJSON{Read: nonNil(s.Grants.Read), Write: nonNil(s.Grants.Write),
			Domains: nonNil(allow.Strings(s.Grants.Domains)), Env: nonNil(s.Grants.Env), Namespace: s.Grants.Namespace,
			Credentials: []catalog.CredentialGrant{}},
		Resources: resourcesJSON{Fuel: m.Resources.Fuel, MemoryMB: m.Resources.MemoryMB, Timeout: m.Resources.Timeout.String()},
	}
	if j.Credentials == nil {
		j.Credentials = []runtime.Credential{}
	}
	for _, c := range s.Grants.Credentials {
		j.Grants.Credentials = append(j.Grants.Credentials, catalog.CredentialGrant{Name: c.Name, Hosts: allow.Strings(c.Hosts)})
	}
	if s.Problem != nil {
		j.Problem = s.Problem.Error()
	}
	if withSchema {
		j.InputSchema = m.InputSchema
	}
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// describeGrants renders the grants in force on one line.
func describeGrants(g hostfns.Grants) string {
	var parts []string
	if len(g.Read) > 0 {
		parts = append(parts, "read "+strings.Join(g.Read, ", "))
	}
	if len(g.Write) > 0 {
		parts = append(parts, "write "+strings.Join(g.Write, ", "))
	}
	if len(g.Domains) > 0 {
		parts = append(parts, "GET "+strings.Join(allow.Strings(g.Domains), ", "))
	}
	if len(g.Env) > 0 {
		parts = append(parts, "env "+strings.Join(g.Env, ", "))
	}
	if g.Namespace != "" {
		parts = append(parts, "memory")
	}
	for _, c := range g.Credentials {
		parts = append(parts, "credential "+c.Name+" for "+strings.Join(allow.Strings(c.Hosts), ", "))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return safe(strings.Join(parts, "; "))
}

func (a *app) skillList(ctx context.Context, args []string) (err error) {
	var asJSON bool
	_, configPath, err := parseCommand("skill list", args, 0, "[--json]", func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, true)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	skills := e.live.Current().Skills()
	md := e.mdSkills(ctx)
	if asJSON {
		out := make([]any, 0, len(skills)+len(md))
		for _, s := range skills {
			out = append(out, toJSON(s, false))
		}
		for _, s := range md {
			out = append(out, toMDJSON(s))
		}
		return writeJSON(a.stdout, out)
	}
	if e.defaults {
		fmt.Fprintf(a.stderr, "no buddy.toml found: using the embedded defaults (data in %s); see buddy.example.toml\n", e.dataDir)
	} else {
		fmt.Fprintf(a.stderr, "config: %s\n", e.cfg.Path)
	}
	if len(skills) == 0 && len(md) == 0 {
		fmt.Fprintln(a.stdout, "no skills registered: enable built-ins in buddy.toml ([skills.read_file] ...) or install one")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tPERMISSION\tAPPROVAL\tSTATUS\tGRANTS")
	for _, s := range skills {
		kind := "installed"
		if s.Builtin {
			kind = "built-in"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(s.Name), safe(s.Manifest.Version), kind, s.Manifest.Permission, s.Approval, s.Status, describeGrants(s.Grants))
	}
	wasm := make(map[string]bool, len(skills))
	for _, s := range skills {
		wasm[s.Name] = true
	}
	for _, s := range md {
		j := toMDJSON(s)
		status := j.Status
		if wasm[s.Name] {
			status = "shadowed" // a WebAssembly skill has the name
		}
		fmt.Fprintf(tw, "%s\t-\tskill.md/%s\t%s\t%s\t%s\tdeclares: %s\n", safe(s.Name), s.Type, j.Permission, j.Approval, status, describeDeclared(s.Permissions))
	}
	return tw.Flush()
}

func (a *app) skillInfo(ctx context.Context, args []string) (err error) {
	var asJSON bool
	pos, configPath, err := parseCommand("skill info", args, 1, "NAME [--json]", func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, true)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	s, err := e.live.Current().Get(pos[0])
	if err != nil {
		if e.md != nil {
			if m, ok := e.md.catalog.Skill(pos[0]); ok {
				return a.printMDInfo(m, asJSON)
			}
		}
		return err
	}
	if asJSON {
		return writeJSON(a.stdout, toJSON(s, true))
	}
	m := s.Manifest
	w := a.stdout
	// Every manifest field is the skill author's text: escaped, one line each.
	fmt.Fprintf(w, "%s %s", safe(s.Name), safe(m.Version))
	if s.Builtin {
		fmt.Fprint(w, " (built-in)")
	}
	fmt.Fprintf(w, "\n  %s\n", safe(m.Description))
	if m.Author != "" {
		fmt.Fprintf(w, "author:       %s\n", safe(m.Author))
	}
	fmt.Fprintf(w, "status:       %s\n", s.Status)
	if s.Problem != nil {
		fmt.Fprintf(w, "problem:      %s\n", safe(s.Problem.Error()))
	}
	fmt.Fprintf(w, "permission:   %s (approval: %s)\n", m.Permission, s.Approval)
	fmt.Fprintf(w, "entrypoint:   %s\n", safe(m.Entrypoint))
	fmt.Fprintln(w, "declares:")
	for _, line := range install.Describe(m)[1:] {
		fmt.Fprintf(w, "  - %s\n", safe(line))
	}
	fmt.Fprintf(w, "granted:      %s\n", describeGrants(s.Grants))
	if s.Declared != m.Resources {
		fmt.Fprintf(w, "limits:       %d fuel, %d MiB, %s (asked for %d fuel, %d MiB, %s; capped by buddy.toml)\n",
			m.Resources.Fuel, m.Resources.MemoryMB, m.Resources.Timeout, s.Declared.Fuel, s.Declared.MemoryMB, s.Declared.Timeout)
	}
	fmt.Fprintf(w, "sha256:       %s\n", s.SHA256)
	if s.WasmPath != "" {
		fmt.Fprintf(w, "module:       %s\n", safe(s.WasmPath))
	}
	// JSON escapes C0 controls but not C1 or bidi characters.
	schema, _ := json.MarshalIndent(m.InputSchema, "  ", "  ")
	fmt.Fprintf(w, "input schema:\n  %s\n", textsafe.Block(string(schema), maxBlockBytes))
	return nil
}

func (a *app) skillInstall(ctx context.Context, args []string) (err error) {
	var manifest *string
	var upgrade, yes *bool
	pos, configPath, err := parseCommand("skill install", args, 1, "FILE.wasm [--manifest skill.toml] [--upgrade] [--yes]", func(fs *flag.FlagSet) {
		manifest = fs.String("manifest", "", "skill.toml (default: beside the module)")
		upgrade = fs.Bool("upgrade", false, "replace an installed skill of the same name")
		yes = fs.Bool("yes", false, "accept an upgrade that widens capabilities")
	})
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	inst := &install.Installer{Store: e.st, DataDir: e.dataDir}
	res, err := inst.Install(ctx, install.Request{
		WasmPath: pos[0], ManifestPath: *manifest, Upgrade: *upgrade,
		Consent: func(widened []string) (bool, error) {
			if *yes {
				return true, nil
			}
			if !a.isTerminal() {
				return false, fmt.Errorf("no terminal to ask; pass --yes to accept")
			}
			fmt.Fprintln(a.stderr, "This upgrade widens what the skill may do:")
			for _, w := range widened {
				fmt.Fprintf(a.stderr, "  - %s\n", safe(w))
			}
			fmt.Fprint(a.stderr, "Accept? [y/N] ")
			answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
			answer = strings.ToLower(strings.TrimSpace(answer))
			return answer == "y" || answer == "yes", nil
		},
	})
	if err != nil {
		return err
	}
	verb := "installed"
	if res.Upgraded {
		verb = "upgraded " + res.Previous + " →"
	}
	fmt.Fprintf(a.stdout, "%s %s %s (sha256 %s)\n", safe(verb), safe(res.Skill.Name), safe(res.Skill.Version), res.Skill.SHA256[:16])
	for _, line := range install.Describe(res.Manifest) {
		fmt.Fprintf(a.stdout, "  - %s\n", safe(line))
	}
	if sec, ok := e.cfg.Skills[res.Skill.Name]; ok {
		g := skills.EffectiveGrants(res.Skill.Name, res.Manifest, sec, e.cfg.Limits)
		fmt.Fprintf(a.stdout, "granted by buddy.toml: %s\n", describeGrants(g))
	} else if len(install.Describe(res.Manifest)) > 2 && !emptyCaps(res.Manifest.Capabilities) {
		fmt.Fprintf(a.stdout, "nothing is granted yet: add a [skills.%s] section to buddy.toml to grant what it may use\n", res.Skill.Name)
	}
	return nil
}

func emptyCaps(c runtime.Capabilities) bool {
	return !c.FilesRead && !c.FilesWrite && len(c.Network) == 0 && len(c.Env) == 0 && !c.Memory
}

func (a *app) skillRemove(ctx context.Context, args []string) (err error) {
	pos, configPath, err := parseCommand("skill remove", args, 1, "NAME", nil)
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	inst := &install.Installer{Store: e.st, DataDir: e.dataDir}
	row, err := inst.Remove(ctx, pos[0])
	if err != nil {
		if k := errs.KindOf(err); (k == errs.KindNotFound || k == errs.KindInvalidInput) && e.cfg.Instructions.Enabled {
			// Not an installed WebAssembly skill: a SKILL.md folder?
			if mdErr := skillmd.NewStore(e.cfg.Instructions.SkillsDir).Delete(pos[0]); mdErr == nil {
				fmt.Fprintf(a.stdout, "removed the SKILL.md skill %s (its folder is deleted)\n", safe(pos[0]))
				return nil
			}
		}
		return err
	}
	fmt.Fprintf(a.stdout, "removed %s %s (its memory, if any, is kept)\n", safe(row.Name), safe(row.Version))
	return nil
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errs.Wrap(errs.ErrInternal, "encoding JSON", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
