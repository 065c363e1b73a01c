package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills/skillmd"
)

// mdJSON is the --json form of a SKILL.md skill in list and info.
type mdJSON struct {
	Name         string               `json:"name"`
	Type         string               `json:"type"`
	Description  string               `json:"description"`
	Status       string               `json:"status"`
	Permission   string               `json:"permission"`
	Approval     string               `json:"approval"`
	Source       string               `json:"source,omitempty"`
	License      string               `json:"license,omitempty"`
	AllowedTools []string             `json:"allowed_tools,omitempty"`
	Parameters   map[string]any       `json:"parameters,omitempty"`
	Metadata     map[string]any       `json:"metadata,omitempty"`
	Permissions  *skillmd.Permissions `json:"permissions,omitempty"`
	Shadowed     bool                 `json:"shadowed,omitempty"`
	Path         string               `json:"path"`
}

func toMDJSON(s *skillmd.Skill) mdJSON {
	status := catalog.StatusReady
	if s.Type == skillmd.TypeScript {
		status = catalog.StatusUnavailable
	}
	return mdJSON{Name: s.Name, Type: s.Type, Description: s.DescriptionOrDefault(), Status: status,
		Permission: string(catalog.ReadOnly), Approval: string(catalog.Trust), Source: s.Source, License: s.License,
		AllowedTools: s.AllowedTools, Parameters: s.Parameters, Metadata: s.Metadata, Permissions: s.Permissions, Path: s.Path}
}

// describeDeclared renders a skill's declared permissions on one line.
func describeDeclared(p *skillmd.Permissions) string {
	if p == nil {
		return "none declared (no restriction)"
	}
	var parts []string
	if len(p.FS.Read) > 0 {
		parts = append(parts, "read "+strings.Join(p.FS.Read, ", "))
	}
	if len(p.FS.Write) > 0 {
		parts = append(parts, "write "+strings.Join(p.FS.Write, ", "))
	}
	if len(p.Network.Allow) > 0 {
		parts = append(parts, "network "+strings.Join(p.Network.Allow, ", "))
	}
	if len(p.Env) > 0 {
		parts = append(parts, "env "+strings.Join(p.Env, ", "))
	}
	if len(parts) == 0 {
		return "nothing (while active, tools may touch no file, host or variable)"
	}
	return safe(strings.Join(parts, "; "))
}

// mdSkills lists the active SKILL.md skills of e (none when disabled).
func (e *env) mdSkills(ctx context.Context) []*skillmd.Skill {
	if e.md == nil {
		return nil
	}
	infos, _ := e.md.catalog.List(ctx)
	out := make([]*skillmd.Skill, 0, len(infos))
	for _, i := range infos {
		if s, ok := e.md.catalog.Skill(i.Name); ok {
			out = append(out, s)
		}
	}
	return out
}

// skillAdd is `buddy skill add DIR`: copy a SKILL.md folder in, validated.
func (a *app) skillAdd(ctx context.Context, args []string) error {
	pos, configPath, err := parseCommand("skill add", args, 1, "DIR", nil)
	if err != nil {
		return err
	}
	cfg, err := a.loadConfig(configPath)
	if err != nil {
		return err
	}
	if !cfg.Instructions.Enabled {
		return errs.New(errs.ErrConfig, "SKILL.md skills are disabled: set [instructions] enabled = true in buddy.toml")
	}
	if _, err := cfg.DataDir(); err != nil {
		return err
	}
	s, err := skillmd.NewStore(cfg.Instructions.SkillsDir).Add(ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "added %s (%s) to %s\n", safe(s.Name), s.Type, safe(s.Dir))
	fmt.Fprintf(a.stdout, "  declared permissions: %s\n", describeDeclared(s.Permissions))
	if s.Type == skillmd.TypeScript {
		fmt.Fprintln(a.stdout, "  note: a script skill is stored but never run; package its logic as a WebAssembly skill")
	}
	return nil
}

// printMDInfo is `skill info NAME` for a SKILL.md skill.
func (a *app) printMDInfo(s *skillmd.Skill, asJSON bool) error {
	if asJSON {
		return writeJSON(a.stdout, toMDJSON(s))
	}
	w := a.stdout
	j := toMDJSON(s)
	fmt.Fprintf(w, "%s (SKILL.md, %s)\n  %s\n", safe(s.Name), s.Type, safe(strings.Join(strings.Fields(j.Description), " ")))
	fmt.Fprintf(w, "status:       %s\n", j.Status)
	fmt.Fprintf(w, "permission:   read_only (approval: trust)\n")
	if s.Source != "" {
		fmt.Fprintf(w, "source:       %s\n", safe(s.Source))
	}
	if s.License != "" {
		fmt.Fprintf(w, "license:      %s\n", safe(s.License))
	}
	if len(s.AllowedTools) > 0 {
		fmt.Fprintf(w, "allowed tools: %s\n", safe(strings.Join(s.AllowedTools, ", ")))
	}
	fmt.Fprintf(w, "declared permissions: %s\n", describeDeclared(s.Permissions))
	fmt.Fprintf(w, "file:         %s\n", safe(s.Path))
	return nil
}
