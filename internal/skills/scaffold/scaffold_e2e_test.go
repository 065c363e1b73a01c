package scaffold

// End-to-end tests of `buddy skill init`: the buddy binary is built with
// `go build`, and for each language a project is generated, built with its
// own build file, installed, run through buddy with a grant (a read inside the
// granted directory works; "../secret" is "error: forbidden: ..." with exit
// code 5), and its own test target is run.
//
// They need the guest toolchains: TinyGo (scripts/install-tinygo.sh) and a
// Rust with the wasm32-unknown-unknown target (scripts/install-rust-wasm.sh),
// plus make. A missing toolchain FAILS the test, naming the script that
// installs it, unless BUDDY_SKIP_TOOLCHAIN_TESTS=1, which turns it into a
// skip. -short skips them altogether (they take 20 s to a minute).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/runtime"
)

// buddyBinary builds cmd/buddy once per test binary into a directory that
// TestMain removes.
var buddyBinary = struct {
	once      sync.Once
	dir, path string
	err       error
}{}

func TestMain(m *testing.M) {
	code := m.Run()
	if buddyBinary.dir != "" {
		os.RemoveAll(buddyBinary.dir)
	}
	os.Exit(code)
}

func buildBuddy(t *testing.T) string {
	t.Helper()
	b := &buddyBinary
	b.once.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		if err != nil {
			b.err = err
			return
		}
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
			b.err = fmt.Errorf("module root not found: %w", err)
			return
		}
		if b.dir, b.err = os.MkdirTemp("", "buddy-scaffold-e2e-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "buddy")
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/buddy")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/buddy: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// needToolchain fails (or, with BUDDY_SKIP_TOOLCHAIN_TESTS=1, skips) when
// what a language's build needs is missing.
func needToolchain(t *testing.T, lang string) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("make"); err != nil {
		missing = append(missing, "make is not installed (apt-get install make)")
	}
	switch lang {
	case "tinygo":
		if _, err := exec.LookPath("tinygo"); err != nil {
			missing = append(missing, "tinygo is not on PATH: install it with scripts/install-tinygo.sh")
		}
	case "rust":
		if !rustWasm() {
			missing = append(missing, "no Rust compiler with the wasm32-unknown-unknown target: install Debian's with scripts/install-rust-wasm.sh")
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := strings.Join(missing, "; ")
	if os.Getenv("BUDDY_SKIP_TOOLCHAIN_TESTS") == "1" {
		t.Skip(msg + " (skipped: BUDDY_SKIP_TOOLCHAIN_TESTS=1)")
	}
	t.Fatal(msg + " (or set BUDDY_SKIP_TOOLCHAIN_TESTS=1 to skip this test)")
}

// rustWasm mirrors the generated build.sh: the rustc on PATH with a wasm32
// std (unless it is Debian's), or Debian's with its offline serde_json.
func rustWasm() bool {
	const target = "wasm32-unknown-unknown"
	sysroot := func(rustc string) string {
		out, err := exec.Command(rustc, "--print", "sysroot").Output()
		if err != nil {
			return ""
		}
		s := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(s, "lib", "rustlib", target)); err != nil {
			return ""
		}
		return s
	}
	if rustc, err := exec.LookPath("rustc"); err == nil {
		if _, err := exec.LookPath("cargo"); err == nil {
			if s := sysroot(rustc); s != "" && s != "/usr" {
				return true
			}
		}
	}
	if _, err := os.Stat("/usr/bin/cargo"); err != nil || sysroot("/usr/bin/rustc") == "" {
		return false
	}
	serde, _ := filepath.Glob("/usr/share/cargo/registry/serde_json-1.*")
	return len(serde) > 0
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs a command in dir with env added to the environment.
func run(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return r
}

// mustRun runs a command that must succeed.
func mustRun(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	start := time.Now()
	r := run(t, dir, env, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit code %d\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	t.Logf("%s: %s", strings.Join(append([]string{filepath.Base(name)}, args...), " "), time.Since(start).Round(time.Millisecond))
	return r
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the end-to-end build of generated skills")
	}
	for _, lang := range []string{"tinygo", "rust"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			needToolchain(t, lang)
			buddy := buildBuddy(t)
			endToEnd(t, buddy, lang)
		})
	}
}

func endToEnd(t *testing.T, buddy, lang string) {
	name := "wc_" + lang
	tmp := t.TempDir()
	proj := filepath.Join(tmp, "project")
	granted := filepath.Join(tmp, "granted")
	for _, d := range []string{granted, filepath.Join(tmp, "config"), filepath.Join(tmp, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(granted, "notes.txt"), "one two\nthree\n")
	mustWrite(t, filepath.Join(tmp, "secret"), "do not read me\n")
	config := filepath.Join(tmp, "buddy.toml")
	mustWrite(t, config, fmt.Sprintf("[skills.%s]\nallowed_directories = [%q]\n", name, granted))
	env := []string{
		"XDG_DATA_HOME=" + filepath.Join(tmp, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"),
		"BUDDY_CONFIG=",
	}

	// init, through the CLI.
	out := mustRun(t, tmp, env, buddy, "skill", "init", name, "--lang", lang, "--dir", proj)
	for _, want := range []string{filepath.Join(proj, "skill.toml"), "make build", "buddy skill install " + name + ".wasm", "[skills." + name + "]"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("skill init output lacks %q:\n%s", want, out.stdout)
		}
	}

	// build, with the project's own build file.
	switch lang {
	case "tinygo":
		mustRun(t, proj, nil, "make", "build")
		mustRun(t, proj, []string{"GOWORK=off"}, "go", "mod", "tidy", "-diff")
	case "rust":
		mustRun(t, proj, nil, "./build.sh")
	}
	wasmPath := filepath.Join(proj, name+".wasm")
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.LoadManifest(filepath.Join(proj, "skill.toml"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := runtime.Inspect(t.Context(), wasm, m)
	if err != nil {
		t.Fatalf("the built module does not pass buddy's checks: %v", err)
	}
	t.Logf("%s.wasm: %d bytes, imports %s", name, info.Size, strings.Join(info.Imports, " "))
	for _, imp := range info.Imports {
		// fs_read is what the skill uses; kernel_read, kernel_write,
		// input_read and output_write are skillkit's transport (always
		// linked, no capability).
		switch imp {
		case "buddy:host/v1.fs_read", "buddy:host/v1.kernel_read", "buddy:host/v1.kernel_write",
			"buddy:host/v1.input_read", "buddy:host/v1.output_write":
			continue
		}
		if strings.HasPrefix(imp, "buddy:host/v1.") {
			t.Errorf("the module imports %s, which it does not use", imp)
		}
		if strings.HasPrefix(imp, "wasi_snapshot_preview1.") {
			t.Errorf("the module imports %s: it should need no WASI", imp)
		}
	}

	// install and run by name.
	out = mustRun(t, tmp, env, buddy, "skill", "install", wasmPath, "--config", config)
	if !strings.Contains(out.stdout, "installed "+name+" 0.1.0") {
		t.Errorf("install output:\n%s", out.stdout)
	}
	out = mustRun(t, tmp, env, buddy, "skill", "run", name, "--config", config, "--input", `{"path":"notes.txt"}`)
	var counts struct{ Lines, Words, Bytes int }
	if err := json.Unmarshal([]byte(out.stdout), &counts); err != nil || counts.Lines != 2 || counts.Words != 3 || counts.Bytes != 14 {
		t.Errorf("run notes.txt = %q (%v), want 2 lines, 3 words, 14 bytes", out.stdout, err)
	}
	denied := run(t, tmp, env, buddy, "skill", "run", name, "--config", config, "--input", `{"path":"../secret"}`)
	if denied.code != 5 || !strings.HasPrefix(denied.stderr, "error: forbidden: ") || denied.stdout != "" {
		t.Errorf("run ../secret: exit code %d, stdout %q, stderr %q; want 5 and \"error: forbidden: ...\"", denied.code, denied.stdout, denied.stderr)
	}

	// The project's own tests, against the same binary.
	out = mustRun(t, proj, nil, "make", "test", "BUDDY="+buddy)
	if !strings.Contains(out.stdout, "test.sh: ok") {
		t.Errorf("make test output:\n%s%s", out.stdout, out.stderr)
	}
}

// TestCLIRefuses checks the exit code and message of refused inits, through
// the binary. It needs no guest toolchain.
func TestCLIRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping a test that builds cmd/buddy")
	}
	buddy := buildBuddy(t)
	tmp := t.TempDir()
	mustWrite(t, filepath.Join(tmp, "taken"), "x")
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"Bad", "--lang", "tinygo"}, "error: invalid_input: invalid skill name \"Bad\""},
		{[]string{"wordy", "--lang", "zig"}, "error: invalid_input: unknown language \"zig\": choose rust or tinygo"},
		{[]string{"wordy"}, "error: invalid_input: --lang is required"},
		{[]string{"--lang", "rust"}, "error: invalid_input: usage: buddy skill init NAME"},
		{[]string{"wordy", "--lang", "rust", "--dir", "."}, "is not empty: an existing directory is not overwritten"},
		{[]string{"wordy", "--lang", "rust", "--dir", "taken"}, "taken exists and is not a directory"},
	}
	for _, tt := range tests {
		r := run(t, tmp, []string{"BUDDY_CONFIG="}, buddy, append([]string{"skill", "init"}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.wantErr) {
			t.Errorf("skill init %q: exit code %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.wantErr)
		}
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 {
		t.Errorf("refused inits wrote into %s: %v", tmp, entries)
	}
}
