package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/errs"
	"github.com/buddy-run/buddy/internal/registry"
	"github.com/buddy-run/buddy/runtime"
)

// skillRun runs a registered skill by name, or a module file, through the same
// runtime, grants, approval and limits.
func (a *app) skillRun(ctx context.Context, args []string) error {
	var input, manifestFlag, entry *string
	var yes, stats *bool
	pos, configPath, err := parseCommand("skill run", args, 1, "NAME|FILE.wasm [--input JSON]", func(fs *flag.FlagSet) {
		input = fs.String("input", "", "input: JSON, @FILE, or - for stdin")
		manifestFlag = fs.String("manifest", "", "skill.toml for a module file (default: skill.toml beside it)")
		entry = fs.String("entrypoint", "", "exported function to call (default: the manifest's)")
		yes = fs.Bool("yes", false, "approve mutating and network calls without asking")
		stats = fs.Bool("stats", false, "print fuel and time used on stderr")
	})
	if err != nil {
		return err
	}
	target := pos[0]
	in, err := a.readInput(*input)
	if err != nil {
		return err
	}
	if isModuleFile(target) {
		return a.runFile(ctx, target, configPath, *manifestFlag, *entry, in, *yes, *stats)
	}
	if *manifestFlag != "" || *entry != "" {
		return errs.New(errs.ErrInvalidInput, "--manifest and --entrypoint apply to a module file; a registered skill runs with its installed manifest")
	}
	e, err := a.openEnv(ctx, configPath, true, true)
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	sk, err := e.reg.Get(target)
	if err != nil {
		return err
	}
	if len(in) == 0 {
		in = []byte("{}")
	}
	if err := registry.ValidateInput(sk.Manifest.InputSchema, in); err != nil {
		return err
	}
	if err := a.approve(ctx, sk.Name, sk.Manifest.Permission, sk.Approval, in, *yes); err != nil {
		return err
	}
	res, err := e.reg.Call(ctx, sk.Name, in)
	if err != nil {
		return err
	}
	return a.printResult(res, *stats)
}

// runFile runs a module file: its manifest is --manifest, or a skill.toml
// beside the file, or the defaults with no capability. The operator's
// [skills.NAME] section for the manifest's name grants capabilities, as for an
// installed skill.
func (a *app) runFile(ctx context.Context, path, configFlag, manifestPath, entry string, in []byte, yes, stats bool) error {
	wasm, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return errs.Wrap(errs.ErrNotFound, "module file "+path, err)
		}
		return errs.Wrap(errs.ErrInvalidInput, "reading "+path, err)
	}
	m, err := manifestFor(path, manifestPath)
	if err != nil {
		return err
	}
	// A module file may not borrow a built-in's name, its grants or the
	// memory built-ins' shared namespace.
	if _, ok := builtins.Get(m.Name); ok || m.Name == registry.MemorySection {
		return errs.New(errs.ErrForbidden, fmt.Sprintf("%s: skill name %q belongs to a built-in; rename it in skill.toml", path, m.Name))
	}
	if _, err := runtime.Inspect(ctx, wasm, withEntry(m, entry)); err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configFlag, m.Capabilities.Memory, false)
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	sec := e.cfg.Skills[m.Name]
	eff := registry.EffectiveManifest(m, sec, e.cfg.Limits)
	grants := registry.EffectiveGrants(m.Name, m, sec, e.cfg.Limits)
	deps := hostfns.Deps{}
	if e.st != nil {
		deps.KV, deps.Memories = e.st, e.st
	}
	host, err := hostfns.Link(grants, deps)
	if err != nil {
		return err
	}
	defer host.Close()
	mod, err := e.rt.Load(ctx, wasm, runtime.Spec{Name: m.Name, Manifest: withEntry(eff, entry), Host: host})
	if err != nil {
		return err
	}
	if err := a.approve(ctx, m.Name, m.Permission, registry.EffectiveApproval(m.Permission, sec.Approval), in, yes); err != nil {
		return err
	}
	res, err := mod.Call(ctx, in)
	if err != nil {
		return err
	}
	return a.printResult(res, stats)
}

// manifestFor finds the manifest of a module file.
func manifestFor(wasmPath, manifestPath string) (*runtime.Manifest, error) {
	if manifestPath != "" {
		return runtime.LoadManifest(manifestPath)
	}
	beside := filepath.Join(filepath.Dir(wasmPath), "skill.toml")
	if _, err := os.Stat(beside); err == nil {
		return runtime.LoadManifest(beside)
	}
	name := strings.TrimSuffix(filepath.Base(wasmPath), filepath.Ext(wasmPath))
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '_'
	}, name)
	if !runtime.ValidName(name) {
		name = "module"
	}
	return runtime.DefaultManifest(name), nil
}

func withEntry(m *runtime.Manifest, entry string) *runtime.Manifest {
	if entry == "" {
		return m
	}
	c := *m
	c.Entrypoint = entry
	return &c
}

func isModuleFile(target string) bool {
	return strings.HasSuffix(target, ".wasm") || strings.ContainsRune(target, filepath.Separator)
}

// readInput reads --input: inline text, @FILE, or - for stdin.
func (a *app) readInput(v string) ([]byte, error) {
	switch {
	case v == "-":
		b, err := io.ReadAll(io.LimitReader(a.stdin, runtime.DefaultMaxInputBytes+1))
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading input from stdin", err)
		}
		return b, nil
	case strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading input file "+v[1:], err)
		}
		return b, nil
	}
	return []byte(v), nil
}

func (a *app) printResult(res *runtime.Result, stats bool) error {
	if _, err := a.stdout.Write(res.Output); err != nil {
		return errs.Wrap(errs.ErrInternal, "writing output", err)
	}
	if f, ok := a.stdout.(*os.File); ok && len(res.Output) > 0 && res.Output[len(res.Output)-1] != '\n' && isTerminal(f.Fd()) {
		fmt.Fprintln(a.stdout)
	}
	if stats {
		fmt.Fprintf(a.stderr, "fuel: %d  time: %s\n", res.Fuel, res.Duration.Round(1000))
	}
	return nil
}

// approve asks on the terminal before a mutating or network call (or any call
// whose policy is not trust); --yes approves; with no terminal the call is
// denied.
func (a *app) approve(ctx context.Context, name string, perm runtime.Permission, policy string, in []byte, yes bool) error {
	asker := approval.AskerFunc(func(ctx context.Context, req approval.Request) (bool, error) {
		if yes {
			return true, nil
		}
		if !a.isTerminal() {
			return false, fmt.Errorf("no terminal to ask for approval of this %s skill; pass --yes to approve", req.Permission)
		}
		fmt.Fprintf(a.stderr, "Allow %s %s (%s)? [y/N] ", req.Skill, compact(req.Arguments, 300), req.Permission)
		answer, err := bufio.NewReader(a.stdin).ReadString('\n')
		if err != nil && answer == "" {
			return false, fmt.Errorf("no answer")
		}
		answer = strings.ToLower(strings.TrimSpace(answer))
		return answer == "y" || answer == "yes", nil
	})
	// In the CLI every invocation is its own conversation, so "once" asks too.
	if policy == config.ApprovalOnce {
		policy = config.ApprovalAlways
	}
	return approval.NewGate(asker).Check(ctx, approval.Request{
		Skill: name, Permission: string(perm), Policy: policy, Arguments: json.RawMessage(in),
	})
}

// compact renders JSON arguments on one line, cut to max bytes.
func compact(raw []byte, max int) string {
	var buf strings.Builder
	var v any
	if json.Unmarshal(raw, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			raw = b
		}
	}
	s := string(raw)
	if len(s) > max {
		s = s[:max] + "…"
	}
	for _, r := range s {
		if r < 0x20 {
			r = ' '
		}
		buf.WriteRune(r)
	}
	return buf.String()
}
