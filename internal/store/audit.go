package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The audit log (schema v3) is a hash chain: each row's hash is the SHA-256
// of a canonical encoding of the row that includes the hash of the row before
// it, so that editing, deleting, inserting or reordering rows is seen by
// VerifyAudit. The chain has no key: a process with the user's rights that
// rewrites every row after the one it changed, recomputing each hash, is not
// detected (docs/RATIONALE.md, "Threat model").

// Kinds of audit rows.
const (
	AuditInvocation = "invocation" // a skill call through the gate, whatever its outcome
	AuditApproval   = "approval"   // the user was asked: approved or denied
	AuditInstall    = "install"    // buddy skill install (or an upgrade)
	AuditRemove     = "remove"     // buddy skill remove
	AuditConfig     = "config"     // a configuration seen at start that differs from the last one
)

// auditCanon is the version tag of the canonical encoding.
const auditCanon = "buddy-audit/1"

// maxAuditList bounds the paths, hosts and addresses kept per row.
const maxAuditList = 64

// auditHash is the hex SHA-256 of the canonical encoding of e with prev: a
// JSON array of every stored column but id and hash, in a fixed order.
func auditHash(e AuditEntry, prev string) string {
	list := func(v []string) []string {
		if v == nil {
			return []string{}
		}
		return v
	}
	b, _ := json.Marshal([]any{
		auditCanon, unixNanos(e.Time), e.Kind, e.Conversation, e.Skill, e.Version, e.ModuleSHA256,
		e.ArgumentsHash, e.Outcome, e.Detail, e.Asked, fuelToDB(e.Fuel), e.DurationUS, e.BytesIn, e.BytesOut,
		e.BytesRead, e.BytesWritten, list(e.Paths), list(e.Hosts), list(e.Addresses), prev,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// AppendAudit appends an audit row, chained to the last one, and returns its
// ID (IDs increase). A zero Time means now; an empty Kind is an invocation;
// Skill (for invocations and approvals) and Outcome are required; a Detail
// longer than MaxAuditDetailBytes is cut, as are lists over 64 entries. The
// conversation need not exist (a CLI call has none); when it does, its
// UpdatedAt moves to the entry's time.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) (int64, error) {
	ids, err := s.AppendAudits(ctx, e)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// AppendAudits appends several audit rows in order, as AppendAudit does each,
// in one durable write: all of them are stored or none (a call's approval
// row and its invocation row cost one commit, not two). It returns their IDs
// (zeros under a Deferred context, whose wait reports the write).
func (s *Store) AppendAudits(ctx context.Context, entries ...AuditEntry) ([]int64, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	entries = slices.Clone(entries) // filled in below, perhaps after returning
	for i := range entries {
		if err := s.prepareAudit(&entries[i]); err != nil {
			return nil, err
		}
	}
	// What does not depend on the chain is prepared here, not on the one
	// writer goroutine.
	ops := make([]string, len(entries))
	lists := make([][3]string, len(entries))
	for i, e := range entries {
		ops[i] = fmt.Sprintf("auditing %s of %q", e.Kind, e.Skill)
		lists[i] = [3]string{jsonList(e.Paths), jsonList(e.Hosts), jsonList(e.Addresses)}
	}
	// Each conversation is touched once, at its rows' latest time (a touch
	// keeps the later of its time and the conversation's).
	type touchAt struct {
		conv string
		at   time.Time
	}
	var touches []touchAt
	for _, e := range entries {
		if e.Conversation == "" {
			continue
		}
		i := slices.IndexFunc(touches, func(t touchAt) bool { return t.conv == e.Conversation })
		if i < 0 {
			touches = append(touches, touchAt{e.Conversation, e.Time})
		} else if e.Time.After(touches[i].at) {
			touches[i].at = e.Time
		}
	}
	ids := make([]int64, len(entries))
	deferred, err := s.writeBehind(ctx, ops[0], func(ctx context.Context, tx txn) error {
		prev, err := sealAudit(ctx, tx, ops[0])
		if err != nil {
			return err
		}
		for _, t := range touches {
			if _, err := touch(ctx, tx, ops[0], t.conv, t.at); err != nil {
				return err
			}
		}
		for i := range entries {
			e, op := &entries[i], ops[i]
			e.PrevHash, e.Hash = prev, auditHash(*e, prev)
			ids[i], err = insertID(ctx, tx, op, sqlInsertAudit,
				unixNanos(e.Time), e.Kind, e.Conversation, e.Skill, e.Version, e.ModuleSHA256, e.ArgumentsHash,
				e.Outcome, e.Detail, e.Asked, fuelToDB(e.Fuel), e.DurationUS, e.BytesIn, e.BytesOut,
				e.BytesRead, e.BytesWritten, lists[i][0], lists[i][1], lists[i][2], e.PrevHash, e.Hash)
			if err != nil {
				return err
			}
			prev = e.Hash
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if deferred {
		return make([]int64, len(entries)), nil
	}
	return ids, nil
}

// prepareAudit checks an entry and fills in its defaults (AppendAudit).
func (s *Store) prepareAudit(e *AuditEntry) error {
	if e.Kind == "" {
		e.Kind = AuditInvocation
	}
	if e.Skill == "" && (e.Kind == AuditInvocation || e.Kind == AuditApproval) {
		return invalid("audit entry: empty skill")
	}
	if e.Outcome == "" {
		return invalid("audit entry for skill %q: empty outcome", e.Skill)
	}
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	e.Time = fromUnixNanos(unixNanos(e.Time)) // what is stored is what is hashed
	e.Detail = capText(e.Detail, MaxAuditDetailBytes)
	for _, l := range []*[]string{&e.Paths, &e.Hosts, &e.Addresses} {
		if len(*l) > maxAuditList {
			*l = (*l)[:maxAuditList]
		}
	}
	return nil
}

// sealAudit chains the rows written before schema v3 (hash ”), in order,
// and returns the hash of the last row ("" for an empty log).
func sealAudit(ctx context.Context, tx execer, op string) (string, error) {
	var last string
	err := tx.QueryRowContext(ctx, sqlLastAuditHash).Scan(&last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", dbErr(ctx, op, err)
	case last != "":
		return last, nil
	}
	rows, err := queryTx(ctx, tx, op, scanAudit, `SELECT `+auditColumns+` FROM audit ORDER BY id`)
	if err != nil {
		return "", err
	}
	prev := ""
	for _, r := range rows {
		if r.Hash != "" {
			prev = r.Hash
			continue
		}
		h := auditHash(r, prev)
		if _, err := tx.ExecContext(ctx, `UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ? AND hash = ''`, prev, h, r.ID); err != nil {
			return "", dbErr(ctx, op, err)
		}
		prev = h
	}
	return prev, nil
}

func jsonList(v []string) string {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

const auditColumns = `id, time, kind, conversation, skill, version, module_sha256, arguments_hash,
	outcome, detail, asked, fuel, duration_us, bytes_in, bytes_out,
	bytes_read, bytes_written, paths, hosts, addresses, prev_hash, hash`

func scanAudit(r scanner) (AuditEntry, error) {
	var e AuditEntry
	var at, fuel int64
	var paths, hosts, addrs string
	err := r.Scan(&e.ID, &at, &e.Kind, &e.Conversation, &e.Skill, &e.Version, &e.ModuleSHA256, &e.ArgumentsHash,
		&e.Outcome, &e.Detail, &e.Asked, &fuel, &e.DurationUS, &e.BytesIn, &e.BytesOut,
		&e.BytesRead, &e.BytesWritten, &paths, &hosts, &addrs, &e.PrevHash, &e.Hash)
	if err != nil {
		return AuditEntry{}, err
	}
	e.Time = fromUnixNanos(at)
	e.Fuel = fuelFromDB(fuel)
	for _, l := range []struct {
		text string
		dst  *[]string
	}{{paths, &e.Paths}, {hosts, &e.Hosts}, {addrs, &e.Addresses}} {
		if err := json.Unmarshal([]byte(l.text), l.dst); err != nil {
			// A list that does not parse is kept as text: VerifyAudit sees
			// the row as edited, the listing still shows it.
			*l.dst = []string{l.text}
		}
		if len(*l.dst) == 0 {
			*l.dst = nil
		}
	}
	return e, nil
}

// Audit returns the audit rows of a conversation ("" = every row, CLI calls
// included), oldest first; with limit > 0, only the last limit rows.
func (s *Store) Audit(ctx context.Context, conversation string, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	where, args := "", []any{limit}
	if conversation != "" {
		where, args = ` WHERE conversation = ?`, []any{conversation, limit}
	}
	q := `SELECT * FROM (SELECT ` + auditColumns + `
		FROM audit` + where + ` ORDER BY id DESC LIMIT ?) ORDER BY id`
	return query(ctx, s.reader, "reading the audit log", scanAudit, q, args...)
}

// LastAudit returns the last row of a kind; ok is false when there is none.
func (s *Store) LastAudit(ctx context.Context, kind string) (e AuditEntry, ok bool, err error) {
	rows, err := query(ctx, s.reader, "reading the audit log", scanAudit,
		`SELECT `+auditColumns+` FROM audit WHERE kind = ? ORDER BY id DESC LIMIT 1`, kind)
	if err != nil || len(rows) == 0 {
		return AuditEntry{}, false, err
	}
	return rows[0], true, nil
}

// AuditProblem is the first row of the audit log that is not as written.
type AuditProblem struct {
	// Kind is "edited", "deleted", "inserted" or "reordered".
	Kind string
	// ID is the row concerned: the edited, inserted or moved row, or the
	// first row after the deleted ones (0: rows were deleted at the end).
	ID     int64
	Detail string
}

func (p *AuditProblem) Error() string {
	return fmt.Sprintf("audit row %d %s: %s", p.ID, p.Kind, p.Detail)
}

// AuditReport is what VerifyAudit found.
type AuditReport struct {
	Rows     int   // rows checked
	Unsealed int   // rows written before the chain existed, none sealed yet
	LastID   int64 // the last row's id
	Problem  *AuditProblem
}

// VerifyAudit walks the audit log in id order and returns the first row that
// was edited, deleted, inserted or reordered since it was written: a row's
// hash must be the hash of its content and of the previous row's hash, ids
// must follow each other, and the table's AUTOINCREMENT counter must not be
// past the last row (rows deleted at the end). It writes nothing.
func (s *Store) VerifyAudit(ctx context.Context) (AuditReport, error) {
	const op = "verifying the audit log"
	var rep AuditReport
	rows, err := query(ctx, s.reader, op, scanAudit, `SELECT `+auditColumns+` FROM audit ORDER BY id`)
	if err != nil {
		return rep, err
	}
	rep.Rows = len(rows)
	byHash := map[string]int{}
	sealed := false
	for i, r := range rows {
		if r.Hash != "" {
			byHash[r.Hash] = i
			sealed = true
		}
	}
	fail := func(kind string, id int64, format string, args ...any) (AuditReport, error) {
		rep.Problem = &AuditProblem{Kind: kind, ID: id, Detail: fmt.Sprintf(format, args...)}
		return rep, nil
	}
	prev, prevID := "", int64(0)
	for i, r := range rows {
		rep.LastID = r.ID
		if !sealed {
			rep.Unsealed++
			continue
		}
		if r.Hash == "" {
			return fail("edited", r.ID, "its hash was removed")
		}
		self := auditHash(r, r.PrevHash) == r.Hash
		link := r.PrevHash == prev
		gap := r.ID != prevID+1
		if self && link && !gap {
			prev, prevID = r.Hash, r.ID
			continue
		}
		later := false
		if j, ok := byHash[r.PrevHash]; ok && j > i {
			later = true
		}
		switch {
		case self && !link && later:
			return fail("reordered", r.ID, "it was chained to row %d, which comes after it", rows[byHash[r.PrevHash]].ID)
		case i+1 < len(rows) && rows[i+1].PrevHash == prev && prev != r.Hash:
			return fail("inserted", r.ID, "the next row follows the row before it")
		case !self:
			return fail("edited", r.ID, "its content does not match its hash")
		case !link:
			if j, ok := byHash[r.PrevHash]; ok && j == i-2 {
				return fail("inserted", prevID, "row %d was chained to row %d", r.ID, rows[j].ID)
			}
			if j, ok := byHash[r.PrevHash]; ok && j != i-1 {
				return fail("reordered", r.ID, "it was chained to row %d, not row %d", rows[j].ID, prevID)
			}
			if gap {
				return fail("deleted", r.ID, "rows %d to %d are missing", prevID+1, r.ID-1)
			}
			if i == 0 {
				return fail("deleted", r.ID, "the rows before it are missing")
			}
			return fail("edited", prevID, "the next row was chained to another hash: this row was rewritten with a new hash, or the row after it deleted and the ids renumbered")
		default: // a gap with intact links: ids were renumbered
			return fail("edited", r.ID, "its id was changed from %d", prevID+1)
		}
	}
	var seq int64
	err = s.reader.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'audit'`).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return rep, dbErr(ctx, op, err)
	}
	if seq > rep.LastID {
		return fail("deleted", 0, "rows %d to %d (the end of the log) are missing", rep.LastID+1, seq)
	}
	return rep, nil
}

// queryTx is query inside a transaction.
func queryTx[T any](ctx context.Context, tx execer, op string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	return queryOn(ctx, tx, op, scan, q, args...)
}
