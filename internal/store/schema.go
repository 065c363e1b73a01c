package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// applicationID marks a SQLite file as buddy's ("BUDY"); Open refuses a
// database that carries another application's id.
const applicationID = 0x42554459

// migration is one step of the schema. Migrations are applied in order, all
// pending ones in a single transaction, and never edited once released: a change
// to the schema is a new entry at the end of migrations.
type migration struct {
	name string
	sql  string
	// before, when set, runs in the migration's transaction before sql:
	// work SQL cannot do (hashing rows).
	before func(ctx context.Context, tx *sql.Tx) error
}

// migrations is the schema, one entry per version: migrations[0] brings a new
// database to version 1, migrations[1] (when it exists) to version 2, and so on.
var migrations = []migration{
	{name: "installed skills, kv, memories", sql: schemaV1},
	{name: "conversations, messages, approvals, audit", sql: schemaV2},
	{name: "audit hash chain, kinds, paths and hosts touched", sql: schemaV3},
	{name: "audit log sealed once, keyed and anchored", sql: schemaV4, before: sealLegacyAudit},
	{name: "conversation state; the module an approval was asked about", sql: schemaV5},
	{name: "summaries of compacted messages; token usage per model request", sql: schemaV6},
	{name: "scheduled jobs: reminders, checks, the heartbeat", sql: schemaV7},
	{name: "the credentials a call used, in its audit row", sql: schemaV8},
	{name: "chat channels: inbox, outbox, chats, pairing", sql: schemaV9},
}

// LatestSchemaVersion is the schema version this buddy writes.
func LatestSchemaVersion() int { return len(migrations) }

// schemaV1: skills, the KV store, memories with their FTS5 index, and the
// per-namespace usage counters the quotas read. Timestamps are Unix nanoseconds.
const schemaV1 = `
CREATE TABLE installed_skills (
	name                TEXT PRIMARY KEY NOT NULL,
	version             TEXT NOT NULL,
	description         TEXT NOT NULL DEFAULT '',
	author              TEXT NOT NULL DEFAULT '',
	wasm_path           TEXT NOT NULL,
	sha256              TEXT NOT NULL,
	manifest            TEXT NOT NULL,
	capabilities        TEXT NOT NULL DEFAULT '{}',
	verification_status TEXT NOT NULL DEFAULT 'unverified',
	installed_at        INTEGER NOT NULL,
	updated_at          INTEGER NOT NULL
) STRICT;

CREATE TABLE kv (
	namespace  TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      BLOB NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (namespace, key)
) STRICT;

-- One row per namespace that has ever stored something; maintained by the
-- triggers below so that a quota check is one lookup. kv_bytes counts keys and
-- values; memory_bytes counts texts and tags (as stored, JSON).
CREATE TABLE namespace_usage (
	namespace    TEXT PRIMARY KEY NOT NULL,
	kv_keys      INTEGER NOT NULL DEFAULT 0,
	kv_bytes     INTEGER NOT NULL DEFAULT 0,
	memories     INTEGER NOT NULL DEFAULT 0,
	memory_bytes INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TRIGGER kv_usage_insert AFTER INSERT ON kv BEGIN
	INSERT INTO namespace_usage (namespace, kv_keys, kv_bytes)
	VALUES (new.namespace, 1, octet_length(new.key) + length(new.value))
	ON CONFLICT (namespace) DO UPDATE SET
		kv_keys = kv_keys + 1,
		kv_bytes = kv_bytes + excluded.kv_bytes;
END;

CREATE TRIGGER kv_usage_delete AFTER DELETE ON kv BEGIN
	UPDATE namespace_usage SET
		kv_keys = kv_keys - 1,
		kv_bytes = kv_bytes - octet_length(old.key) - length(old.value)
	WHERE namespace = old.namespace;
END;

CREATE TRIGGER kv_usage_update AFTER UPDATE OF namespace, key, value ON kv BEGIN
	UPDATE namespace_usage SET
		kv_keys = kv_keys - 1,
		kv_bytes = kv_bytes - octet_length(old.key) - length(old.value)
	WHERE namespace = old.namespace;
	INSERT INTO namespace_usage (namespace, kv_keys, kv_bytes)
	VALUES (new.namespace, 1, octet_length(new.key) + length(new.value))
	ON CONFLICT (namespace) DO UPDATE SET
		kv_keys = kv_keys + 1,
		kv_bytes = kv_bytes + excluded.kv_bytes;
END;

-- AUTOINCREMENT: an id is never reused, so a forgotten id stays forgotten.
-- ns_token is the namespace as one FTS5 token ("ns" + hex of its bytes), indexed
-- so that a search filters by namespace inside the full-text index.
CREATE TABLE memories (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	namespace  TEXT NOT NULL,
	text       TEXT NOT NULL,
	tags       TEXT NOT NULL DEFAULT '[]',
	created_at INTEGER NOT NULL,
	ns_token   TEXT GENERATED ALWAYS AS ('ns' || lower(hex(namespace))) VIRTUAL
) STRICT;

CREATE INDEX memories_namespace ON memories (namespace, id);

-- An external-content index over memories: the text is stored once. porter
-- stems English words so "meetings" finds "meeting"; unicode61 folds case and
-- diacritics. Tags are indexed from their JSON, whose punctuation the tokenizer
-- drops.
CREATE VIRTUAL TABLE memories_fts USING fts5 (
	text, tags, ns_token,
	content = 'memories', content_rowid = 'id',
	tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memories_insert AFTER INSERT ON memories BEGIN
	INSERT INTO memories_fts (rowid, text, tags, ns_token) VALUES (new.id, new.text, new.tags, new.ns_token);
	INSERT INTO namespace_usage (namespace, memories, memory_bytes)
	VALUES (new.namespace, 1, octet_length(new.text) + octet_length(new.tags))
	ON CONFLICT (namespace) DO UPDATE SET
		memories = memories + 1,
		memory_bytes = memory_bytes + excluded.memory_bytes;
END;

CREATE TRIGGER memories_delete AFTER DELETE ON memories BEGIN
	INSERT INTO memories_fts (memories_fts, rowid, text, tags, ns_token)
	VALUES ('delete', old.id, old.text, old.tags, old.ns_token);
	UPDATE namespace_usage SET
		memories = memories - 1,
		memory_bytes = memory_bytes - octet_length(old.text) - octet_length(old.tags)
	WHERE namespace = old.namespace;
END;

CREATE TRIGGER memories_update AFTER UPDATE OF namespace, text, tags ON memories BEGIN
	INSERT INTO memories_fts (memories_fts, rowid, text, tags, ns_token)
	VALUES ('delete', old.id, old.text, old.tags, old.ns_token);
	INSERT INTO memories_fts (rowid, text, tags, ns_token) VALUES (new.id, new.text, new.tags, new.ns_token);
	UPDATE namespace_usage SET
		memories = memories - 1,
		memory_bytes = memory_bytes - octet_length(old.text) - octet_length(old.tags)
	WHERE namespace = old.namespace;
	INSERT INTO namespace_usage (namespace, memories, memory_bytes)
	VALUES (new.namespace, 1, octet_length(new.text) + octet_length(new.tags))
	ON CONFLICT (namespace) DO UPDATE SET
		memories = memories + 1,
		memory_bytes = memory_bytes + excluded.memory_bytes;
END;
`

// schemaV2: what `buddy serve` keeps of a conversation: the conversations, their
// messages (user and assistant text, tool calls and their results), the
// approvals asked for and how they were decided, and an audit row per skill
// invocation (a CLI call too, with an empty conversation). Optional times are NULL, not 0.
// JSON columns hold the JSON text as given, NULL when there is none. Audit rows
// are never updated (a trigger refuses it); deleting old ones stays possible for
// a retention policy.
const schemaV2 = `
CREATE TABLE conversations (
	id         TEXT PRIMARY KEY NOT NULL,
	title      TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	ended_at   INTEGER
) STRICT;

CREATE INDEX conversations_updated ON conversations (updated_at);

CREATE TABLE messages (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	conversation TEXT NOT NULL REFERENCES conversations (id),
	role         TEXT NOT NULL,
	text         TEXT NOT NULL DEFAULT '',
	tool_calls   TEXT,
	call_id      TEXT NOT NULL DEFAULT '',
	skill        TEXT NOT NULL DEFAULT '',
	arguments    TEXT,
	ok           INTEGER NOT NULL DEFAULT 0,
	result       TEXT,
	result_text  TEXT NOT NULL DEFAULT '',
	error_kind   TEXT NOT NULL DEFAULT '',
	error_detail TEXT NOT NULL DEFAULT '',
	fuel         INTEGER NOT NULL DEFAULT 0,
	duration_us  INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX messages_conversation ON messages (conversation, id);

CREATE TABLE approvals (
	id             TEXT PRIMARY KEY NOT NULL,
	conversation   TEXT NOT NULL REFERENCES conversations (id),
	call_id        TEXT NOT NULL DEFAULT '',
	skill          TEXT NOT NULL,
	permission     TEXT NOT NULL DEFAULT '',
	arguments      TEXT,
	arguments_hash TEXT NOT NULL DEFAULT '',
	status         TEXT NOT NULL,
	decided_by     TEXT NOT NULL DEFAULT '',
	requested_at   INTEGER NOT NULL,
	expires_at     INTEGER,
	decided_at     INTEGER
) STRICT;

CREATE INDEX approvals_conversation ON approvals (conversation, requested_at);
CREATE INDEX approvals_pending ON approvals (status) WHERE status = 'pending';

CREATE TABLE audit (
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	time           INTEGER NOT NULL,
	conversation   TEXT NOT NULL DEFAULT '',
	skill          TEXT NOT NULL,
	version        TEXT NOT NULL DEFAULT '',
	module_sha256  TEXT NOT NULL DEFAULT '',
	arguments_hash TEXT NOT NULL DEFAULT '',
	outcome        TEXT NOT NULL,
	detail         TEXT NOT NULL DEFAULT '',
	asked          INTEGER NOT NULL DEFAULT 0,
	fuel           INTEGER NOT NULL DEFAULT 0,
	duration_us    INTEGER NOT NULL DEFAULT 0,
	bytes_in       INTEGER NOT NULL DEFAULT 0,
	bytes_out      INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX audit_conversation ON audit (conversation, id);

CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit BEGIN
	SELECT RAISE(ABORT, 'audit rows are append-only');
END;
`

// schemaV3: the audit log becomes tamper-evident and says what each call
// touched. Every row carries the hash of the row before it (prev_hash) and its
// own (hash: SHA-256 over a canonical encoding of the row, prev_hash
// included; see audit.go). kind says what the row records (an invocation, an
// approval, an install, a removal, a configuration seen at start). Rows
// written before this version have no hash: under v3 the first append after
// the upgrade sealed them in order, which was the one update the trigger
// allowed (since v4, the migration does, once).
const schemaV3 = `
ALTER TABLE audit ADD COLUMN kind TEXT NOT NULL DEFAULT 'invocation';
ALTER TABLE audit ADD COLUMN bytes_read INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN bytes_written INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN paths TEXT NOT NULL DEFAULT '[]';
ALTER TABLE audit ADD COLUMN hosts TEXT NOT NULL DEFAULT '[]';
ALTER TABLE audit ADD COLUMN addresses TEXT NOT NULL DEFAULT '[]';
ALTER TABLE audit ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';

CREATE INDEX audit_kind ON audit (kind, id);

DROP TRIGGER audit_append_only;
CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit WHEN old.hash <> '' BEGIN
	SELECT RAISE(ABORT, 'audit rows are append-only');
END;
`

// schemaV4: the audit log is sealed once and for all. The rows written
// before v3 (no hash) are chained in order by the migration itself
// (sealLegacyAudit, before this SQL); then the trigger refuses every update,
// so no row is ever sealed again and a row without a hash is one whose hash
// was removed. From this version on, rows are hashed with the audit key and
// the log is anchored by the audit head (audithead.go), both files beside the
// database, which Open creates after the migration.
const schemaV4 = `
DROP TRIGGER IF EXISTS audit_append_only;
CREATE TRIGGER audit_append_only BEFORE UPDATE ON audit BEGIN
	SELECT RAISE(ABORT, 'audit rows are append-only');
END;
`

// sealLegacyAudit seals the rows written before schema v3 (migration v4).
func sealLegacyAudit(ctx context.Context, tx *sql.Tx) error {
	_, err := sealAudit(ctx, tx, "sealing the audit rows written before schema v3")
	return err
}

// schemaV5: what the approval gate and the SKILL.md sessions must remember of
// a conversation across restarts (conversation_state: its private reads, its
// "once" approvals, the SKILL.md skills binding it; state.go), keyed by a
// scope that is a conversation id or a shared scope ("mcp") and so not a
// foreign key; and the sha256 of the module each approval was asked about.
const schemaV5 = `
CREATE TABLE conversation_state (
	scope      TEXT NOT NULL,
	kind       TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	PRIMARY KEY (scope, kind, key)
) STRICT, WITHOUT ROWID;

ALTER TABLE approvals ADD COLUMN module_sha256 TEXT NOT NULL DEFAULT '';
`

// schemaV6: what keeps a conversation inside the model's window. A summary
// message (role "summary") stands for the messages covers_from..covers_to,
// which stay stored; meta is the compaction's record (JSON). usage is one
// row per model request: the tokens the provider reported (or buddy
// estimated, reported = 0), the window it was sent into, and its cost in
// millionths of a dollar where prices are set.
const schemaV6 = `
ALTER TABLE messages ADD COLUMN covers_from INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN covers_to INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN meta TEXT;

CREATE TABLE usage (
	id                INTEGER PRIMARY KEY AUTOINCREMENT,
	conversation      TEXT NOT NULL DEFAULT '',
	time              INTEGER NOT NULL,
	purpose           TEXT NOT NULL,
	model             TEXT NOT NULL DEFAULT '',
	prompt_tokens     INTEGER NOT NULL DEFAULT 0,
	completion_tokens INTEGER NOT NULL DEFAULT 0,
	cached_tokens     INTEGER NOT NULL DEFAULT 0,
	reported          INTEGER NOT NULL DEFAULT 0,
	window_tokens     INTEGER NOT NULL DEFAULT 0,
	cost_micro_usd    INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX usage_conversation ON usage (conversation, id);
CREATE INDEX usage_time ON usage (time);
`

// schemaV7: scheduled jobs (internal/scheduler). A job is a reminder (text
// delivered verbatim), a check (a prompt run as an agent turn) or the
// heartbeat; it fires at a time (at), at an interval (every_ns) or on a cron
// expression read in the scheduler's time zone. next_run is the next due
// time (NULL once a one-shot job has run). A process runs a due job only
// after claiming it: lease_owner and lease_until, set in one statement that
// succeeds for one process only; the run ends by moving next_run on and
// clearing the lease. blocked_* record a budget that stopped the job: which
// cap, its value then, and when its period ends.
const schemaV7 = `
CREATE TABLE jobs (
	id            TEXT PRIMARY KEY NOT NULL,
	kind          TEXT NOT NULL,
	at            INTEGER NOT NULL DEFAULT 0,
	every_ns      INTEGER NOT NULL DEFAULT 0,
	cron          TEXT NOT NULL DEFAULT '',
	text          TEXT NOT NULL DEFAULT '',
	conversation  TEXT NOT NULL DEFAULT '',
	created_by    TEXT NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	next_run      INTEGER,
	last_run      INTEGER NOT NULL DEFAULT 0,
	last_status   TEXT NOT NULL DEFAULT '',
	last_detail   TEXT NOT NULL DEFAULT '',
	runs          INTEGER NOT NULL DEFAULT 0,
	lease_owner   TEXT NOT NULL DEFAULT '',
	lease_until   INTEGER NOT NULL DEFAULT 0,
	blocked_cap   TEXT NOT NULL DEFAULT '',
	blocked_limit REAL NOT NULL DEFAULT 0,
	blocked_until INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX jobs_due ON jobs (next_run) WHERE next_run IS NOT NULL;
CREATE INDEX usage_conversation_time ON usage (conversation, time);
`

// schemaV8: the audit row of a call names the credentials buddy added to
// its requests (a JSON list; "" for none, as in every row written before:
// their keyed hashes do not cover the column, and a row's hash covers it
// only when it is not empty, audithead.go rowHash).
const schemaV8 = `
ALTER TABLE audit ADD COLUMN credentials TEXT NOT NULL DEFAULT '';
`

// schemaV9: the chat channels (internal/front/channels; docs/CHANNELS.md).
// channel_inbox holds every update a channel received, keyed by its chat and
// the platform's update id, stored before the update is acknowledged (the
// cursor of the next poll, in channel_cursors, is written in the same
// transaction); its state goes new → running (a turn started on it) → done,
// or refused (a sender not allowed, whose event is then forgotten).
// channel_outbox holds every message buddy sends to a chat, stored before it
// is sent: body is what the message should show, sent_hash the sha256 of the
// body the platform last confirmed, message_id the platform's id once sent;
// a streamed answer's body changes until final. channel_chats ties a chat to
// its conversation; channel_pairing holds pairing codes and paired users.
const schemaV9 = `
CREATE TABLE channel_inbox (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	channel     TEXT NOT NULL,
	chat        TEXT NOT NULL,
	update_id   TEXT NOT NULL,
	event       TEXT NOT NULL,
	state       TEXT NOT NULL,
	note        TEXT NOT NULL DEFAULT '',
	received_at INTEGER NOT NULL,
	started_at  INTEGER,
	done_at     INTEGER,
	UNIQUE (channel, chat, update_id)
) STRICT;

CREATE INDEX channel_inbox_open ON channel_inbox (channel, seq) WHERE state IN ('new', 'running');
CREATE INDEX channel_inbox_done ON channel_inbox (channel, done_at) WHERE done_at IS NOT NULL;

CREATE TABLE channel_cursors (
	channel    TEXT PRIMARY KEY NOT NULL,
	cursor     TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE channel_outbox (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	channel    TEXT NOT NULL,
	chat       TEXT NOT NULL,
	kind       TEXT NOT NULL,
	ref        TEXT NOT NULL DEFAULT '',
	body       TEXT NOT NULL,
	final      INTEGER NOT NULL DEFAULT 1,
	message_id TEXT NOT NULL DEFAULT '',
	sent_hash  TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL,
	attempts   INTEGER NOT NULL DEFAULT 0,
	error      TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	sent_at    INTEGER
) STRICT;

CREATE INDEX channel_outbox_pending ON channel_outbox (channel, id) WHERE state = 'pending';
CREATE INDEX channel_outbox_ref ON channel_outbox (channel, ref) WHERE ref <> '';

CREATE TABLE channel_chats (
	channel      TEXT NOT NULL,
	chat         TEXT NOT NULL,
	conversation TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	PRIMARY KEY (channel, chat)
) STRICT;

CREATE INDEX channel_chats_conversation ON channel_chats (conversation);

CREATE TABLE channel_pairing (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	channel    TEXT NOT NULL,
	user_id    TEXT NOT NULL,
	chat       TEXT NOT NULL DEFAULT '',
	name       TEXT NOT NULL DEFAULT '',
	code       TEXT NOT NULL DEFAULT '',
	status     TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	decided_at INTEGER
) STRICT;

CREATE UNIQUE INDEX channel_pairing_code ON channel_pairing (code) WHERE status = 'pending';
CREATE UNIQUE INDEX channel_pairing_user ON channel_pairing (channel, user_id) WHERE status IN ('pending', 'paired');
`

// migrate checks that the database is buddy's and not from a newer buddy, turns
// on WAL and applies the pending migrations in one transaction. Nothing is
// written before the checks pass.
func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return openErr(s.path, err)
	}
	defer conn.Close()

	// The three facts are read in one transaction: another process creating
	// the database at the same moment commits its tables and its version
	// together, so a consistent snapshot never shows tables without a version.
	var appID, version, objects int
	check, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer's _txlock
	if err != nil {
		return openErr(s.path, err)
	}
	err = check.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID)
	if err == nil {
		err = check.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version)
	}
	if err == nil {
		err = check.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&objects)
	}
	check.Rollback() // read only; journal_mode cannot change inside a transaction
	if err != nil {
		return openErr(s.path, err)
	}
	if version < auditAnchorSchema && LatestSchemaVersion() >= auditAnchorSchema && exists(s.auditHead) {
		// Only a database at auditAnchorSchema or later gets a head, and no
		// buddy writes a lower version over it: migrating again would
		// re-seal rows whose hashes were removed, and a new log would
		// hide the one the head anchored.
		key := strings.TrimSuffix(s.auditHead, auditHeadSuffix) + auditKeySuffix
		what := fmt.Sprintf("its schema version is %d, but its audit log was anchored at version %d or later (%s exists): the version was set back",
			version, auditAnchorSchema, s.auditHead)
		if version == 0 {
			what = fmt.Sprintf("it is new or empty, but the audit head %s anchors an audit log that was kept in it: the database was deleted or replaced", s.auditHead)
		}
		return errs.New(errs.ErrTampered, fmt.Sprintf(
			"database %s: %s behind buddy's back; it was left untouched (to start afresh on purpose, move %s and %s aside)",
			s.path, what, s.auditHead, key))
	}
	if appID != 0 && appID != applicationID {
		return notBuddy(s.path, fmt.Sprintf("it belongs to another application (application_id %#x)", appID))
	}
	if err := newerErr(s.path, version); err != nil {
		return err
	}
	if version == 0 && objects > 0 {
		return notBuddy(s.path, "it is a SQLite database of another application")
	}

	// Switching to WAL needs an exclusive lock, and SQLite may answer BUSY at
	// once rather than through the busy handler while another process opens
	// the same new file; the switch is idempotent, so retry within the busy
	// timeout.
	var mode string
	for deadline := time.Now().Add(busyTimeout); ; {
		err := conn.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode)
		if err == nil {
			break
		}
		var se *sqlite3.Error
		if !errors.As(err, &se) || se.Code() != sqlite3.BUSY || time.Now().After(deadline) {
			return openErr(s.path, err)
		}
		select {
		case <-ctx.Done():
			return openErr(s.path, ctx.Err())
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		}
	}
	if mode != "wal" {
		return errs.New(errs.ErrConfig, fmt.Sprintf("database %s: cannot use WAL mode (journal_mode is %q)", s.path, mode))
	}
	if version == LatestSchemaVersion() {
		return nil
	}

	tx, err := conn.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer's _txlock
	if err != nil {
		return openErr(s.path, err)
	}
	defer tx.Rollback()
	// Another process may have migrated between the check above and the lock.
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return openErr(s.path, err)
	}
	if err := newerErr(s.path, version); err != nil {
		return err
	}
	for v := version; v < LatestSchemaVersion(); v++ {
		m := migrations[v]
		if m.before != nil {
			if err := m.before(ctx, tx); err != nil {
				return errs.Wrap(errs.ErrInternal, fmt.Sprintf("database %s: applying migration %d (%s)", s.path, v+1, m.name), err)
			}
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return errs.Wrap(errs.ErrInternal, fmt.Sprintf("database %s: applying migration %d (%s)", s.path, v+1, m.name), err)
		}
	}
	// PRAGMA takes no parameters; both values are integers of ours.
	stmt := fmt.Sprintf(`PRAGMA user_version = %d; PRAGMA application_id = %d;`, LatestSchemaVersion(), applicationID)
	if _, err := tx.ExecContext(ctx, stmt); err != nil {
		return openErr(s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return openErr(s.path, err)
	}
	return nil
}

func newerErr(path string, version int) error {
	if version > LatestSchemaVersion() {
		return errs.New(errs.ErrConfig, fmt.Sprintf(
			"database %s has schema version %d, newer than the %d this buddy knows: upgrade buddy or point it at another data directory",
			path, version, LatestSchemaVersion()))
	}
	return nil
}

// notBuddy is the error for a file Open will not touch.
func notBuddy(path, reason string) error {
	return errs.New(errs.ErrConfig, fmt.Sprintf(
		"%s is not a usable buddy database: %s (it was left untouched; move it aside to start afresh)", path, reason))
}

// openErr gives an error met while opening the database the config kind, with
// the path: at Open, a failure is about the file or its directory.
func openErr(path string, err error) error {
	if errors.Is(err, sqlite3.NOTADB) || errors.Is(err, sqlite3.CORRUPT) {
		return errs.Wrap(errs.ErrConfig, fmt.Sprintf(
			"%s is not a usable buddy database: not SQLite or corrupt (it was left untouched; move it aside to start afresh)", path), err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	return errs.Wrap(errs.ErrConfig, "opening database "+path, err)
}

// SQLite's file header (https://sqlite.org/fileformat2.html#the_database_header).
const (
	headerSize  = 100
	magic       = "SQLite format 3\x00"
	minPageSize = 512
	maxPageSize = 65536
)

// checkFile refuses, without writing anything, a file that cannot be a healthy
// SQLite database: too short, without the SQLite magic, with an impossible page
// size, or shorter than its header says it is (truncated). SQLite itself would
// report some of these only at the first read of a missing page, and might write
// to the file before that.
func checkFile(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return errs.Wrap(errs.ErrConfig, "database file "+path, err)
	}
	if !fi.Mode().IsRegular() {
		return notBuddy(path, "it is not a regular file")
	}
	size := fi.Size()
	if size == 0 {
		return nil // SQLite treats an empty file as an empty database
	}
	f, err := os.Open(path)
	if err != nil {
		return errs.Wrap(errs.ErrConfig, "database file "+path, err)
	}
	defer f.Close()
	h := make([]byte, headerSize)
	if _, err := io.ReadFull(f, h); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return notBuddy(path, fmt.Sprintf("not SQLite (%d bytes is shorter than a SQLite header)", size))
		}
		return errs.Wrap(errs.ErrConfig, "reading database file "+path, err)
	}
	if string(h[:len(magic)]) != magic {
		return notBuddy(path, "not SQLite (no SQLite header)")
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = maxPageSize
	}
	if pageSize < minPageSize || pageSize > maxPageSize || pageSize&(pageSize-1) != 0 {
		return notBuddy(path, fmt.Sprintf("corrupt header (page size %d)", pageSize))
	}
	if size%pageSize != 0 {
		return notBuddy(path, fmt.Sprintf("truncated or corrupt (%d bytes is not a whole number of %d-byte pages)", size, pageSize))
	}
	// The page count in the header is valid only when the change counter
	// matches "version-valid-for". A WAL or rollback journal may legitimately
	// hold pages the main file does not have yet: SQLite recovers those.
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	valid := binary.BigEndian.Uint32(h[24:28]) == binary.BigEndian.Uint32(h[92:96])
	if valid && pages > 0 && pages*pageSize > size && !nonEmpty(path+"-wal") && !exists(path+"-journal") {
		return notBuddy(path, fmt.Sprintf("truncated (%d bytes, the header says %d pages of %d bytes)", size, pages, pageSize))
	}
	return nil
}

// createFile creates an empty database file readable by its owner only, so that
// SQLite does not create it with the umask's permissions.
func createFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return errs.Wrap(errs.ErrConfig, "creating database file "+path, err)
	}
	if err := f.Close(); err != nil {
		return errs.Wrap(errs.ErrConfig, "creating database file "+path, err)
	}
	return nil
}

// restrictSidecars makes the WAL and shared-memory files owner-only, as the
// database is: the VFS creates them 0666 less the umask, and the WAL holds data.
func restrictSidecars(path string) {
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			_ = os.Chmod(p, 0o600) // best effort: the directory is 0700 anyway
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func nonEmpty(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}
