//go:build unix

package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/runtime"
)

// TestOperatorFiles: every file the CLI reads because the operator named it
// (--input @FILE, --input -, --config, --manifest, a module file, the
// manifest of an install) is a regular file under its cap: a FIFO, a device
// or a directory is refused at once, never read, and JSON input must be
// UTF-8.
func TestOperatorFiles(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	files := filepath.Join(s.dir, "files")
	write(t, filepath.Join(files, "ok.txt"), "fine")
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), fmt.Sprintf("[skills.read_file]\nallowed_directories = [%s]\n", q(files)))
	fifo := filepath.Join(s.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	fifoWasm := filepath.Join(s.dir, "fifo.wasm")
	if err := os.Symlink(fifo, fifoWasm); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(s.dir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, runtime.DefaultMaxInputBytes+1); err != nil { // sparse
		t.Fatal(err)
	}
	latin1 := write(t, filepath.Join(s.dir, "latin1.json"), "{\"path\":\"caf\xe9.txt\"}")
	sharedCfg := write(t, filepath.Join(s.dir, "shared.toml"), "")
	if err := os.Chmod(sharedCfg, 0o666); err != nil {
		t.Fatal(err)
	}
	echoDir := filepath.Join(s.dir, "echo")
	echo := fixtureDir(t, echoDir, "echo.wasm", manifest("echo_x", "1.0.0", "read_only", `entrypoint = "run"`, ""))
	manLatin1 := write(t, filepath.Join(s.dir, "latin1.toml"), strings.Replace(manifest("echo_x", "1.0.0", "read_only", `entrypoint = "run"`, ""), "e2e", "\xe92e", 1))

	run := func(args ...string) job { return job{args: append([]string{"skill", "run"}, args...)} }
	read := func(in string) job { return run("read_file", "--config", cfg, "--input", in) }
	stdin := read("-")
	stdin.stdin = strings.Repeat(" ", runtime.DefaultMaxInputBytes+1)
	cases := []struct {
		name string
		job  job
		kind errs.Kind // "" = succeeds
		want string
	}{
		{"@file", read("@" + write(t, filepath.Join(s.dir, "in.json"), `{"path":"ok.txt"}`)), "", "fine"},
		{"@FIFO", read("@" + fifo), errs.KindInvalidInput, "reading input file " + fifo + ": " + fifo + " is a named pipe (FIFO), not a regular file"},
		{"@/dev/zero", read("@/dev/zero"), errs.KindInvalidInput, "/dev/zero is a character device"},
		{"@directory", read("@" + s.dir), errs.KindInvalidInput, "is a directory"},
		{"@file over the cap", read("@" + big), errs.KindTooLarge, big + " is 33554433 bytes, over the cap of 32 MiB"},
		{"stdin over the cap", stdin, errs.KindTooLarge, "reading input from stdin: the data is over the cap of 32 MiB"},
		{"@file not UTF-8", read("@" + latin1), errs.KindInvalidInput, "input is not valid UTF-8 (invalid byte at offset 12)"},
		{"inline not UTF-8", read("{\"path\":\"\xff\"}"), errs.KindInvalidInput, "input is not valid UTF-8 (invalid byte at offset 9)"},
		{"--config FIFO", job{args: []string{"skill", "list", "--config", fifo}}, errs.KindInvalidInput, "is a named pipe (FIFO)"},
		{"--config /dev/zero", job{args: []string{"skill", "list", "--config", "/dev/zero"}}, errs.KindInvalidInput, "character device"},
		{"--config writable by others", job{args: []string{"skill", "list", "--config", sharedCfg}}, errs.KindConfig,
			"config file: " + sharedCfg + " is writable by group and others (mode 0666): a file others can change must not decide what skills may do; fix: chmod 600 " + sharedCfg},
		{"module file is a FIFO", run(fifoWasm), errs.KindInvalidInput, "is a named pipe (FIFO)"},
		{"--manifest FIFO", run(echo, "--manifest", fifo), errs.KindInvalidInput, "is a named pipe (FIFO)"},
		{"--manifest /dev/zero", run(echo, "--manifest", "/dev/zero"), errs.KindInvalidInput, "character device"},
		{"--manifest not UTF-8", run(echo, "--manifest", manLatin1), errs.KindInvalidInput, "is not valid UTF-8"},
		{"install --manifest FIFO", job{args: []string{"skill", "install", echo, "--manifest", fifo}}, errs.KindInvalidInput, "is a named pipe (FIFO)"},
		{"install --manifest /dev/zero", job{args: []string{"skill", "install", echo, "--manifest", "/dev/zero"}}, errs.KindInvalidInput, "character device"},
		{"install of /dev/zero", job{args: []string{"skill", "install", "/dev/zero", "--manifest", filepath.Join(echoDir, "skill.toml")}}, errs.KindInvalidInput, "character device"},
	}
	jobs := make([]job, len(cases))
	for i, c := range cases {
		jobs[i] = c.job
	}
	res := s.runAll(t, jobs)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := res[i]
			if r.elapsed > 20*time.Second {
				t.Errorf("took %s: a read blocked", r.elapsed)
			}
			if c.kind == "" {
				if got := r.ok(t); !strings.Contains(got, c.want) {
					t.Errorf("stdout %q, want %q", got, c.want)
				}
				return
			}
			if d := r.fails(t, c.kind); !strings.Contains(d, c.want) {
				t.Errorf("detail %q\nwant it to contain %q", d, c.want)
			}
		})
	}
}

// TestDataDirectoryHygiene: buddy creates its data directory 0700 and refuses
// one that others may write, saying how to fix it; after the fix it runs.
func TestDataDirectoryHygiene(t *testing.T) {
	t.Parallel()
	s := newBareSandbox(t)
	list := []string{"skill", "list", "--json"}
	s.run(t, list...).ok(t)
	fi, err := os.Stat(s.dataDir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data directory: %v, %v; want 0700", fi.Mode(), err)
	}
	for _, c := range []struct {
		dir  string
		mode os.FileMode
		want string
	}{
		{s.dataDir(), 0o777, "is writable by group and others (mode 0777)"},
		{s.dataDir(), 0o770, "is writable by group (mode 0770)"},
		{filepath.Join(s.dataDir(), "cache"), 0o777 | os.ModeSticky, "is writable by group and others (mode 1777)"},
		{filepath.Join(s.dataDir(), "cache", "wazero"), 0o757, "is writable by others (mode 0757)"},
	} {
		if err := os.Chmod(c.dir, c.mode); err != nil {
			t.Fatal(err)
		}
		d := s.run(t, list...).fails(t, errs.KindConfig)
		if !strings.Contains(d, c.dir+" "+c.want) || !strings.HasSuffix(d, "fix: chmod 700 "+c.dir) {
			t.Errorf("%s %v: detail %q", c.dir, c.mode, d)
		}
		if err := os.Chmod(c.dir, 0o700); err != nil { // the fix
			t.Fatal(err)
		}
		s.run(t, list...).ok(t)
	}
}
