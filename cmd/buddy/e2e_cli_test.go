//go:build unix

package main_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// manifest renders a skill.toml: keys go in [skill], tables after it.
func manifest(name, version, permission, keys, tables string) string {
	return fmt.Sprintf(`[skill]
name = %q
version = %q
description = "e2e fixture %s"
permission = %q
%s
%s`, name, version, name, permission, keys, tables)
}

// fixtureDir copies a runtime fixture into dir, with a skill.toml beside it
// when man is not empty, and returns the module's path.
func fixtureDir(tb testing.TB, dir, fixture, man string) string {
	tb.Helper()
	p := copyFile(tb, testdata(tb, fixture), filepath.Join(dir, fixture))
	if man != "" {
		write(tb, filepath.Join(dir, "skill.toml"), man)
	}
	return p
}

// TestCLIContract: for each kind the CLI can produce, invocations that produce
// it, with the kind's exit code, "error: <kind>: <detail>" on stderr and
// nothing on stdout; and the invocations that succeed write only to stdout.
func TestCLIContract(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	files := filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "big.bin"), strings.Repeat("b", 65))
	write(t, filepath.Join(files, "ok.txt"), "fine")
	closed := closedPort(t)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), fmt.Sprintf(`
[skills.read_file]
allowed_directories = [%s]
max_bytes = 64

[skills.write_file]
allowed_directories = [%s]

[skills.fetch_url]
allowed_domains = [%s]
`, q(files), q(files), q(closed)))
	badCfg := write(t, filepath.Join(s.dir, "bad.toml"), `[skills.read_file]
allowed_directories = ["/tmp"]
bogus_key = 1
`)
	noDirs := write(t, filepath.Join(s.dir, "nodirs.toml"), "[skills.read_file]\n")
	// A data directory of its own whose audit log another process edited.
	tampered := write(t, filepath.Join(s.dir, "tampered.toml"), fmt.Sprintf("[storage]\ndata_dir = %s\n", q(filepath.Join(s.dir, "tampered"))))
	if r := s.run(t, "skill", "list", "--config", tampered); r.code != 0 {
		t.Fatalf("seeding the audit log:\n%s", r)
	}
	tamperAudit(t, filepath.Join(s.dir, "tampered", "buddy.db"), "UPDATE audit SET outcome = 'x' WHERE id = 1")
	spinTimeout := fixtureDir(t, filepath.Join(s.dir, "spin_timeout"), "spin.wasm",
		manifest("spin_timeout", "1.0.0", "read_only", "", "[resources]\nfuel = 1_000_000_000_000\ntimeout = \"300ms\"\n"))
	spinFuel := fixtureDir(t, filepath.Join(s.dir, "spin_fuel"), "spin.wasm",
		manifest("spin_fuel", "1.0.0", "read_only", "", "[resources]\nfuel = 10_000\ntimeout = \"2s\"\n"))
	spinLong := fixtureDir(t, filepath.Join(s.dir, "spin_long"), "spin.wasm",
		manifest("spin_long", "1.0.0", "read_only", "", "[resources]\nfuel = 1_000_000_000_000\ntimeout = \"30s\"\n"))
	badMan := fixtureDir(t, filepath.Join(s.dir, "bad_manifest"), "echo.wasm",
		manifest("bad_manifest", "1.0", "read_only", "", "[resources]\nmemory_mb = 1\n"))

	interrupt := func(cmd *exec.Cmd) {
		time.Sleep(700 * time.Millisecond)
		cmd.Process.Signal(os.Interrupt)
	}
	type tc struct {
		name string
		kind errs.Kind // "" = success
		job  job
		want string        // in the detail (or stdout on success)
		max  time.Duration // the call must end within this
	}
	run := func(args ...string) job { return job{args: args} }
	cases := []tc{
		{"version", "", run("version"), "buddy dev\n", 0},
		{"help", "", run("help"), "buddy skill run NAME|FILE.wasm", 0},
		{"read", "", run("skill", "run", "read_file", "--config", cfg, "--input", `{"path":"ok.txt"}`), `{"content":"fine"}`, 0},

		{"unknown command", errs.KindInvalidInput, run("frobnicate"), `unknown command "frobnicate"`, 0},
		{"unknown subcommand", errs.KindInvalidInput, run("skill", "frobnicate"), `unknown skill subcommand "frobnicate"`, 0},
		{"unknown flag", errs.KindInvalidInput, run("skill", "run", "read_file", "--config", cfg, "--bogus"), "flag provided but not defined: -bogus", 0},
		{"bad --input JSON", errs.KindInvalidInput, run("skill", "run", "read_file", "--config", cfg, "--input", `{"path":`), "input is not valid JSON", 0},
		{"input not an object", errs.KindInvalidInput, run("skill", "run", "read_file", "--config", cfg, "--input", `["ok.txt"]`), "input must be a JSON object", 0},
		{"input misses a required key", errs.KindInvalidInput, run("skill", "run", "read_file", "--config", cfg, "--input", `{}`), "path is required", 0},
		{"input has an unknown key", errs.KindInvalidInput, run("skill", "run", "read_file", "--config", cfg, "--input", `{"path":"ok.txt","x":1}`), "unknown property x", 0},
		{"missing @file", errs.KindInvalidInput, run("skill", "run", "read_file", "--config", cfg, "--input", "@"+filepath.Join(s.dir, "nope.json")), "reading input file", 0},
		{"too many arguments", errs.KindInvalidInput, run("skill", "run", "read_file", "extra", "--config", cfg), "usage: buddy skill run", 0},
		{"--entrypoint on a registered skill", errs.KindInvalidInput, run("skill", "run", "read_file", "--config", cfg, "--entrypoint", "run"), "apply to a module file", 0},
		{"not wasm", errs.KindInvalidInput, run("skill", "run", testdata(t, "notwasm.wasm")), "not a WebAssembly module", 0},
		{"guest claims invalid_input", errs.KindInvalidInput, run("skill", "run", testdata(t, "echo.wasm"), "--entrypoint", "fail"), "bad thing", 0},

		{"unknown config key", errs.KindConfig, run("skill", "list", "--config", badCfg), "skills.read_file.bogus_key (line 3): unknown key", 0},
		{"missing --config file", errs.KindConfig, run("skill", "list", "--config", filepath.Join(s.dir, "missing.toml")), "--config names", 0},
		{"built-in granted nothing", errs.KindConfig, run("skill", "list", "--config", noDirs), "skills.read_file: no allowed_directories", 0},
		{"bad skill.toml", errs.KindConfig, run("skill", "run", badMan), "skill.version", 0},

		{"unknown skill", errs.KindNotFound, run("skill", "run", "nosuch", "--config", cfg), `no skill "nosuch"`, 0},
		{"built-in not enabled", errs.KindNotFound, run("skill", "run", "memory_read", "--config", cfg, "--input", `{"key":"k"}`), "add a [skills.memory] section", 0},
		{"missing module file", errs.KindNotFound, run("skill", "run", filepath.Join(s.dir, "nope.wasm")), "module file", 0},
		{"missing export", errs.KindNotFound, run("skill", "run", testdata(t, "echo.wasm"), "--entrypoint", "nope"), `module exports no function "nope"`, 0},
		{"missing file", errs.KindNotFound, run("skill", "run", "read_file", "--config", cfg, "--input", `{"path":"nope.txt"}`), `"nope.txt"`, 0},
		{"info of an unknown skill", errs.KindNotFound, run("skill", "info", "nosuch", "--config", cfg), `no skill "nosuch"`, 0},

		{"path outside", errs.KindForbidden, run("skill", "run", "read_file", "--config", cfg, "--input", `{"path":"../x"}`), `".." element`, 0},
		{"undeclared import", errs.KindForbidden, run("skill", "run", testdata(t, "undeclared.wasm")), "buddy:host/v1.http_get", 0},
		{"Extism's http_request", errs.KindForbidden, run("skill", "run", testdata(t, "http_request.wasm")), "http_request", 0},
		{"remove a built-in", errs.KindForbidden, run("skill", "remove", "read_file", "--config", cfg), "read_file is a built-in", 0},

		{"mutating without --yes", errs.KindDenied, run("skill", "run", "write_file", "--config", cfg, "--input", `{"path":"w.txt","content":"x"}`), "User denied execution of write_file", 0},
		{"network without --yes", errs.KindDenied, run("skill", "run", "fetch_url", "--config", cfg, "--input", `{"url":"http://`+closed+`/"}`), "User denied execution of fetch_url", 0},

		{"file over max_bytes", errs.KindTooLarge, run("skill", "run", "read_file", "--config", cfg, "--input", `{"path":"big.bin"}`), `"big.bin"`, 0},

		{"deadline", errs.KindTimeout, run("skill", "run", spinTimeout), "", 5 * time.Second},
		{"fuel", errs.KindFuelExhausted, run("skill", "run", spinFuel), "of 10000 fuel", 0},
		{"fuel, counted loop", errs.KindFuelExhausted, run("skill", "run", testdata(t, "fuel_loop.wasm"), "--input", "1000000000"), "of 1000000000 fuel", 0},
		{"memory cap", errs.KindMemoryLimit, run("skill", "run", testdata(t, "grow.wasm")), "cap 16 MiB", 0},
		{"unreachable", errs.KindTrap, run("skill", "run", testdata(t, "trap.wasm")), "unreachable", 0},
		{"division by zero", errs.KindTrap, run("skill", "run", testdata(t, "trap.wasm"), "--entrypoint", "div0"), "divide by zero", 0},
		{"guest failure", errs.KindSkill, run("skill", "run", testdata(t, "echo.wasm"), "--entrypoint", "fail_plain"), "something broke", 0},
		{"audit log edited", errs.KindTampered, run("audit", "verify", "--config", tampered), "row 1: edited", 0},
		{"connection refused", errs.KindUnavailable, run("skill", "run", "fetch_url", "--yes", "--config", cfg, "--input", `{"url":"http://`+closed+`/"}`), closed, 0},
		{"interrupted", errs.KindCanceled, job{args: []string{"skill", "run", spinLong}, start: interrupt}, "", 10 * time.Second},
	}
	// Warm the compilation cache of the built-ins used.
	s.runAll(t, []job{cases[2].job, run("skill", "run", "fetch_url", "--yes", "--config", cfg, "--input", `{"url":"http://evil.test/"}`)})
	jobs := make([]job, len(cases))
	for i, c := range cases {
		jobs[i] = c.job
	}
	res := s.runAll(t, jobs)
	covered := map[errs.Kind]bool{}
	for i, c := range cases {
		t.Run(string(c.kind)+"/"+c.name, func(t *testing.T) {
			r := res[i]
			if c.max > 0 && r.elapsed > c.max {
				t.Errorf("took %s, want at most %s", r.elapsed, c.max)
			}
			if c.kind == "" {
				if out := r.ok(t); !strings.Contains(out, c.want) {
					t.Errorf("stdout %q does not contain %q", out, c.want)
				}
				return
			}
			if detail := r.fails(t, c.kind); !strings.Contains(detail, c.want) {
				t.Errorf("detail %q does not contain %q", detail, c.want)
			}
			covered[c.kind] = true
		})
	}
	for _, k := range errs.Kinds() {
		if k != errs.KindInternal && !covered[k] {
			t.Errorf("no passing invocation produced %s (exit %d)", k, errs.ExitCode(k))
		}
	}
	t.Run("no command prints the usage, then the error line", func(t *testing.T) {
		r := s.run(t)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != errs.ExitCode(errs.KindInvalidInput) || r.stdout != "" || !strings.HasPrefix(r.stderr, "buddy — ") ||
			lines[len(lines)-1] != "error: invalid_input: no command given" {
			t.Errorf("want the usage and the error line on stderr, exit 2:\n%s", r)
		}
	})
}

// closedPort returns "127.0.0.1:PORT" where nothing listens.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestRunModuleFile: `buddy skill run FILE.wasm` with the WAT echo fixture,
// the go-pdk and AssemblyScript plugins, a skill.toml beside the module,
// --manifest, and the defaults (no capability) when there is no manifest.
func TestRunModuleFile(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	echo := testdata(t, "echo.wasm")
	inputFile := write(t, filepath.Join(s.dir, "input.bin"), "from a file\x00\xff")
	// A skill.toml beside the module picks the export "fail"; --manifest and
	// --entrypoint override it.
	beside := fixtureDir(t, filepath.Join(s.dir, "beside"), "echo.wasm",
		manifest("echo_beside", "1.0.0", "read_only", `entrypoint = "fail"`, ""))
	other := write(t, filepath.Join(s.dir, "other.toml"), manifest("echo_other", "1.0.0", "read_only", `entrypoint = "run"`, ""))
	// undeclared.wasm calls http_get("https://example.com/"). With a manifest
	// declaring network and buddy.toml granting the manifest's name a domain,
	// http_get is linked; the grant (example.org) refuses the URL before any
	// DNS, and the module outputs the status digit it got ('1', forbidden).
	netDir := filepath.Join(s.dir, "net")
	undeclared := fixtureDir(t, netDir, "undeclared.wasm",
		manifest("net_probe", "1.0.0", "network", "", "[capabilities]\nnetwork = [\"*\"]\n"))
	netCfg := write(t, filepath.Join(s.dir, "net.toml"), "[skills.net_probe]\nallowed_domains = [\"example.org\"]\n")

	cases := []struct {
		name string
		job  job
		out  string    // stdout on success
		kind errs.Kind // or the failure
		want string    // in the detail
	}{
		{"echo inline", job{args: []string{"skill", "run", echo, "--input", "hello, world"}}, "hello, world", "", ""},
		{"echo empty", job{args: []string{"skill", "run", echo}}, "", "", ""},
		{"echo @file", job{args: []string{"skill", "run", echo, "--input", "@" + inputFile}}, "from a file\x00\xff", "", ""},
		{"echo stdin", job{args: []string{"skill", "run", echo, "--input", "-"}, stdin: "from stdin\n"}, "from stdin\n", "", ""},
		{"flags before the module", job{args: []string{"skill", "run", "--input", "x", echo}}, "x", "", ""},
		{"go-pdk greet", job{args: []string{"skill", "run", testdata(t, "pdkplugin.wasm"), "--entrypoint", "greet", "--input", "Ada"}}, "Hello, Ada!", "", ""},
		{"go-pdk count_vowels", job{args: []string{"skill", "run", testdata(t, "pdkplugin.wasm"), "--entrypoint", "count_vowels", "--input", "Hello, World"}}, "3", "", ""},
		{"go-pdk fail", job{args: []string{"skill", "run", testdata(t, "pdkplugin.wasm"), "--entrypoint", "fail"}}, "", errs.KindNotFound, "no such greeting"},
		{"AssemblyScript greet", job{args: []string{"skill", "run", testdata(t, "as_plugin.wasm"), "--entrypoint", "greet", "--input", `{"name":"Zoë"}`}}, "Hello, Zoë!", "", ""},
		{"AssemblyScript count_vowels", job{args: []string{"skill", "run", testdata(t, "as_plugin.wasm"), "--entrypoint", "count_vowels", "--input", "Hello, World"}}, `{"count": 3}`, "", ""},
		{"AssemblyScript fails", job{args: []string{"skill", "run", testdata(t, "as_plugin.wasm"), "--entrypoint", "greet", "--input", "{}"}}, "", errs.KindInvalidInput, "name is required"},
		{"skill.toml beside the module", job{args: []string{"skill", "run", beside}}, "", errs.KindInvalidInput, "bad thing"},
		{"--manifest overrides it", job{args: []string{"skill", "run", beside, "--manifest", other, "--input", "managed"}}, "managed", "", ""},
		{"--entrypoint overrides it", job{args: []string{"skill", "run", beside, "--entrypoint", "run", "--input", "entry"}}, "entry", "", ""},
		{"--manifest that does not exist", job{args: []string{"skill", "run", echo, "--manifest", filepath.Join(s.dir, "none.toml")}}, "", errs.KindNotFound, "none.toml"},
		{"no manifest: no capability", job{args: []string{"skill", "run", testdata(t, "undeclared.wasm")}}, "", errs.KindForbidden, "imports buddy:host/v1.http_get, but skill.toml declares no network capability"},
		{"no manifest: the default memory cap", job{args: []string{"skill", "run", testdata(t, "grow.wasm"), "--entrypoint", "count"}}, "256", "", ""},
		{"declared but not granted", job{args: []string{"skill", "run", undeclared, "--yes"}}, "", errs.KindForbidden, "http_get"},
		{"declared and granted, without --yes", job{args: []string{"skill", "run", undeclared, "--config", netCfg}}, "", errs.KindDenied, "User denied execution of net_probe"},
	}
	jobs := make([]job, len(cases))
	for i, c := range cases {
		jobs[i] = c.job
	}
	res := s.runAll(t, jobs)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := res[i]
			if c.kind == "" {
				if got := r.ok(t); got != c.out {
					t.Errorf("stdout = %q, want %q", got, c.out)
				}
				return
			}
			if d := r.fails(t, c.kind); !strings.Contains(d, c.want) {
				t.Errorf("detail %q does not contain %q", d, c.want)
			}
		})
	}
	t.Run("declared and granted", func(t *testing.T) {
		if got := s.run(t, "skill", "run", undeclared, "--config", netCfg, "--yes").ok(t); got != "1" {
			t.Errorf("stdout = %q, want the forbidden status digit 1", got)
		}
	})
	t.Run("--stats goes to stderr", func(t *testing.T) {
		r := s.run(t, "skill", "run", echo, "--input", "counted", "--stats")
		if r.code != 0 || r.stdout != "counted" || !strings.HasPrefix(r.stderr, "fuel: ") || !strings.Contains(r.stderr, "  time: ") {
			t.Errorf("want the output on stdout and the stats on stderr:\n%s", r)
		}
	})
}

// skillJSON is the part of `skill list --json` / `skill info --json` checked here.
type skillJSON struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Builtin     bool   `json:"builtin"`
	Permission  string `json:"permission"`
	Approval    string `json:"approval"`
	Status      string `json:"status"`
	Problem     string `json:"problem"`
	SHA256      string `json:"sha256"`
	WasmPath    string `json:"wasm_path"`
	Description string `json:"description"`
	Grants      struct {
		Read      []string `json:"read"`
		Write     []string `json:"write"`
		Domains   []string `json:"domains"`
		Env       []string `json:"env"`
		Namespace string   `json:"memory_namespace"`
	} `json:"grants"`
	Resources struct {
		Fuel     uint64 `json:"fuel"`
		MemoryMB int    `json:"memory_mb"`
		Timeout  string `json:"timeout"`
	} `json:"resources"`
	InputSchema map[string]any `json:"input_schema"`
	Type        string         `json:"type"` // a SKILL.md skill's; "" for WebAssembly
}

// decodeList returns the WebAssembly skills of a list (SKILL.md skills,
// which have a type, are checked by TestSkillMD).
func decodeList(tb testing.TB, r result) map[string]skillJSON {
	tb.Helper()
	var list []skillJSON
	if err := json.Unmarshal([]byte(r.ok(tb)), &list); err != nil {
		tb.Fatalf("not a JSON list: %v\n%s", err, r)
	}
	out := map[string]skillJSON{}
	for _, s := range list {
		if s.Type == "" {
			out[s.Name] = s
		}
	}
	return out
}

func names(m map[string]skillJSON) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestListAndInfo: `skill list` and `skill info`, text and --json, under the
// embedded defaults, a config enabling one built-in, and one enabling all.
func TestListAndInfo(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	dir := filepath.Join(s.dir, "docs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	only := write(t, filepath.Join(s.dir, "only.toml"), fmt.Sprintf("[skills.read_file]\nallowed_directories = [%s]\n", q(dir)))
	all := write(t, filepath.Join(s.dir, "all.toml"), fmt.Sprintf(`
[skills.read_file]
allowed_directories = [%s]

[skills.write_file]
allowed_directories = [%s]
approval = "trust"

[skills.fetch_url]
allowed_domains = ["example.com", "*.example.org"]
timeout = "7s"

[skills.memory]
`, q(dir), q(dir)))
	res := s.runAll(t, []job{
		{args: []string{"skill", "list"}},                                          // 0: defaults
		{args: []string{"skill", "list", "--json"}},                                // 1
		{args: []string{"skill", "list", "--json", "--config", only}},              // 2
		{args: []string{"skill", "list", "--json", "--config", all}},               // 3
		{args: []string{"skill", "list", "--config", all}},                         // 4
		{args: []string{"skill", "info", "read_file", "--config", all}},            // 5
		{args: []string{"skill", "info", "write_file", "--json", "--config", all}}, // 6
		{args: []string{"skill", "info", "fetch_url", "--config", only}},           // 7
		{args: []string{"skill", "info", "fetch_url", "--json", "--config", all}},  // 8
	})
	ws := filepath.Join(s.dataDir(), "workspace")

	t.Run("embedded defaults, text", func(t *testing.T) {
		r := res[0]
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		if want := "no buddy.toml found: using the embedded defaults (data in " + s.dataDir() + "); see buddy.example.toml\n"; r.stderr != want {
			t.Errorf("stderr = %q, want %q", r.stderr, want)
		}
		var lines, md []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if strings.Contains(l, " skill.md/") {
				md = append(md, strings.Fields(l)[0])
			} else {
				lines = append(lines, l)
			}
		}
		if !slices.Equal(md, []string{"buddy-memory", "careful-edits", "summarise-file"}) {
			t.Errorf("SKILL.md rows = %v, want the embedded defaults", md)
		}
		if len(lines) != 7 || !strings.HasPrefix(lines[0], "NAME") {
			t.Fatalf("want a header and 6 rows:\n%s", r.stdout)
		}
		want := map[string][]string{
			"read_file":    {"built-in", "read_only", "trust", "ready", "read " + ws},
			"write_file":   {"built-in", "mutating", "always", "ready", "write " + ws},
			"memory_read":  {"read_only", "trust", "memory"},
			"memory_write": {"mutating", "always", "memory"},
			"remember":     {"mutating", "always", "memory"},
			"recall":       {"read_only", "trust", "memory"},
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			w, ok := want[f[0]]
			if !ok {
				t.Errorf("unexpected row %q", l)
				continue
			}
			delete(want, f[0])
			for _, s := range w {
				if !strings.Contains(l, s) {
					t.Errorf("row %q lacks %q", l, s)
				}
			}
		}
		if len(want) > 0 {
			t.Errorf("rows missing: %v", want)
		}
		if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
			t.Errorf("the defaults did not create the workspace %s: %v", ws, err)
		}
	})
	t.Run("embedded defaults, JSON", func(t *testing.T) {
		m := decodeList(t, res[1])
		if got := names(m); !slices.Equal(got, []string{"memory_read", "memory_write", "read_file", "recall", "remember", "write_file"}) {
			t.Fatalf("skills = %v", got)
		}
		rf, wf := m["read_file"], m["write_file"]
		if !rf.Builtin || rf.Permission != "read_only" || rf.Approval != "trust" || !slices.Equal(rf.Grants.Read, []string{ws}) || len(rf.Grants.Write) != 0 {
			t.Errorf("read_file = %+v", rf)
		}
		if wf.Permission != "mutating" || wf.Approval != "always" || !slices.Equal(wf.Grants.Write, []string{ws}) || len(wf.Grants.Read) != 0 {
			t.Errorf("write_file = %+v", wf)
		}
		for _, n := range []string{"memory_read", "memory_write", "remember", "recall"} {
			if m[n].Grants.Namespace != "memory" || m[n].Status != "ready" || len(m[n].SHA256) != 64 {
				t.Errorf("%s = %+v", n, m[n])
			}
		}
	})
	t.Run("only [skills.read_file]", func(t *testing.T) {
		m := decodeList(t, res[2])
		if got := names(m); !slices.Equal(got, []string{"read_file"}) {
			t.Fatalf("skills = %v, want only read_file", got)
		}
		if g := m["read_file"].Grants; !slices.Equal(g.Read, []string{dir}) {
			t.Errorf("grants = %+v", g)
		}
	})
	t.Run("every built-in", func(t *testing.T) {
		m := decodeList(t, res[3])
		if got := names(m); !slices.Equal(got, []string{"fetch_url", "memory_read", "memory_write", "read_file", "recall", "remember", "write_file"}) {
			t.Fatalf("skills = %v", got)
		}
		perms := map[string]string{"read_file": "read_only", "memory_read": "read_only", "recall": "read_only",
			"write_file": "mutating", "memory_write": "mutating", "remember": "mutating", "fetch_url": "network"}
		for n, p := range perms {
			if m[n].Permission != p {
				t.Errorf("%s permission %s, want %s", n, m[n].Permission, p)
			}
		}
		if m["write_file"].Approval != "trust" || m["fetch_url"].Approval != "always" {
			t.Errorf("approvals: write_file %s, fetch_url %s", m["write_file"].Approval, m["fetch_url"].Approval)
		}
		if d := m["fetch_url"].Grants.Domains; !slices.Equal(d, []string{"*.example.org", "example.com"}) && !slices.Equal(d, []string{"example.com", "*.example.org"}) {
			t.Errorf("fetch_url domains = %v", d)
		}
		if m["fetch_url"].Resources.Timeout != "7s" {
			t.Errorf("fetch_url timeout = %q, want the section's 7s", m["fetch_url"].Resources.Timeout)
		}
		text := res[4]
		if text.code != 0 || text.stderr != "config: "+all+"\n" {
			t.Errorf("text list:\n%s", text)
		}
		for _, want := range []string{"fetch_url", "network", "GET ", "example.com", "*.example.org"} {
			if !strings.Contains(text.stdout, want) {
				t.Errorf("text list lacks %q:\n%s", want, text.stdout)
			}
		}
	})
	t.Run("info text", func(t *testing.T) {
		out := res[5].ok(t)
		for _, want := range []string{"read_file 1.0.0 (built-in)\n", "status:       ready\n", "permission:   read_only (approval: trust)\n",
			"entrypoint:   run\n", "  - may read files in directories you grant it\n", "granted:      read " + dir + "\n", "sha256:       ", "input schema:\n", `"path"`} {
			if !strings.Contains(out, want) {
				t.Errorf("info lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("info JSON", func(t *testing.T) {
		var wf skillJSON
		if err := json.Unmarshal([]byte(res[6].ok(t)), &wf); err != nil {
			t.Fatal(err)
		}
		req, _ := wf.InputSchema["required"].([]any)
		if wf.Name != "write_file" || wf.Approval != "trust" || !slices.Equal(wf.Grants.Write, []string{dir}) || fmt.Sprint(req) != "[path content]" {
			t.Errorf("info = %+v", wf)
		}
		var fu skillJSON
		if err := json.Unmarshal([]byte(res[8].ok(t)), &fu); err != nil {
			t.Fatal(err)
		}
		if fu.Permission != "network" || len(fu.Grants.Domains) != 2 {
			t.Errorf("info fetch_url = %+v", fu)
		}
	})
	t.Run("info of a built-in not enabled", func(t *testing.T) {
		if d := res[7].fails(t, errs.KindNotFound); !strings.Contains(d, "add a [skills.fetch_url] section") {
			t.Errorf("detail %q does not say how to enable it", d)
		}
	})
	t.Run("memory through the defaults", func(t *testing.T) {
		s.run(t, "skill", "run", "memory_write", "--yes", "--input", `{"key":"e2e.k","value":"v1"}`).ok(t)
		if out := s.run(t, "skill", "run", "memory_read", "--input", `{"key":"e2e.k"}`).ok(t); !strings.Contains(out, `"v1"`) {
			t.Errorf("memory_read = %q", out)
		}
	})
}

func sha(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestLifecycle installs the AssemblyScript plugin (runtime/testdata/
// as_plugin.wasm, written with the real @extism/as-pdk) and takes it
// through list, run, a refused reinstall, a refused and an accepted widening
// upgrade, tampering, and removal.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	plugin := testdata(t, "as_plugin.wasm")
	man := testdata(t, filepath.Join("assemblyscript", "skill.toml"))
	sum := sha(t, plugin)
	v1, err := os.ReadFile(man)
	if err != nil {
		t.Fatal(err)
	}
	v2 := write(t, filepath.Join(s.dir, "v2.toml"), strings.Replace(strings.Replace(string(v1),
		`version = "1.0.0"`, `version = "1.1.0"`, 1),
		`permission = "read_only"`, `permission = "network"`, 1)+"\n[capabilities]\nnetwork = [\"api.example.com\"]\n")
	list := func() map[string]skillJSON {
		t.Helper()
		return decodeList(t, s.run(t, "skill", "list", "--json"))
	}
	greet := `{"name":"Ada"}`

	// 1. Install: the capabilities in plain words and the sha256.
	r := s.run(t, "skill", "install", plugin, "--manifest", man)
	out := r.ok(t)
	for _, want := range []string{
		"installed as_greet 1.0.0 (sha256 " + sum[:16] + ")\n",
		"  - permission read_only: runs without asking\n",
		"  - touches nothing outside itself: no files, no network, no environment, no memory\n",
		"  - limits: 100000000 fuel, 16 MiB of memory, 2s per call\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("install output lacks %q:\n%s", want, out)
		}
	}
	installed := list()["as_greet"]
	if installed.Builtin || installed.Version != "1.0.0" || installed.Status != "ready" || installed.SHA256 != sum || installed.Permission != "read_only" {
		t.Fatalf("listed as %+v", installed)
	}
	if sha(t, installed.WasmPath) != sum || !strings.HasPrefix(installed.WasmPath, s.dataDir()+"/") {
		t.Fatalf("module copy %s is not the plugin inside the data directory", installed.WasmPath)
	}
	if text := s.run(t, "skill", "list").stdout; !regexpLine(text, "as_greet", "1.0.0", "installed", "read_only", "trust", "ready", "nothing") {
		t.Errorf("text list:\n%s", text)
	}

	// 2. Run by name, through the registry's runtime and schema.
	if got := s.run(t, "skill", "run", "as_greet", "--input", greet).ok(t); got != "Hello, Ada!" {
		t.Errorf("run = %q", got)
	}
	s.run(t, "skill", "run", "as_greet", "--input", `{"name":"Ada","x":1}`).fails(t, errs.KindInvalidInput)
	s.run(t, "skill", "run", "as_greet", "--input", "Ada").fails(t, errs.KindInvalidInput)

	// 3. Install again without --upgrade: refused, nothing changes.
	if d := s.run(t, "skill", "install", plugin, "--manifest", man).fails(t, errs.KindInvalidInput); !strings.Contains(d, "already installed; pass --upgrade") {
		t.Errorf("detail = %q", d)
	}
	if got := list()["as_greet"]; got.Version != "1.0.0" || got.SHA256 != sum {
		t.Fatalf("a refused reinstall changed it: %+v", got)
	}

	// 4. An upgrade that widens capabilities, with no terminal and no --yes:
	// denied, unchanged.
	refused := s.run(t, "skill", "install", plugin, "--manifest", v2, "--upgrade")
	if d := refused.fails(t, errs.KindDenied); !strings.Contains(d, "widens its capabilities") {
		t.Errorf("detail %q does not say the upgrade widens capabilities", d)
	}
	if !strings.Contains(refused.stderr, "api.example.com") {
		t.Errorf("the refusal does not say what the upgrade would add: %s", strings.TrimSpace(refused.stderr))
	}
	if got := list()["as_greet"]; got.Version != "1.0.0" || got.Permission != "read_only" {
		t.Fatalf("a refused upgrade changed it: %+v", got)
	}

	// 5. With --yes: upgraded; a network skill now asks before it runs.
	out = s.run(t, "skill", "install", plugin, "--manifest", v2, "--upgrade", "--yes").ok(t)
	if !strings.Contains(out, "upgraded 1.0.0 → as_greet 1.1.0 (sha256 "+sum[:16]+")") || !strings.Contains(out, "may send HTTP requests to api.example.com if you allow it") {
		t.Errorf("upgrade output:\n%s", out)
	}
	upgraded := list()["as_greet"]
	if upgraded.Version != "1.1.0" || upgraded.Permission != "network" || upgraded.Approval != "always" || len(upgraded.Grants.Domains) != 0 {
		t.Fatalf("upgraded to %+v", upgraded)
	}
	if d := s.run(t, "skill", "run", "as_greet", "--input", greet).fails(t, errs.KindDenied); !strings.HasPrefix(d, "User denied execution of as_greet") {
		t.Errorf("detail = %q", d)
	}
	if got := s.run(t, "skill", "run", "as_greet", "--yes", "--input", greet).ok(t); got != "Hello, Ada!" {
		t.Errorf("run --yes = %q", got)
	}

	// 6. Tamper with the installed module: list shows it, run refuses it.
	f, err := os.OpenFile(upgraded.WasmPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0x61, 0x73, 0x6d}) // appended bytes: still a plausible file
	f.Close()
	tampered := list()["as_greet"]
	if tampered.Status != "verification_failed" || !strings.Contains(tampered.Problem, "verification failed") {
		t.Errorf("after tampering: %+v", tampered)
	}
	if text := s.run(t, "skill", "list").stdout; !regexpLine(text, "as_greet", "verification_failed") {
		t.Errorf("text list does not show the failure:\n%s", text)
	}
	if d := s.run(t, "skill", "run", "as_greet", "--yes", "--input", greet).fails(t, errs.KindForbidden); !strings.Contains(d, "verification failed") {
		t.Errorf("detail = %q", d)
	}

	// 7. Remove: gone, module file included; built-ins cannot be removed.
	if out := s.run(t, "skill", "remove", "as_greet").ok(t); out != "removed as_greet 1.1.0 (its memory, if any, is kept)\n" {
		t.Errorf("remove = %q", out)
	}
	if _, ok := list()["as_greet"]; ok {
		t.Errorf("still listed after remove")
	}
	if _, err := os.Stat(upgraded.WasmPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("module file left behind: %v", err)
	}
	s.run(t, "skill", "run", "as_greet", "--input", greet).fails(t, errs.KindNotFound)
	s.run(t, "skill", "remove", "as_greet").fails(t, errs.KindNotFound)
	if d := s.run(t, "skill", "remove", "write_file").fails(t, errs.KindForbidden); !strings.Contains(d, "write_file is a built-in") {
		t.Errorf("detail = %q", d)
	}
}

// TestInstallRefusals: what install refuses, leaving nothing installed.
func TestInstallRefusals(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	shadow := write(t, filepath.Join(s.dir, "shadow.toml"), manifest("read_file", "1.0.0", "read_only", "", ""))
	memory := write(t, filepath.Join(s.dir, "memory.toml"), manifest("memory", "1.0.0", "read_only", "", ""))
	plain := write(t, filepath.Join(s.dir, "plain.toml"), manifest("probe", "1.0.0", "read_only", "", ""))
	noManifest := copyFile(t, testdata(t, "echo.wasm"), filepath.Join(s.dir, "lonely", "echo.wasm"))
	cases := []struct {
		name string
		args []string
		kind errs.Kind
		want string
	}{
		{"shadowing a built-in", []string{"skill", "install", testdata(t, "echo.wasm"), "--manifest", shadow}, errs.KindForbidden, "name of a built-in"},
		{"the memory section's name", []string{"skill", "install", testdata(t, "echo.wasm"), "--manifest", memory}, errs.KindForbidden, "reserved"},
		{"an undeclared import", []string{"skill", "install", testdata(t, "undeclared.wasm"), "--manifest", plain}, errs.KindForbidden, "buddy:host/v1.http_get"},
		{"Extism's http_request", []string{"skill", "install", testdata(t, "http_request.wasm"), "--manifest", plain}, errs.KindForbidden, "http_request"},
		{"not wasm", []string{"skill", "install", testdata(t, "notwasm.wasm"), "--manifest", plain}, errs.KindInvalidInput, "not a WebAssembly module"},
		{"no skill.toml", []string{"skill", "install", noManifest}, errs.KindConfig, "no skill.toml beside"},
		{"no such module", []string{"skill", "install", filepath.Join(s.dir, "none.wasm"), "--manifest", plain}, errs.KindNotFound, "does not exist"},
	}
	jobs := make([]job, len(cases))
	for i, c := range cases {
		jobs[i] = job{args: c.args}
	}
	res := s.runAll(t, jobs)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := res[i].fails(t, c.kind); !strings.Contains(d, c.want) {
				t.Errorf("detail %q does not contain %q", d, c.want)
			}
		})
	}
	if m := decodeList(t, s.run(t, "skill", "list", "--json")); len(m) != 6 {
		t.Errorf("refused installs left skills behind: %v", names(m))
	}
	if entries, _ := os.ReadDir(filepath.Join(s.dataDir(), "skills")); len(entries) != 0 {
		t.Errorf("refused installs left module copies: %v", entries)
	}
}

// regexpLine reports whether some line of text contains every field, in order.
func regexpLine(text string, fields ...string) bool {
	for _, l := range strings.Split(text, "\n") {
		rest, ok := l, true
		for _, f := range fields {
			i := strings.Index(rest, f)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(f):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestConfigDiscovery: --config, then $BUDDY_CONFIG, then
// $XDG_CONFIG_HOME/buddy/buddy.toml, else the embedded defaults. ./buddy.toml
// is read only when named, and a note says so.
func TestConfigDiscovery(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	dir := filepath.Join(s.dir, "docs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	grant := func(section string) string {
		if section == "memory" {
			return "[skills.memory]\n"
		}
		if section == "fetch_url" {
			return "[skills.fetch_url]\nallowed_domains = [\"example.com\"]\n"
		}
		return fmt.Sprintf("[skills.%s]\nallowed_directories = [%s]\n", section, q(dir))
	}
	write(t, s.userConfig(), grant("read_file"))
	cwd := filepath.Join(s.dir, "cwd")
	write(t, filepath.Join(cwd, "buddy.toml"), grant("write_file"))
	envCfg := write(t, filepath.Join(s.dir, "env.toml"), grant("fetch_url"))
	flagCfg := write(t, filepath.Join(s.dir, "flag.toml"), grant("memory"))
	empty := newSandbox(t)

	list := []string{"skill", "list", "--json"}
	res := s.runAll(t, []job{
		{args: list}, // XDG
		{args: list, dir: cwd},
		{args: list, dir: cwd, env: []string{"BUDDY_CONFIG=" + envCfg}},
		{args: append(slices.Clone(list), "--config", flagCfg), dir: cwd, env: []string{"BUDDY_CONFIG=" + envCfg}},
		{args: list, env: []string{"BUDDY_CONFIG=" + filepath.Join(s.dir, "missing.toml")}},
		{args: list, env: []string{"BUDDY_CONFIG=" + s.dir}},
		{args: append(slices.Clone(list), "--config", "buddy.toml"), dir: cwd},
	})
	want := [][]string{
		{"read_file"},
		{"read_file"}, // ./buddy.toml is not read unless named
		{"fetch_url"},
		{"memory_read", "memory_write", "recall", "remember"},
	}
	const note = "note: ./buddy.toml is not read unless named: pass --config buddy.toml (docs/CONFIG.md)\n"
	for i := range res[:4] {
		if got, want := strings.Contains(res[i].stderr, note), i > 0; got != want {
			t.Errorf("case %d: note on stderr = %v, want %v:\n%s", i, got, want, res[i].stderr)
		}
		res[i].stderr = strings.Replace(res[i].stderr, note, "", 1)
	}
	for i, w := range want {
		if got := names(decodeList(t, res[i])); !slices.Equal(got, w) {
			t.Errorf("case %d: skills %v, want %v", i, got, w)
		}
	}
	if d := res[4].fails(t, errs.KindConfig); !strings.Contains(d, "$BUDDY_CONFIG names") {
		t.Errorf("detail = %q", d)
	}
	if d := res[5].fails(t, errs.KindConfig); !strings.Contains(d, "a directory") {
		t.Errorf("detail = %q", d)
	}
	if got := names(decodeList(t, res[6])); !slices.Equal(got, []string{"write_file"}) {
		t.Errorf("--config buddy.toml: skills %v, want [write_file]", got)
	}
	if got := names(decodeList(t, empty.run(t, list...))); len(got) != 6 || slices.Contains(got, "fetch_url") {
		t.Errorf("no config anywhere: skills %v, want the embedded defaults", got)
	}
}

// TestAssemblyScriptDefaultBuild: as_plugin.wasm is AssemblyScript's default
// output, whose runtime initialisation is a start section: a plugin written
// with any Extism PDK runs unchanged.
func TestAssemblyScriptDefaultBuild(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	r := s.run(t, "skill", "run", testdata(t, "as_plugin.wasm"), "--entrypoint", "greet", "--input", "Ada")
	if got := r.ok(t); got != "Hello, Ada!" {
		t.Errorf("greet = %q", got)
	}
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = binary.AppendUvarint(out, uint64(len(body)))
	return append(out, body...)
}

// TestConcurrentFirstUse: several buddy processes starting at once on a data
// directory never used before (a user opening two terminals, a script
// running skills in parallel) must all work. (The store's migrate once read
// application_id, user_version and the schema in separate statements: a
// process that read version 0 before another committed the first migration
// and counted the schema after it took buddy's own fresh database for "a
// SQLite database of another application".)
func TestConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	const rounds, n = 6, 8
	for round := range rounds {
		s := newBareSandbox(t)
		jobs := make([]job, n)
		for i := range jobs {
			// Staggered, so that some start while the first one migrates.
			jobs[i] = job{args: []string{"skill", "list", "--json"}, delay: time.Duration(i) * 4 * time.Millisecond}
		}
		for _, r := range s.runAll(t, jobs) {
			if r.code != 0 {
				t.Fatalf("round %d:\n%s", round, r)
			}
		}
	}
}
