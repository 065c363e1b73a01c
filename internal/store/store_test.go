package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/ext/fts5"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// openTest opens a fresh store in a temporary directory and closes it with the test.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "data", "buddy.db"), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// rawExec runs SQL on the database file with a plain SQLite connection, outside
// the store, the way a user with the sqlite3 shell would (FTS5 included, as in
// the shell).
func rawExec(t *testing.T, path, query string) {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := fts5.Register(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestOpenCreatesSchema(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing", "parent")
	path := filepath.Join(dir, "buddy.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close(context.Background())

	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	v, err := s.SchemaVersion(t.Context())
	if err != nil || v != LatestSchemaVersion() || v < 1 {
		t.Errorf("SchemaVersion() = %d, %v; want %d", v, err, LatestSchemaVersion())
	}
	for _, name := range []string{"installed_skills", "kv", "memories", "memories_fts", "namespace_usage"} {
		var n int
		if err := s.reader.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema WHERE name = ?`, name).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: count %d, %v", name, n, err)
		}
	}
	var cols []string
	rows, err := s.reader.QueryContext(t.Context(), `SELECT name FROM pragma_table_info('installed_skills') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols = append(cols, c)
	}
	rows.Close()
	want := "name version description author wasm_path sha256 manifest capabilities verification_status installed_at updated_at"
	if got := strings.Join(cols, " "); got != want {
		t.Errorf("installed_skills columns = %q, want %q", got, want)
	}

	var mode string
	var fk, sync int
	s.writer.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode)
	s.writer.QueryRowContext(t.Context(), `PRAGMA foreign_keys`).Scan(&fk)
	s.writer.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&sync)
	if mode != "wal" || fk != 1 || sync != 2 {
		t.Errorf("journal_mode=%s foreign_keys=%d synchronous=%d, want wal 1 2 (FULL)", mode, fk, sync)
	}

	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Mode().Perm() != 0o600 {
		t.Errorf("WAL mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestMigrationsUpgrade builds a database at every older version by applying a
// prefix of the migrations by hand, and checks that Open brings it to the latest.
func TestMigrationsUpgrade(t *testing.T) {
	if len(migrations) == 0 {
		t.Fatal("no migrations")
	}
	for from := range LatestSchemaVersion() {
		t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "buddy.db")
			var script strings.Builder
			for _, m := range migrations[:from] {
				script.WriteString(m.sql)
			}
			if from > 0 {
				fmt.Fprintf(&script, "PRAGMA user_version = %d; PRAGMA application_id = %d;", from, applicationID)
				rawExec(t, path, script.String())
			}
			s, err := Open(t.Context(), path, Options{})
			if err != nil {
				t.Fatalf("Open at version %d: %v", from, err)
			}
			defer s.Close(context.Background())
			if v, err := s.SchemaVersion(t.Context()); err != nil || v != LatestSchemaVersion() {
				t.Errorf("version after Open = %d, %v; want %d", v, err, LatestSchemaVersion())
			}
			if err := s.InsertSkill(t.Context(), testSkill("after-upgrade")); err != nil {
				t.Errorf("using the upgraded database: %v", err)
			}
		})
	}
}

func TestMigrationIsAtomic(t *testing.T) {
	// A migration that fails half-way leaves the database at its old version
	// with none of the migration's objects.
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = append(append([]migration{}, saved...), migration{
		name: "broken",
		sql:  `CREATE TABLE half_done (x INTEGER); SELECT no_such_function();`,
	})
	path := filepath.Join(t.TempDir(), "buddy.db")
	_, err := Open(t.Context(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("Open with a broken migration: %v, want an error naming it", err)
	}
	if v := rawInt(t, path, `PRAGMA user_version`); v != 0 {
		t.Errorf("user_version after the failed migration = %d, want 0", v)
	}
	if n := rawInt(t, path, `SELECT count(*) FROM sqlite_schema`); n != 0 {
		t.Errorf("%d schema objects after the failed migration, want 0", n)
	}
	migrations = saved
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open after fixing the migration: %v", err)
	}
	s.Close(context.Background())
}

// rawInt runs a query returning one integer with a plain SQLite connection.
func rawInt(t *testing.T, path, query string) int64 {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.Prepare(query)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Step() {
		t.Fatalf("%s: no row: %v", query, st.Err())
	}
	return st.ColumnInt64(0)
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "buddy.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sk := testSkill("echo")
	if err := s.InsertSkill(ctx, sk); err != nil {
		t.Fatal(err)
	}
	if err := s.KVSet(ctx, "echo", "k", []byte{0, 1, 2, 255}); err != nil {
		t.Fatal(err)
	}
	id, err := s.Remember(ctx, "echo", "the cat sleeps on the red sofa", []string{"pets"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close(context.Background())
	got, err := s.GetSkill(ctx, "echo")
	if err != nil || !skillsEqual(got, sk) {
		t.Errorf("GetSkill after reopen = %+v, %v; want %+v", got, err, sk)
	}
	v, err := s.KVGet(ctx, "echo", "k")
	if err != nil || !bytes.Equal(v, []byte{0, 1, 2, 255}) {
		t.Errorf("KVGet after reopen = %v, %v", v, err)
	}
	mems, err := s.Recall(ctx, "echo", "sofa", 0)
	if err != nil || len(mems) != 1 || mems[0].ID != id || mems[0].Tags[0] != "pets" {
		t.Errorf("Recall after reopen = %+v, %v", mems, err)
	}
	// Usage counters survive too: the quota still sees the old key.
	s2 := &Store{writer: s.writer, reader: s.reader, now: time.Now, opts: Options{MaxKeys: 1}.withDefaults()}
	if err := s2.KVSet(ctx, "echo", "k2", nil); !errors.Is(err, errs.ErrTooLarge) {
		t.Errorf("second key with MaxKeys 1 after reopen: %v, want ErrTooLarge", err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "buddy.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	newer := LatestSchemaVersion() + 41
	rawExec(t, path, fmt.Sprintf("PRAGMA user_version = %d", newer))
	before := fileHash(t, path)

	_, err = Open(t.Context(), path, Options{})
	if !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("Open of a newer schema: %v, want ErrConfig", err)
	}
	for _, want := range []string{fmt.Sprint(newer), fmt.Sprintf("the %d this buddy knows", LatestSchemaVersion()), path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if fileHash(t, path) != before {
		t.Error("the database file changed")
	}
}

func TestOpenRefusesBadFiles(t *testing.T) {
	// A real database with a few pages, to truncate.
	good := filepath.Join(t.TempDir(), "good.db")
	s, err := Open(t.Context(), good, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.KVSet(t.Context(), "ns", fmt.Sprint(i), bytes.Repeat([]byte{byte(i)}, 4000)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close(context.Background())
	if exists(good + "-wal") {
		t.Fatal("WAL left after a clean close")
	}
	goodBytes, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 8192)
	rand.NewChaCha8([32]byte{1, 2}).Read(random)
	foreign := filepath.Join(t.TempDir(), "foreign.db")
	rawExec(t, foreign, `CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)`)
	foreignBytes, _ := os.ReadFile(foreign)
	otherApp := filepath.Join(t.TempDir(), "other.db")
	rawExec(t, otherApp, `PRAGMA application_id = 1234`)
	otherBytes, _ := os.ReadFile(otherApp)

	tests := []struct {
		name    string
		content []byte
		want    string // in the error message
	}{
		{"random bytes", random, "not SQLite"},
		{"text file", []byte("[llm]\nprovider = \"anthropic\"\n"), "not SQLite"},
		{"short text", []byte("hi"), "not SQLite"},
		{"truncated mid-page", goodBytes[:len(goodBytes)/2+100], "truncated"},
		{"truncated to whole pages", goodBytes[:4096*3], "truncated"},
		{"header only", goodBytes[:100], "truncated"},
		{"bad page size", append(append(append([]byte{}, goodBytes[:16]...), 0, 3), goodBytes[18:]...), "page size"},
		{"another application's tables", foreignBytes, "another application"},
		{"another application's id", otherBytes, "another application"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "buddy.db")
			if err := os.WriteFile(path, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(t.Context(), path, Options{})
			if err == nil {
				s.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, errs.ErrConfig) {
				t.Errorf("error kind %s, want config: %v", errs.KindOf(err), err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q should name %s and say %q", err, path, tt.want)
			}
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, tt.content) {
				t.Error("the file was modified")
			}
		})
	}
}

func TestOpenBadPaths(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(readOnly, 0o700) })
	dirAsDB := t.TempDir()

	tests := []struct {
		name     string
		path     string
		needUser bool // root ignores permissions
		want     string
	}{
		{"parent is a file", filepath.Join(notDir, "buddy.db"), false, "the database directory: creating directory"},
		{"parent of parent is a file", filepath.Join(notDir, "sub", "buddy.db"), false, "the database directory: creating directory"},
		{"read-only parent", filepath.Join(readOnly, "buddy.db"), true, "creating database file"},
		{"path is a directory", dirAsDB, false, "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needUser && os.Geteuid() == 0 {
				t.Skip("running as root: permissions are not enforced")
			}
			s, err := Open(t.Context(), tt.path, Options{})
			if err == nil {
				s.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, errs.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q (kind %s), want config saying %q", err, errs.KindOf(err), tt.want)
			}
		})
	}
}

func TestIntegrityCheck(t *testing.T) {
	s := openTest(t, Options{})
	if err := s.IntegrityCheck(t.Context()); err != nil {
		t.Errorf("fresh database: %v", err)
	}
}

// Crash durability: a child process (this test binary, re-executed) commits rows
// one by one, printing "ack i" after each commit returns, then starts a large
// transaction, says "in tx" once it has spilled pages into the WAL, and is
// SIGKILLed. Every acked row must survive; nothing of the killed transaction may.
const crashEnv = "BUDDY_STORE_CRASH_CHILD"

const (
	crashAcks     = 100
	crashNS       = "acked"
	crashTxNS     = "killed"
	crashSpillMiB = 12 // uncommitted data written before "in tx"; the page cache is 2 MiB
)

func TestCrashDurability(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "buddy.db")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	acked := map[int]bool{}
	inTx := false
	var walSize int64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		var i int
		if _, err := fmt.Sscanf(line, "ack %d", &i); err == nil {
			acked[i] = true
			continue
		}
		if line == "in tx" {
			if fi, err := os.Stat(path + "-wal"); err == nil {
				walSize = fi.Size()
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			inTx = true
			break
		}
	}
	err = cmd.Wait()
	if !inTx {
		t.Fatalf("child never reached the transaction (acked %d): %v\n%s", len(acked), err, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed: %v\n%s", err, stderr.String())
	}
	if len(acked) != crashAcks {
		t.Fatalf("child acked %d rows, want %d", len(acked), crashAcks)
	}
	// The killed transaction must really have reached the disk, or the test
	// proves nothing about recovery.
	t.Logf("killed the child after %d acks, with a %d-byte WAL", len(acked), walSize)
	if walSize < crashSpillMiB<<20/2 {
		t.Fatalf("WAL was %d bytes at the kill: the transaction did not spill to disk", walSize)
	}

	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer s.Close(context.Background())
	for i := range crashAcks {
		v, err := s.KVGet(t.Context(), crashNS, fmt.Sprint(i))
		if err != nil || string(v) != fmt.Sprint("value ", i) {
			t.Errorf("acked row %d: %q, %v", i, v, err)
		}
	}
	var n int
	if err := s.reader.QueryRowContext(t.Context(), `SELECT count(*) FROM kv WHERE namespace = ?`, crashTxNS).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows of the killed transaction survived (%v)", n, err)
	}
	var usage int
	err = s.reader.QueryRowContext(t.Context(), `SELECT count(*) FROM namespace_usage WHERE namespace = ?`, crashTxNS).Scan(&usage)
	if err != nil || usage != 0 {
		t.Errorf("usage of the killed transaction survived: %d, %v", usage, err)
	}
	if err := s.IntegrityCheck(t.Context()); err != nil {
		t.Error(err)
	}
}

func crashChild(path string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		fail(err)
	}
	for i := range crashAcks {
		if err := s.KVSet(ctx, crashNS, fmt.Sprint(i), []byte(fmt.Sprint("value ", i))); err != nil {
			fail(err)
		}
		fmt.Printf("ack %d\n", i)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO kv (namespace, key, value, updated_at) VALUES (?, ?, ?, 0)`)
	if err != nil {
		fail(err)
	}
	value := bytes.Repeat([]byte("uncommitted "), 64<<10/12)
	deadline := time.Now().Add(time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := stmt.ExecContext(ctx, crashTxNS, fmt.Sprint(i), value); err != nil {
			fail(err)
		}
		if i*len(value) >= crashSpillMiB<<20 {
			if i*len(value) < crashSpillMiB<<20+len(value) {
				fmt.Println("in tx")
			}
			time.Sleep(10 * time.Millisecond) // keep the transaction open until killed
		}
	}
	fail(errors.New("not killed within a minute"))
}

func TestCanceledContext(t *testing.T) {
	s := openTest(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := map[string]func() error{
		"KVSet":       func() error { return s.KVSet(ctx, "ns", "k", nil) },
		"KVGet":       func() error { _, err := s.KVGet(ctx, "ns", "k"); return err },
		"Remember":    func() error { _, err := s.Remember(ctx, "ns", "text", nil); return err },
		"Recall":      func() error { _, err := s.Recall(ctx, "ns", "text", 0); return err },
		"InsertSkill": func() error { return s.InsertSkill(ctx, testSkill("x")) },
		"ListSkills":  func() error { _, err := s.ListSkills(ctx); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if !errors.Is(err, context.Canceled) || errs.KindOf(err) != errs.KindCanceled {
				t.Errorf("%s with a canceled context: %v (kind %s), want canceled", name, err, errs.KindOf(err))
			}
		})
	}
	if _, err := s.GetSkill(t.Context(), "x"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("the canceled InsertSkill wrote: %v", err)
	}
}
