package store

import (
	"context"
	"database/sql"
	"errors"
)

// Prepared statements. SQLite parses each statement of database/sql's
// ExecContext and QueryContext anew, and in this Wasm build of SQLite parsing
// costs as much as running the small statements a call writes (a profile of a
// burst of approved calls: 40% of the writer's time). The statements on the
// server's call path are prepared once, when the store opens: writes on the
// one writer connection (used in a transaction through Tx.StmtContext, which
// finds them already prepared there), reads on each reader connection as it
// first runs them. Every other statement is parsed as before.

// The statements of a call's writes (batch.go, conversations.go, audit.go).
const (
	sqlSavepoint  = `SAVEPOINT batch_write`
	sqlRelease    = `RELEASE batch_write`
	sqlRollbackTo = `ROLLBACK TO batch_write`
	sqlTouch      = `UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id = ?`

	sqlInsertConversation = `INSERT INTO conversations (id, title, created_at, updated_at, ended_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	sqlInsertMessage = `INSERT INTO messages (conversation, role, text, tool_calls,
				call_id, skill, arguments, ok, result, result_text, error_kind, error_detail,
				fuel, duration_us, created_at, covers_from, covers_to, meta)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertApproval = `INSERT INTO approvals (id, conversation, call_id, skill, permission,
				arguments, arguments_hash, status, decided_by, requested_at, expires_at, decided_at, module_sha256)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	sqlApprovalState = `SELECT conversation, status, decided_by, expires_at, decided_at
			FROM approvals WHERE id = ?`
	sqlDecideApproval = `UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?
			WHERE id = ? AND status = 'pending'`
	sqlLastAudit   = `SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1`
	sqlAuditHashAt = `SELECT hash FROM audit WHERE id = ?`
	sqlInsertAudit = `INSERT INTO audit (time, kind, conversation, skill, version, module_sha256,
					arguments_hash, outcome, detail, asked, fuel, duration_us, bytes_in, bytes_out,
					bytes_read, bytes_written, paths, hosts, addresses, prev_hash, hash, credentials)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// The reads of a call's path (the registry's check for installs, the
// server's lookups of a conversation and of an approval).
const (
	sqlSkillsFingerprint = `SELECT count(*), coalesce(sum(updated_at % 1000000007), 0),
		coalesce(group_concat(name || ':' || sha256, ','), '')
		FROM (SELECT name, sha256, updated_at FROM installed_skills ORDER BY name)`
	sqlGetConversation = `SELECT ` + conversationColumns + ` FROM conversations WHERE id = ?`
	sqlGetApproval     = `SELECT ` + approvalColumns + ` FROM approvals WHERE id = ?`
)

var (
	preparedWrites = []string{sqlSavepoint, sqlRelease, sqlRollbackTo, sqlTouch, sqlInsertConversation,
		sqlInsertMessage, sqlInsertApproval, sqlApprovalState, sqlDecideApproval, sqlLastAudit, sqlAuditHashAt, sqlInsertAudit}
	preparedReads = []string{sqlSkillsFingerprint, sqlGetConversation, sqlGetApproval}
)

// statements is a pool's prepared statements by their text; read-only once
// the store is open.
type statements map[string]*sql.Stmt

// prepare prepares qs on db. A statement the schema cannot prepare (a
// database opened at an older version, in tests) is left out and parsed when
// run, as any other; a canceled ctx fails.
func prepare(ctx context.Context, db *sql.DB, qs []string) (statements, error) {
	st := statements{}
	for _, q := range qs {
		p, err := db.PrepareContext(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				st.close()
				return nil, dbErr(ctx, "preparing the database's statements", err)
			}
			continue
		}
		st[q] = p
	}
	return st, nil
}

func (st statements) close() error {
	var err error
	for _, p := range st {
		err = errors.Join(err, p.Close())
	}
	return err
}

// execer is a transaction, prepared (txn) or not (*sql.Tx).
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// txn is a batched write's transaction: statements prepared on the writer
// run prepared, the others as *sql.Tx runs them.
type txn struct {
	*sql.Tx
	prepared statements
	// tail is where AppendAudits leaves the last audit row it wrote, for
	// the head update after the commit (nil outside a batch).
	tail *auditTail
}

func (t txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if p := t.prepared[q]; p != nil {
		return t.Tx.StmtContext(ctx, p).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

func (t txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if p := t.prepared[q]; p != nil {
		return t.Tx.StmtContext(ctx, p).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

func (t txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if p := t.prepared[q]; p != nil {
		return t.Tx.StmtContext(ctx, p).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// writeRow runs a read on the writer, outside any transaction (the head's
// check after a commit, audithead.go), prepared if it is one of
// preparedWrites.
func (s *Store) writeRow(ctx context.Context, q string, args ...any) *sql.Row {
	if p := s.writes[q]; p != nil {
		return p.QueryRowContext(ctx, args...)
	}
	return s.writer.QueryRowContext(ctx, q, args...)
}

// readRow runs a read on the reader pool, prepared if it is one of
// preparedReads.
func (s *Store) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	if p := s.reads[q]; p != nil {
		return p.QueryRowContext(ctx, args...)
	}
	return s.reader.QueryRowContext(ctx, q, args...)
}
