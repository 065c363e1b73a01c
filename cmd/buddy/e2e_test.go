//go:build unix

// End-to-end tests of the buddy command: TestMain builds the binary once, and
// every case runs it as a subprocess in a sandbox (HOME, XDG_DATA_HOME and
// XDG_CONFIG_HOME in a temporary directory, BUDDY_CONFIG unset, stdin not a
// terminal), checking the contract of main.go: output on stdout, and on
// failure "error: <kind>: <detail>" on stderr with errs.ExitCode(kind).
//
// This file holds the harness and the hostile tables of internal/testkit/hostile run
// through the read_file, write_file and fetch_url built-ins;
// e2e_cli_test.go holds the CLI contract, module files, list/info, the
// install lifecycle and configuration discovery.
package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/testkit/hostile"
)

// buddyBin is the binary TestMain builds.
var buddyBin string

// procs bounds the buddy processes running at once, across all tests.
var procs = make(chan struct{}, 2*goruntime.NumCPU()+2)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // buddyBin stays empty: every sandbox skips
	}
	dir, err := os.MkdirTemp("", "buddy-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buddyBin = filepath.Join(dir, "buddy")
	build := exec.Command("go", "build", "-o", buddyBin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testdata returns the path of a runtime fixture.
func testdata(tb testing.TB, name string) string {
	tb.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "runtime", "testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// sandbox is a private home for buddy: its data, configuration and working
// directories, and the environment buddy runs with.
type sandbox struct {
	dir                              string
	home, configHome, dataHome, work string
}

func newSandbox(tb testing.TB) *sandbox {
	tb.Helper()
	s := newBareSandbox(tb)
	// Create the database with one process before any fan-out: concurrent
	// first opens of a fresh database can fail (TestConcurrentFirstUse).
	if r := s.run(tb, "skill", "list", "--json"); r.code != 0 {
		tb.Fatalf("initialising the sandbox:\n%s", r)
	}
	return s
}

// newBareSandbox is a sandbox whose data directory buddy has never used.
func newBareSandbox(tb testing.TB) *sandbox {
	tb.Helper()
	if buddyBin == "" {
		tb.Skip("-short: the end-to-end tests build and run the buddy binary")
	}
	dir, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	s := &sandbox{
		dir:        dir,
		home:       filepath.Join(dir, "home"),
		configHome: filepath.Join(dir, "config"),
		dataHome:   filepath.Join(dir, "data"),
		work:       filepath.Join(dir, "work"),
	}
	for _, d := range []string{s.home, s.configHome, s.dataHome, s.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// dataDir is buddy's data directory in the sandbox when no config moves it.
func (s *sandbox) dataDir() string { return filepath.Join(s.dataHome, "buddy") }

// userConfig is $XDG_CONFIG_HOME/buddy/buddy.toml.
func (s *sandbox) userConfig() string { return filepath.Join(s.configHome, "buddy", "buddy.toml") }

// env is the whole environment of a buddy process: nothing is inherited but
// PATH (and TMPDIR, so temporary files land where the tests' do).
func (s *sandbox) env(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.home,
		"XDG_DATA_HOME=" + s.dataHome,
		"XDG_CONFIG_HOME=" + s.configHome,
	}
	if d := os.Getenv("TMPDIR"); d != "" {
		env = append(env, "TMPDIR="+d)
	}
	return append(env, extra...)
}

// write creates a file (and its directories) and returns its path.
func write(tb testing.TB, path, content string) string {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// copyFile copies src to dst (creating dst's directory) and returns dst.
func copyFile(tb testing.TB, src, dst string) string {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	return write(tb, dst, string(b))
}

// q renders s as a TOML basic string (the paths here are ASCII).
func q(s string) string { return strconv.Quote(s) }

// qs renders a TOML array of strings.
func qs(list ...string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = q(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// jsonInput renders a skill input.
func jsonInput(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// job is one buddy invocation.
type job struct {
	args  []string
	stdin string          // "" = no input (/dev/null, not a terminal)
	env   []string        // added to the sandbox's environment
	dir   string          // working directory; "" = the sandbox's work
	delay time.Duration   // wait this long before starting
	start func(*exec.Cmd) // called once the process started (signals)
}

// result is what one invocation did.
type result struct {
	args           []string
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	args := strings.Join(r.args, " ")
	if len(args) > 300 {
		args = args[:300] + "…"
	}
	return fmt.Sprintf("buddy %s\n  exit %d after %s\n  stdout: %q\n  stderr: %q", args, r.code, r.elapsed.Round(time.Millisecond), clip(r.stdout), clip(r.stderr))
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// run runs buddy in the sandbox.
func (s *sandbox) run(tb testing.TB, args ...string) result {
	tb.Helper()
	return s.do(tb, job{args: args})
}

// do runs one job.
func (s *sandbox) do(tb testing.TB, j job) result {
	tb.Helper()
	r, err := s.exec(j)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// exec runs one job; it is safe to call from any goroutine.
func (s *sandbox) exec(j job) (result, error) {
	time.Sleep(j.delay)
	procs <- struct{}{}
	defer func() { <-procs }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, buddyBin, j.args...)
	cmd.Env = s.env(j.env...)
	cmd.Dir = s.work
	if j.dir != "" {
		cmd.Dir = j.dir
	}
	if j.stdin != "" {
		cmd.Stdin = strings.NewReader(j.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		if j.start != nil {
			j.start(cmd)
		}
		err = cmd.Wait()
	}
	r := result{args: j.args, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		r.code = exit.ExitCode()
	default:
		return r, fmt.Errorf("running buddy %s: %v (stderr %q)", strings.Join(j.args, " "), err, stderr.String())
	}
	return r, nil
}

// runAll runs the jobs concurrently (bounded by procs) and returns their
// results in order.
func (s *sandbox) runAll(tb testing.TB, jobs []job) []result {
	tb.Helper()
	out := make([]result, len(jobs))
	errc := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { out[i], errc[i] = s.exec(j) })
	}
	wg.Wait()
	if err := errors.Join(errc...); err != nil {
		tb.Fatal(err)
	}
	return out
}

// ok checks a successful invocation: exit 0, nothing on stderr. It returns
// stdout.
func (r result) ok(tb testing.TB) string {
	tb.Helper()
	if r.code != 0 || r.stderr != "" {
		tb.Fatalf("want success with an empty stderr:\n%s", r)
	}
	// A JSON object or array on stdout ends its line (TestNewUserPaths
	// checks that newline); the callers compare the value.
	if o := strings.TrimSuffix(r.stdout, "\n"); strings.HasPrefix(o, "{") || strings.HasPrefix(o, "[") {
		return o
	}
	return r.stdout
}

// fails checks the error contract: the kind's exit code, one line on stderr
// "error: <kind>: <detail>", nothing on stdout. It returns the detail.
func (r result) fails(tb testing.TB, kind errs.Kind) string {
	tb.Helper()
	prefix := "error: " + string(kind) + ": "
	if want := errs.ExitCode(kind); r.code != want {
		tb.Fatalf("exit %d, want %d (%s):\n%s", r.code, want, kind, r)
	}
	if !strings.HasPrefix(r.stderr, prefix) {
		tb.Fatalf("stderr does not start with %q:\n%s", prefix, r)
	}
	if !strings.HasSuffix(r.stderr, "\n") || strings.Count(r.stderr, "\n") != 1 {
		tb.Fatalf("stderr is not one line:\n%s", r)
	}
	if r.stdout != "" {
		tb.Fatalf("a failure wrote to stdout:\n%s", r)
	}
	return strings.TrimSuffix(strings.TrimPrefix(r.stderr, prefix), "\n")
}

// noSecret fails if an invocation printed a secret of the hostile tree.
func (r result) noSecret(tb testing.TB) {
	tb.Helper()
	for _, s := range hostile.Secrets {
		if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
			tb.Fatalf("printed a secret from outside the root:\n%s", r)
		}
	}
}

// pathConfig grants read_file and write_file the hostile tree's root with
// the cap the rows assume.
func pathConfig(root, extra string) string {
	return fmt.Sprintf(`# e2e: the hostile tree
[skills.read_file]
allowed_directories = [%s]
max_bytes = %d

[skills.write_file]
allowed_directories = [%s]
max_bytes = %d
%s`, q(root), hostile.MaxBytes, q(root), hostile.MaxBytes, extra)
}

// TestHostilePaths runs every row of hostile.PathRows through `buddy skill
// run read_file` and `buddy skill run write_file --yes`, with a buddy.toml
// (found in $XDG_CONFIG_HOME) granting the tree's root: each is refused with
// the row's kind, no secret is printed, and nothing in the tree changes.
func TestHostilePaths(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	root := hostile.BuildTree(t, filepath.Join(s.dir, "tree"))
	base := filepath.Dir(root)
	write(t, s.userConfig(), pathConfig(root, ""))
	before := hostile.Snapshot(t, base)

	// Warm the compilation cache once before the fan-out.
	warm := s.runAll(t, []job{
		{args: []string{"skill", "run", "read_file", "--input", `{"path":"hello.txt"}`}},
		{args: []string{"skill", "run", "write_file", "--yes", "--input", `{"path":"../warm","content":"x"}`}},
	})
	if got := warm[0].ok(t); got != jsonInput(t, map[string]string{"content": hostile.HelloContent}) {
		t.Fatalf("read_file hello.txt = %q", got)
	}
	warm[1].fails(t, errs.KindForbidden)

	var jobs []job
	var rows []hostile.PathRow
	for _, r := range hostile.PathRows {
		if r.Device && !hostile.HasDevice(root) {
			continue
		}
		p := r.In(root)
		rows = append(rows, r)
		jobs = append(jobs,
			job{args: []string{"skill", "run", "read_file", "--input", jsonInput(t, map[string]string{"path": p})}},
			job{args: []string{"skill", "run", "write_file", "--yes", "--input", jsonInput(t, map[string]string{"path": p, "content": r.Content()})}})
	}
	start := time.Now()
	res := s.runAll(t, jobs)
	t.Logf("%d path rows, %d invocations in %s", len(rows), len(jobs), time.Since(start).Round(time.Millisecond))

	for i, r := range rows {
		t.Run(r.Name, func(t *testing.T) {
			p := r.In(root)
			for j, op := range []struct {
				name string
				kind errs.Kind
			}{{"read", r.SkillReadKind()}, {"write", r.SkillWriteKind()}} {
				t.Run(op.name, func(t *testing.T) {
					got := res[2*i+j]
					got.noSecret(t)
					detail := got.fails(t, op.kind)
					if !filepath.IsAbs(p) && strings.Contains(detail, base) {
						t.Errorf("the error shows the host directory: %q", detail)
					}
					// The gate's refusals name the path; the built-ins' own
					// checks (an empty path) and the host functions' argument
					// caps (too_large) do not see it.
					// A path over 256 bytes is named by its head.
					quoted := strconv.Quote(p)
					if len(p) > 256 {
						quoted = strings.TrimSuffix(strconv.Quote(p[:256]), `"`)
					}
					if p != "" && op.kind != errs.KindTooLarge && !strings.Contains(detail, quoted) {
						t.Errorf("the error does not name the path %s: %q", quoted, detail)
					}
				})
			}
		})
	}
	if d := hostile.Diff(before, hostile.Snapshot(t, base), nil); len(d) > 0 {
		t.Fatalf("refused reads and writes changed the tree: %q", d)
	}
}

// TestFilesAllowed: what the gate must let through, and the approval
// contract of a mutating skill in a shell with no terminal.
func TestFilesAllowed(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	root := hostile.BuildTree(t, filepath.Join(s.dir, "tree"))
	base := filepath.Dir(root)
	cfg := write(t, filepath.Join(s.dir, "files.toml"), pathConfig(root, ""))
	trust := write(t, filepath.Join(s.dir, "trust.toml"), pathConfig(root, "approval = \"trust\"\n"))
	outsideBefore := hostile.SnapshotExcept(t, base, hostile.InRoot(root))

	read := func(p string) job {
		return job{args: []string{"skill", "run", "read_file", "--config", cfg, "--input", jsonInput(t, map[string]string{"path": p})}}
	}
	writeJob := func(conf, p, content string, yes bool) job {
		args := []string{"skill", "run", "write_file", "--config", conf, "--input", jsonInput(t, map[string]string{"path": p, "content": content})}
		if yes {
			args = append(args, "--yes")
		}
		return job{args: args}
	}
	s.run(t, read("hello.txt").args...).ok(t) // warm the cache

	res := s.runAll(t, []job{
		read("hello.txt"),                                                           // 0
		read(root + "/hello.txt"),                                                   // 1
		read("sub/inner.txt"),                                                       // 2
		read("inside_link"),                                                         // 3: a relative symlink that stays inside
		read("exact.bin"),                                                           // 4: exactly max_bytes
		writeJob(cfg, "new/dir/f.txt", "hi there", true),                            // 5
		writeJob(cfg, root+"/abs.txt", "absolute", true),                            // 6
		writeJob(cfg, "keep/f.txt", "replaced", true),                               // 7
		writeJob(cfg, "denied.txt", "never", false),                                 // 8
		writeJob(trust, "trusted.txt", "trusted", false),                            // 9
		writeJob(cfg, "exact-new.bin", strings.Repeat("x", hostile.MaxBytes), true), // 10
	})
	want := func(t *testing.T, i int, v any) {
		t.Helper()
		if got, w := res[i].ok(t), jsonInput(t, v); got != w {
			t.Errorf("stdout = %q, want %q\n%s", got, w, res[i])
		}
	}
	t.Run("read inside", func(t *testing.T) {
		want(t, 0, map[string]string{"content": hostile.HelloContent})
		want(t, 1, map[string]string{"content": hostile.HelloContent})
		want(t, 2, map[string]string{"content": "inner"})
		want(t, 3, map[string]string{"content": hostile.HelloContent})
		want(t, 4, map[string]string{"content": strings.Repeat("e", hostile.MaxBytes)})
	})
	t.Run("write inside", func(t *testing.T) {
		for i, f := range []struct {
			res        int
			path, body string
		}{{5, "new/dir/f.txt", "hi there"}, {6, "abs.txt", "absolute"}, {7, "keep/f.txt", "replaced"},
			{9, "trusted.txt", "trusted"}, {10, "exact-new.bin", strings.Repeat("x", hostile.MaxBytes)}} {
			want(t, f.res, map[string]int{"bytes_written": len(f.body)})
			got, err := os.ReadFile(filepath.Join(root, f.path))
			if err != nil || string(got) != f.body {
				t.Errorf("file %d %s = %q, %v; want %q", i, f.path, got, err, f.body)
			}
		}
	})
	t.Run("write without --yes and no terminal is denied", func(t *testing.T) {
		detail := res[8].fails(t, errs.KindDenied)
		if !strings.HasPrefix(detail, "User denied execution of write_file") {
			t.Errorf("detail %q does not start with the LLM-facing message", detail)
		}
		if _, err := os.Lstat(filepath.Join(root, "denied.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a denied write created the file: %v", err)
		}
	})
	if d := hostile.Diff(outsideBefore, hostile.SnapshotExcept(t, base, hostile.InRoot(root)), nil); len(d) > 0 {
		t.Fatalf("allowed calls changed something outside the root: %q", d)
	}
}

// server is an httptest server that counts requests by path.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	all  atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	s := &server{hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		s.all.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) hostPort() string {
	u, _ := url.Parse(s.URL)
	return u.Host
}

// fetchOut is fetch_url's output.
type fetchOut struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Body        string `json:"body"`
}

// TestHostileURLs runs every row of hostile.URLRows through `buddy skill run
// fetch_url --yes` under hostile.URLPolicy plus a local test server, then the
// fetches that must work and the redirects that must not.
func TestHostileURLs(t *testing.T) {
	t.Parallel()
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "target reached") })
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hello":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "hello from e2e")
		case "/to-target":
			http.Redirect(w, r, "http://"+target.hostPort()+"/secret", http.StatusFound)
		case "/to-localhost":
			_, port, _ := strings.Cut(target.hostPort(), ":")
			http.Redirect(w, r, "http://localhost:"+port+"/secret", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-hello":
			http.Redirect(w, r, "/hello", http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	})
	s := newSandbox(t)
	domains := append(append([]string{}, hostile.URLPolicy...), srv.hostPort())
	cfg := write(t, filepath.Join(s.dir, "net.toml"), fmt.Sprintf("[skills.fetch_url]\nallowed_domains = %s\n", qs(domains...)))
	fetch := func(u string, yes bool) job {
		args := []string{"skill", "run", "fetch_url", "--config", cfg, "--input", jsonInput(t, map[string]string{"url": u})}
		if yes {
			args = append(args, "--yes")
		}
		return job{args: args}
	}
	// Warm the compilation cache.
	s.run(t, fetch(srv.URL+"/hello", true).args...).ok(t)
	srv.mu.Lock()
	clear(srv.hits)
	srv.mu.Unlock()
	srv.all.Store(0)

	jobs := make([]job, len(hostile.URLRows))
	for i, r := range hostile.URLRows {
		jobs[i] = fetch(r.URL, true)
	}
	start := time.Now()
	res := s.runAll(t, jobs)
	t.Logf("%d URL rows in %s", len(jobs), time.Since(start).Round(time.Millisecond))
	for i, r := range hostile.URLRows {
		name := r.URL
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			res[i].fails(t, r.SkillKind())
		})
	}
	if n := srv.all.Load() + target.all.Load(); n != 0 {
		t.Fatalf("hostile rows reached the test servers %d times", n)
	}

	res = s.runAll(t, []job{
		fetch(srv.URL+"/hello", true),                // 0
		fetch(srv.URL+"/missing", true),              // 1
		fetch(srv.URL+"/to-hello", true),             // 2
		fetch(srv.URL+"/to-target", true),            // 3
		fetch(srv.URL+"/to-localhost", true),         // 4
		fetch(srv.URL+"/to-metadata", true),          // 5
		fetch(srv.URL+"/hello", false),               // 6
		fetch("http://"+target.hostPort()+"/", true), // 7: the target itself is not listed
	})
	decode := func(t *testing.T, r result) fetchOut {
		t.Helper()
		var out fetchOut
		if err := json.Unmarshal([]byte(r.ok(t)), &out); err != nil {
			t.Fatalf("output is not fetch_url's JSON: %v\n%s", err, r)
		}
		return out
	}
	t.Run("allowed fetch", func(t *testing.T) {
		if got := decode(t, res[0]); got.Status != 200 || got.Body != "hello from e2e" || got.ContentType != "text/plain; charset=utf-8" {
			t.Errorf("fetch = %+v", got)
		}
		if got := decode(t, res[1]); got.Status != 404 || got.Body != "404 page not found\n" {
			t.Errorf("a 404 is a response: %+v", got)
		}
		if got := decode(t, res[2]); got.Status != 200 || got.Body != "hello from e2e" {
			t.Errorf("a redirect on the allowed server is followed: %+v", got)
		}
	})
	t.Run("redirects off the allowlist are refused", func(t *testing.T) {
		for _, i := range []int{3, 4, 5} {
			if detail := res[i].fails(t, errs.KindForbidden); !strings.Contains(detail, "redirect") {
				t.Errorf("detail %q does not say it was a redirect", detail)
			}
		}
		res[7].fails(t, errs.KindForbidden)
		if n := target.all.Load(); n != 0 {
			t.Errorf("the redirect target got %d requests", n)
		}
	})
	t.Run("network skill without --yes and no terminal is denied", func(t *testing.T) {
		detail := res[6].fails(t, errs.KindDenied)
		if !strings.HasPrefix(detail, "User denied execution of fetch_url") {
			t.Errorf("detail = %q", detail)
		}
	})
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.hits["/hello"] != 2 { // the allowed fetch and the followed redirect; not the denied one
		t.Errorf("/hello requested %d times, want 2 (the denied call must send nothing)", srv.hits["/hello"])
	}
}
