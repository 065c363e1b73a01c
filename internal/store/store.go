// Package store is buddy's SQLite database: the registry of installed skills, the
// per-skill key-value store and the per-skill memories searched by relevance.
//
// It runs SQLite through github.com/ncruces/go-sqlite3 (SQLite compiled to Wasm and
// translated to Go: no cgo) behind database/sql, using the module's driver package.
// database/sql was chosen over the lower-level sqlite3.Conn API because it gives
// connection pooling, context-aware queries and transactions for free, and the
// driver's per-connection hook (driver.Open's init callback) still reaches the raw
// connection to register FTS5 and set the pragmas. (The module's embed package is a
// deprecated no-op in v0.36.0: the SQLite build is linked in by the module itself.)
//
// Usage:
//
//	st, err := store.Open(ctx, filepath.Join(dataDir, "buddy.db"), store.Options{})
//	if err != nil {
//		return err // errs.ErrConfig for a corrupt file or a schema from a newer buddy
//	}
//	defer st.Close()
//
//	err = st.KVSet(ctx, "notes", "greeting", []byte("hello"))
//	id, err := st.Remember(ctx, "notes", "the dentist is on Tuesday at 3pm", []string{"health"})
//	mems, err := st.Recall(ctx, "notes", "when is the dentist?", 5)
//
// # Durability and concurrency
//
// The database runs in WAL mode with synchronous=FULL: a write that returned nil is
// on disk (the WAL is fsynced at each commit) and survives a crash of the process
// or of the machine. Writes go through a pool of exactly one connection that begins
// its transactions with BEGIN IMMEDIATE, so writers queue in Go instead of
// contending for SQLite's lock; reads go through a separate pool of query-only
// connections that WAL lets run alongside the writer. A busy timeout covers other
// processes (the CLI while the server runs). A Store is safe for concurrent use.
//
// # Schema
//
// The schema is a list of migrations (see migrations in schema.go) applied at Open
// in one transaction; the schema version is SQLite's user_version. A database
// written by a newer buddy, a file that is not SQLite, a truncated database and a
// SQLite database of another application are refused with an errs.ErrConfig error
// and left as they are. Timestamps are stored as INTEGER Unix nanoseconds, UTC.
//
// # Search
//
// Memories are indexed by an FTS5 table kept in sync by triggers and ranked
// with bm25. Recall never hands the user's text to FTS5's query parser: it
// splits the query into words and searches them as quoted strings, OR-ed (see
// matchExpr), so no input is a syntax error or an operator. The namespace is a
// token of the index too. A namespace holding a small share of all memories is
// searched by AND-ing its token into the MATCH, so only its memories are
// ranked; a large one is ranked together with the other namespaces and
// filtered afterwards, with an exact fallback, because bm25 would otherwise
// count its token's long document list at every query. Either way only the top
// memories are read from the memories table.
//
// # Quotas
//
// KV entries and memories belong to a namespace (a skill's name). Each namespace
// has quotas (Options); a write that would exceed one fails with a *QuotaError,
// which matches errs.ErrTooLarge, and changes nothing. Usage is kept per namespace
// by triggers, so checking a quota costs one row lookup.
//
// # Audit log
//
// Audit rows are append-only and chained, each hashed with a key kept beside
// the database (<db>.audit-key) that SQL access to the database does not
// give; a head file (<db>.audit-head) records the log's last row under the
// same key, so that a log cut short is seen. VerifyAudit checks both
// (audit.go, audithead.go; docs/RATIONALE.md, "The audit log: chain, key and
// head").
//
//	rep, err := st.VerifyAudit(ctx)
//	if rep.Problem != nil { ... } // the first row edited, deleted, inserted, reordered; or the head
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/driver"
	"github.com/ncruces/go-sqlite3/ext/fts5"

	"github.com/buddy-run/buddy/hostfns/kv"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
)

var (
	_ kv.Store    = (*Store)(nil)
	_ kv.Memories = (*Store)(nil)
)

// Default quotas, used for the zero fields of Options.
const (
	DefaultMaxKeys             = 10_000
	DefaultMaxValueBytes       = 256 << 10
	DefaultMaxTotalBytes       = 16 << 20
	DefaultMaxMemories         = 100_000
	DefaultMaxMemoryBytes      = 16 << 10
	DefaultMaxMemoryTotalBytes = 64 << 20
)

// Fixed limits that are not worth an option.
const (
	// MaxNamespaceBytes is the longest namespace, in bytes.
	MaxNamespaceBytes = 256
	// MaxKeyBytes is the longest KV key, in bytes.
	MaxKeyBytes = 1024
	// MaxTags is the most tags one memory may carry.
	MaxTags = 32
	// MaxTagBytes is the longest tag, in bytes.
	MaxTagBytes = 128
	// MaxRecall is the most memories one Recall returns.
	MaxRecall = 100
	// DefaultRecall is the number of memories Recall returns for limit 0.
	DefaultRecall = 10
)

// busyTimeout is how long a statement waits for a lock held by another process
// before failing with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// readers is the size of the pool of query-only connections. Each connection
// carries its own SQLite heap and page cache, so the pool stays small.
const readers = 4

// Options are the per-namespace quotas. A zero (or negative) field takes its
// default.
type Options struct {
	// MaxKeys is the most KV keys a namespace may hold (default 10,000).
	MaxKeys int
	// MaxValueBytes is the largest KV value, in bytes (default 256 KiB).
	MaxValueBytes int
	// MaxTotalBytes caps the bytes of all keys and values of a namespace
	// (default 16 MiB).
	MaxTotalBytes int64
	// MaxMemories is the most memories a namespace may hold (default 100,000).
	MaxMemories int
	// MaxMemoryBytes is the longest memory text, in bytes (default 16 KiB).
	MaxMemoryBytes int
	// MaxMemoryTotalBytes caps the bytes of all memory texts and tags of a
	// namespace (default 64 MiB).
	MaxMemoryTotalBytes int64
	// Redact, when set, replaces the secrets buddy knows (package secrets)
	// in the text the store writes: messages (text, tool calls, arguments,
	// results, errors), conversation titles, approval arguments, audit
	// details and lists, key-value values, memories.
	// It must return its argument when there is nothing to replace.
	Redact func([]byte) []byte
}

func (o Options) withDefaults() Options {
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = DefaultMaxValueBytes
	}
	if o.MaxTotalBytes <= 0 {
		o.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if o.MaxMemories <= 0 {
		o.MaxMemories = DefaultMaxMemories
	}
	if o.MaxMemoryBytes <= 0 {
		o.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if o.MaxMemoryTotalBytes <= 0 {
		o.MaxMemoryTotalBytes = DefaultMaxMemoryTotalBytes
	}
	return o
}

// Store is buddy's database. It is safe for concurrent use; Close it when done.
type Store struct {
	path   string
	opts   Options
	writer *sql.DB // one connection; BEGIN IMMEDIATE
	reader *sql.DB // query_only connections
	now    func() time.Time
	batch  batcher     // writes waiting for a group commit (batch.go)
	writes statements  // prepared on the writer (stmts.go)
	reads  statements  // prepared on the readers
	stamp  skillsStamp // installed_skills' change stamp (stamp.go)
	// auditHead is the audit head's path (named after the real path);
	// anchor is the audit key and head, nil only for a database opened at a
	// schema before the key (tests) (audithead.go).
	auditHead string
	anchor    *auditAnchor
	// fingerprints counts SkillsFingerprint's queries (for tests).
	fingerprints atomic.Int64
}

// Open opens the database at path, creating it (and its parent directory, 0700)
// if needed, and brings its schema up to date.
//
// A new database file is created 0600. An existing directory or file that
// someone other than the user running buddy (or root) owns or may write is
// refused with an errs.ErrConfig error saying how to fix it: the database
// records which module each installed skill runs. Open fails with an errs.ErrConfig error,
// and leaves the file as it was, when the file is not a SQLite database, is
// truncated, belongs to another application, or has a schema version newer than
// this buddy knows; with an errs.ErrTampered error when the schema version was
// set back below the version that anchored its audit log (an audit head
// exists beside it).
//
// Beside the database Open keeps the audit key (<db>.audit-key, created 0600
// at first use; one that others may read or write is refused with an
// errs.ErrConfig error naming the chmod) and the audit head
// (<db>.audit-head), which anchor the audit log (audithead.go).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf("database path %q", path), err)
	}
	if err := osfile.PrivateDir(filepath.Dir(abs)); err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "the database directory", err)
	}
	// Files named after the database (its setup lock, its skills stamp,
	// its audit key and head) are named after it with symlinks resolved.
	real := osfile.RealPath(abs)
	unlock, err := setupLock(ctx, real)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkFile(abs); err != nil {
		return nil, err
	}
	if err := createFile(abs); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "database file "+abs, err)
	} else if err := osfile.CheckPrivate(abs, fi); err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "the database file", err)
	}

	s := &Store{path: abs, opts: opts.withDefaults(), now: time.Now, stamp: skillsStamp{path: real + stampSuffix},
		auditHead: real + auditHeadSuffix}
	s.writer, err = openPool(abs, true)
	if err != nil {
		return nil, openErr(abs, err)
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	s.writer.SetConnMaxIdleTime(0)

	if err := s.migrate(ctx); err != nil {
		s.writer.Close()
		return nil, err
	}
	restrictSidecars(abs)
	// A migration may have changed installed_skills: every open stamps (and
	// so creates the stamp).
	if err := s.stampSkills(); err != nil {
		s.writer.Close()
		return nil, errs.Wrap(errs.ErrConfig, "the skills stamp", err)
	}
	if LatestSchemaVersion() >= auditAnchorSchema {
		if err := s.openAuditAnchor(ctx, real); err != nil {
			s.anchor.close()
			s.writer.Close()
			return nil, err
		}
	}

	s.reader, err = openPool(abs, false)
	if err != nil {
		s.writer.Close()
		return nil, openErr(abs, err)
	}
	s.reader.SetMaxOpenConns(readers)
	s.reader.SetMaxIdleConns(readers)
	if s.writes, err = prepare(ctx, s.writer, preparedWrites); err == nil {
		s.reads, err = prepare(ctx, s.reader, preparedReads)
	}
	if err != nil {
		s.Close(ctx)
		return nil, err
	}
	return s, nil
}

// Close waits for the writes already queued to commit (until ctx ends),
// then closes the database. The last connection to close checkpoints the WAL.
func (s *Store) Close(ctx context.Context) error {
	var err error
	for {
		s.batch.mu.Lock()
		busy := s.batch.draining
		s.batch.mu.Unlock()
		if !busy {
			break
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			err = fmt.Errorf("closing with writes still queued: %w", ctx.Err())
		case <-t.C:
			continue
		}
		break
	}
	err = errors.Join(err, s.reads.close(), s.writes.close(), s.anchor.close())
	if s.reader != nil {
		err = errors.Join(err, s.reader.Close())
	}
	if err2 := s.writer.Close(); err2 != nil {
		err = errors.Join(err, err2)
	}
	if err != nil {
		return fmt.Errorf("closing %s: %w", s.path, err)
	}
	return nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// SchemaVersion returns the schema version recorded in the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.reader.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, dbErr(ctx, "reading the schema version", err)
	}
	return v, nil
}

// IntegrityCheck runs SQLite's integrity_check over the whole database and
// returns an error describing the first problems found, if any. It reads every
// page: use it for diagnostics (buddy doctor), not at every start.
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.reader.QueryContext(ctx, `PRAGMA integrity_check(10)`)
	if err != nil {
		return dbErr(ctx, "checking integrity", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return dbErr(ctx, "checking integrity", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr(ctx, "checking integrity", err)
	}
	if len(problems) > 0 {
		return errs.New(errs.ErrUnavailable, fmt.Sprintf("database %s failed its integrity check: %q", s.path, problems))
	}
	return nil
}

// openPool opens a database/sql pool on path. Every connection gets FTS5, the
// busy timeout, foreign keys and synchronous=FULL; reader connections are also
// query-only. The writer begins its transactions with BEGIN IMMEDIATE so that a
// read-then-write transaction never fails to upgrade its lock.
func openPool(path string, writer bool) (*sql.DB, error) {
	// mode=rw: the file exists (createFile made it); never let SQLite create one.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=rw"
	if writer {
		dsn += "&_txlock=immediate"
	}
	return driver.Open(dsn, func(c *sqlite3.Conn) error {
		if err := fts5.Register(c); err != nil {
			return fmt.Errorf("registering fts5: %w", err)
		}
		if err := c.BusyTimeout(busyTimeout); err != nil {
			return err
		}
		pragmas := `PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;`
		if !writer {
			pragmas += ` PRAGMA query_only=ON;`
		}
		return c.Exec(pragmas)
	})
}

// write runs fn in a write transaction and commits it. fn's errors are returned
// as they are (fn wraps its own).
func (s *Store) write(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return dbErr(ctx, op, err)
	}
	defer tx.Rollback() // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return dbErr(ctx, op, err)
	}
	return nil
}

// dbErr wraps a database error with the operation and gives it a kind: the
// context's when the caller gave up, unavailable for I/O, disk-full, lock and
// corruption errors (none of them the caller's fault), internal otherwise.
func dbErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		kind := errs.ErrCanceled
		if errors.Is(cerr, context.DeadlineExceeded) {
			kind = errs.ErrTimeout
		}
		cause := err
		if !errors.Is(err, cerr) {
			cause = fmt.Errorf("%w (%v)", cerr, err)
		}
		return errs.Wrap(kind, op, cause)
	}
	var code sqlite3.ErrorCode
	if errors.As(err, &code) {
		switch code {
		case sqlite3.BUSY, sqlite3.LOCKED, sqlite3.IOERR, sqlite3.FULL, sqlite3.CANTOPEN,
			sqlite3.READONLY, sqlite3.PROTOCOL, sqlite3.CORRUPT, sqlite3.NOTADB, sqlite3.PERM:
			return errs.Wrap(errs.ErrUnavailable, op, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unixNanos and fromUnixNanos are the one encoding of timestamps in the database.
func unixNanos(t time.Time) int64 { return t.UnixNano() }

func fromUnixNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// redact applies Options.Redact to b.
func (s *Store) redact(b []byte) []byte {
	if s.opts.Redact == nil || len(b) == 0 {
		return b
	}
	return s.opts.Redact(b)
}

// redactString applies Options.Redact to a text.
func (s *Store) redactString(v string) string {
	if s.opts.Redact == nil || v == "" {
		return v
	}
	out := s.opts.Redact([]byte(v))
	if string(out) == v {
		return v
	}
	return string(out)
}

// redactList applies Options.Redact to every text of a list.
func (s *Store) redactList(l []string) []string {
	if s.opts.Redact == nil {
		return l
	}
	var out []string
	for i, v := range l {
		if r := s.redactString(v); r != v {
			if out == nil {
				out = slices.Clone(l)
			}
			out[i] = r
		}
	}
	if out == nil {
		return l
	}
	return out
}

// redactJSON applies Options.Redact to a JSON value; one that would no
// longer parse (a secret matched across its syntax) is kept as the JSON
// string of its redacted text.
func (s *Store) redactJSON(raw json.RawMessage) json.RawMessage {
	if s.opts.Redact == nil || len(raw) == 0 {
		return raw
	}
	out := s.opts.Redact(raw)
	if len(out) == len(raw) && string(out) == string(raw) {
		return raw
	}
	if !json.Valid(out) {
		b, _ := json.Marshal(string(out))
		return b
	}
	return out
}
