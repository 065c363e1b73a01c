package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	builtins "github.com/buddy-run/buddy/builtins-wasm"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/skills/install"
	"github.com/buddy-run/buddy/runtime"
)

// skillRun runs a registered skill by name, or a module file, through the same
// runtime, grants, approval and limits.
func (a *app) skillRun(ctx context.Context, args []string) (err error) {
	var input, inputRaw, manifestFlag, entry *string
	var yes, stats *bool
	pos, configPath, err := parseCommand("skill run", args, 1, "NAME|FILE.wasm [--input JSON]", func(fs *flag.FlagSet) {
		input = fs.String("input", "", "input: JSON, @FILE, or - for stdin")
		inputRaw = fs.String("input-raw", "", "raw input bytes for a module file with no input schema: text, @FILE, or - for stdin")
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
	raw := false
	if *inputRaw != "" {
		if *input != "" {
			return errs.New(errs.ErrInvalidInput, "--input-raw passes bytes to a skill whose manifest declares no input schema: it excludes --input")
		}
		if in, err = a.readRawInput(*inputRaw); err != nil {
			return err
		}
		if isModuleFile(target) {
			return a.runFile(ctx, target, configPath, *manifestFlag, *entry, in, true, *yes, *stats)
		}
		raw = true // a registered skill: the registry refuses it if its manifest declares a schema
	}
	if isModuleFile(target) {
		return a.runFile(ctx, target, configPath, *manifestFlag, *entry, in, false, *yes, *stats)
	}
	if *manifestFlag != "" || *entry != "" {
		return errs.New(errs.ErrInvalidInput, "--manifest and --entrypoint apply to a module file; a registered skill runs with its installed manifest")
	}
	e, err := a.openEnv(ctx, configPath, true, true)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	res, err := e.newGate(a.terminalAsker(*yes), nil).Invoke(ctx, catalog.Call{Skill: target, Arguments: in, Raw: raw})
	if err != nil {
		return err
	}
	return a.printResult(res, *stats)
}

// runFile runs a module file: its manifest is --manifest, or a skill.toml
// beside the file, or the defaults with no capability. The operator's
// [skills.NAME] section for the manifest's name grants capabilities, as for an
// installed skill.
func (a *app) runFile(ctx context.Context, path, configFlag, manifestPath, entry string, in []byte, raw, yes, stats bool) (err error) {
	wasm, err := osfile.ReadBounded(path, install.MaxModuleBytes)
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
	if why := builtins.Reserved(m.Name); why != "" {
		return errs.New(errs.ErrForbidden, path+": "+why)
	}
	m = withEntry(m, entry)
	// A module file has always taken bytes (Extism plugins do): plain --input
	// that is not a JSON object (or none) goes through as raw input when the manifest
	// declares no schema.
	if !raw && !isJSONObject(in) && rawInputAllowed(path, m) == nil {
		raw = true
	}
	if raw {
		if err := rawInputAllowed(path, m); err != nil {
			return err
		}
		m.InputSchema = nil // this run's manifest: the input is bytes
	}
	if _, err := runtime.Inspect(ctx, wasm, m); err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configFlag, m.Capabilities.Memory, true)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	if err := e.live.Current().AddModule(ctx, m, wasm); err != nil {
		return err
	}
	// Load before asking: an import the grant does not cover is reported
	// without a question.
	if err := e.live.Current().Load(ctx, m.Name); err != nil {
		return err
	}
	// The CLI asks on the terminal; every call is its own conversation, so
	// "once" asks every time.
	res, err := e.newGate(a.terminalAsker(yes), nil).Invoke(ctx, catalog.Call{Skill: m.Name, Arguments: in, Raw: raw})
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
	// Bounded, and from a regular file only: a FIFO or /dev/zero named with
	// @ would hang or exhaust memory. (Whether the bytes must be UTF-8 JSON
	// is the callee's to say: skills.ValidateInput refuses invalid UTF-8
	// for a registered skill; a module file takes bytes.)
	switch {
	case v == "-":
		b, err := osfile.ReadAllBounded(a.stdin, runtime.DefaultMaxInputBytes)
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading input from stdin", err)
		}
		return b, nil
	case strings.HasPrefix(v, "@"):
		b, err := osfile.ReadBounded(v[1:], runtime.DefaultMaxInputBytes)
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading input file "+v[1:], err)
		}
		return b, nil
	}
	return []byte(v), nil
}

func (a *app) printResult(res *catalog.Result, stats bool) error {
	out := res.Output
	if f, ok := a.stdout.(*os.File); ok && isTerminal(f.Fd()) {
		out = terminalOutput(out) // a pipe gets the bytes; a person, text
	} else if len(out) > 0 && (out[0] == '{' || out[0] == '[') && out[len(out)-1] != '\n' && json.Valid(out) {
		out = append(out[:len(out):len(out)], '\n') // a JSON object or array ends its line, as any CLI's does
	}
	if _, err := a.stdout.Write(out); err != nil {
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

// terminalAsker asks on the terminal before a mutating or network call (or any
// call whose policy is not trust); --yes approves; with no terminal the call
// is denied.
func (a *app) terminalAsker(yes bool) approval.Asker {
	return approval.AskerFunc(func(ctx context.Context, req approval.Request) (bool, error) {
		if yes {
			return true, nil
		}
		if !a.isTerminal() {
			return false, fmt.Errorf("no terminal to ask for approval of this %s skill; pass --yes to approve", req.Permission)
		}
		fmt.Fprintf(a.stderr, "%s\nAllow? [y/N] ", approval.Describe(req, approval.DefaultWidth))
		return readYes(ctx, a.stdin, a.stderr, nil)
	})
}

// readYes reads a y/n answer from r in the background, so that the approval
// timeout and Ctrl-C end the question even while nobody types; onDone, if
// set, runs when the question ends unanswered (closing r ends the read).
func readYes(ctx context.Context, r io.Reader, w io.Writer, onDone func()) (bool, error) {
	got := make(chan string, 1)
	go func() {
		answer, err := bufio.NewReader(r).ReadString('\n')
		if err != nil && answer == "" {
			answer = "\x00"
		}
		got <- answer
	}()
	select {
	case answer := <-got:
		if answer == "\x00" {
			return false, fmt.Errorf("no answer")
		}
		answer = strings.ToLower(strings.TrimSpace(answer))
		return answer == "y" || answer == "yes", nil
	case <-ctx.Done():
		fmt.Fprintln(w)
		if onDone != nil {
			onDone()
		}
		return false, fmt.Errorf("no answer in time: %w", ctx.Err())
	}
}

// isJSONObject reports whether in is one JSON object.
func isJSONObject(in []byte) bool {
	t := bytes.TrimSpace(in)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}
