package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// The audit log is a hash chain: each row's hash covers the row and the hash
// of the row before it, so that editing, deleting, inserting or reordering
// rows is seen by VerifyAudit. Rows written since schema v4 are hashed with a
// key the database does not hold, and a head file beside the database
// records the last row (audithead.go): SQL access to the database alone can
// neither write a row that verifies nor cut the log short unseen. Rows
// written before v4 keep their unkeyed SHA-256 (auditHash), pinned by the
// first keyed row and by the head. A process that can read the key can still
// forge the log (docs/RATIONALE.md, "Threat model").

// Kinds of audit rows.
const (
	AuditInvocation = "invocation" // a skill call through the gate, whatever its outcome
	AuditApproval   = "approval"   // the user was asked: approved or denied
	AuditInstall    = "install"    // buddy skill install (or an upgrade)
	AuditRemove     = "remove"     // buddy skill remove
	AuditConfig     = "config"     // a configuration seen at start that differs from the last one
	AuditCompaction = "compaction" // a conversation's earlier messages summarised (or left out) to fit the model's window
)

// auditCanon is the version tag of the canonical encoding.
const auditCanon = "buddy-audit/1"

// maxAuditList bounds the paths, hosts and addresses kept per row.
const maxAuditList = 64

// auditHash is the hex SHA-256 of the canonical encoding of e with prev: a
// JSON array of every stored column but id and hash, in a fixed order. It is
// the hash of the rows written before schema v4 (before the audit key); rows
// written since carry auditAnchor.rowHash.
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
// (zeros under a Deferred context, whose wait reports the write). Each row is
// hashed with the audit key; once the commit is done, and before it returns
// (or the Deferred wait does), the audit head is moved to the last row.
func (s *Store) AppendAudits(ctx context.Context, entries ...AuditEntry) ([]int64, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	entries = slices.Clone(entries) // defaults filled in; read by the write, perhaps after returning
	for i := range entries {
		if err := s.prepareAudit(&entries[i]); err != nil {
			return nil, err
		}
	}
	// What does not depend on the chain is prepared here, not on the one
	// writer goroutine.
	ops := make([]string, len(entries))
	lists := make([][4]string, len(entries))
	for i, e := range entries {
		ops[i] = fmt.Sprintf("auditing %s of %q", e.Kind, e.Skill)
		lists[i] = [4]string{jsonList(e.Paths), jsonList(e.Hosts), jsonList(e.Addresses), ""}
		if len(e.Credentials) > 0 {
			lists[i][3] = jsonList(e.Credentials)
		}
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
	a := s.anchor
	if a == nil {
		return nil, errs.New(errs.ErrInternal, fmt.Sprintf("%s: the database's schema predates the audit key", ops[0]))
	}
	deferred, err := s.writeBehind(ctx, ops[0], func(ctx context.Context, tx txn) error {
		var base auditTail // the row this write chains onto
		if err := tx.QueryRowContext(ctx, sqlLastAudit).Scan(&base.id, &base.hash); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return dbErr(ctx, ops[0], err)
		}
		prev := base.hash
		for _, t := range touches {
			if _, err := touch(ctx, tx, ops[0], t.conv, t.at); err != nil {
				return err
			}
		}
		for i := range entries {
			r := newRecord(entries[i], lists[i], prev)
			r.hash = a.rowHash(r)
			var err error
			if ids[i], err = insertID(ctx, tx, ops[i], sqlInsertAudit, r.args()...); err != nil {
				return err
			}
			prev = r.hash
		}
		if t := tx.tail; t != nil {
			if t.id == 0 { // the first audit write of the batch to succeed
				t.base = &base
			}
			t.id, t.hash = ids[len(ids)-1], prev
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
	e.Detail = capText(s.redactString(e.Detail), MaxAuditDetailBytes)
	for _, l := range []*[]string{&e.Paths, &e.Hosts, &e.Addresses, &e.Credentials} {
		if len(*l) > maxAuditList {
			*l = (*l)[:maxAuditList]
		}
		*l = s.redactList(*l)
	}
	return nil
}

// sealAudit chains the rows written before schema v3 (hash ”), in order,
// with auditHash, and returns the hash of the last row ("" for an empty
// log). The migration to v4 runs it once, in its transaction, before the
// trigger stops allowing it: after that no row is ever sealed again, and a
// row without a hash is one whose hash was removed.
func sealAudit(ctx context.Context, tx execer, op string) (string, error) {
	var id int64
	var last string
	err := tx.QueryRowContext(ctx, sqlLastAudit).Scan(&id, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", dbErr(ctx, op, err)
	case last != "":
		return last, nil
	}
	rows, err := queryTx(ctx, tx, op, scanAudit, `SELECT `+auditColumnsV3+`, '' FROM audit ORDER BY id`)
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

const auditColumns = auditColumnsV3 + `, credentials`

// auditColumnsV3 are the columns of the audit table from schema v3 to v6:
// what sealing the rows written before v3 reads (in the migration to v4,
// before v8 adds credentials).
const auditColumnsV3 = `id, time, kind, conversation, skill, version, module_sha256, arguments_hash,
	outcome, detail, asked, fuel, duration_us, bytes_in, bytes_out,
	bytes_read, bytes_written, paths, hosts, addresses, prev_hash, hash`

// auditRecord is an audit row as stored, column for column: what the keyed
// hash covers, byte for byte.
type auditRecord struct {
	id, time                                         int64
	kind, conversation, skill, version, moduleSHA256 string
	argumentsHash, outcome, detail                   string
	asked, fuel, durationUS, bytesIn, bytesOut       int64
	bytesRead, bytesWritten                          int64
	paths, hosts, addresses                          string // JSON lists as stored
	prevHash, hash                                   string
	credentials                                      string // a JSON list, or "" for none (schema v8)
}

// newRecord is the row AppendAudits stores for e (prepared), chained to prev;
// lists are e's lists as JSON. Its hash is left to the caller.
func newRecord(e AuditEntry, lists [4]string, prev string) auditRecord {
	var asked int64
	if e.Asked {
		asked = 1
	}
	return auditRecord{
		time: unixNanos(e.Time), kind: e.Kind, conversation: e.Conversation, skill: e.Skill, version: e.Version,
		moduleSHA256: e.ModuleSHA256, argumentsHash: e.ArgumentsHash, outcome: e.Outcome, detail: e.Detail,
		asked: asked, fuel: fuelToDB(e.Fuel), durationUS: e.DurationUS, bytesIn: e.BytesIn, bytesOut: e.BytesOut,
		bytesRead: e.BytesRead, bytesWritten: e.BytesWritten,
		paths: lists[0], hosts: lists[1], addresses: lists[2], prevHash: prev, credentials: lists[3],
	}
}

// args are r's values in sqlInsertAudit's order.
func (r auditRecord) args() []any {
	return []any{r.time, r.kind, r.conversation, r.skill, r.version, r.moduleSHA256, r.argumentsHash,
		r.outcome, r.detail, r.asked, r.fuel, r.durationUS, r.bytesIn, r.bytesOut,
		r.bytesRead, r.bytesWritten, r.paths, r.hosts, r.addresses, r.prevHash, r.hash, r.credentials}
}

func scanRecord(row scanner) (auditRecord, error) {
	var r auditRecord
	err := row.Scan(&r.id, &r.time, &r.kind, &r.conversation, &r.skill, &r.version, &r.moduleSHA256, &r.argumentsHash,
		&r.outcome, &r.detail, &r.asked, &r.fuel, &r.durationUS, &r.bytesIn, &r.bytesOut,
		&r.bytesRead, &r.bytesWritten, &r.paths, &r.hosts, &r.addresses, &r.prevHash, &r.hash, &r.credentials)
	return r, err
}

// entry is r as AuditEntry shows it.
func (r auditRecord) entry() AuditEntry {
	e := AuditEntry{
		ID: r.id, Time: fromUnixNanos(r.time), Kind: r.kind, Conversation: r.conversation, Skill: r.skill,
		Version: r.version, ModuleSHA256: r.moduleSHA256, ArgumentsHash: r.argumentsHash, Outcome: r.outcome,
		Detail: r.detail, Asked: r.asked != 0, Fuel: fuelFromDB(r.fuel), DurationUS: r.durationUS,
		BytesIn: r.bytesIn, BytesOut: r.bytesOut, BytesRead: r.bytesRead, BytesWritten: r.bytesWritten,
		PrevHash: r.prevHash, Hash: r.hash,
	}
	for _, l := range []struct {
		text string
		dst  *[]string
	}{{r.paths, &e.Paths}, {r.hosts, &e.Hosts}, {r.addresses, &e.Addresses}} {
		if err := json.Unmarshal([]byte(l.text), l.dst); err != nil {
			// A list that does not parse is kept as text: VerifyAudit sees
			// the row as edited, the listing still shows it.
			*l.dst = []string{l.text}
		}
		if len(*l.dst) == 0 {
			*l.dst = nil
		}
	}
	if r.credentials != "" {
		if err := json.Unmarshal([]byte(r.credentials), &e.Credentials); err != nil {
			e.Credentials = []string{r.credentials}
		}
	}
	return e
}

func scanAudit(row scanner) (AuditEntry, error) {
	r, err := scanRecord(row)
	if err != nil {
		return AuditEntry{}, err
	}
	return r.entry(), nil
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

// Kinds of AuditProblem.
const (
	// AuditEdited: a row's content, hash or id is not what buddy wrote (a
	// row appended without the audit key reads as edited too: at the end of
	// the log, nothing tells the two apart).
	AuditEdited = "edited"
	// AuditDeleted: rows are missing, at the start, in the middle (with or
	// without the ids after them renumbered) or at the end.
	AuditDeleted = "deleted"
	// AuditInserted: a row buddy did not write sits between rows chained to
	// each other, or repeats an earlier row.
	AuditInserted = "inserted"
	// AuditReordered: a row is chained to a row that is not the one before it.
	AuditReordered = "reordered"
	// AuditUnverifiable: the audit head is missing or does not match the
	// audit key, so rows cut from the end of the log could not be seen.
	AuditUnverifiable = "unverifiable"
)

// AuditProblem is the first thing found in the audit log that is not as
// buddy wrote it.
type AuditProblem struct {
	// Kind is one of AuditEdited, AuditDeleted, AuditInserted,
	// AuditReordered, AuditUnverifiable.
	Kind string
	// ID is the row concerned: the edited, inserted or moved row, or the
	// first row after the deleted ones; 0 when rows were deleted at the end
	// and for AuditUnverifiable (the problem is the head).
	ID     int64
	Detail string
}

func (p *AuditProblem) Error() string {
	if p.Kind == AuditUnverifiable {
		return fmt.Sprintf("audit head %s: %s", p.Kind, p.Detail)
	}
	return fmt.Sprintf("audit row %d %s: %s", p.ID, p.Kind, p.Detail)
}

// AuditReport is what VerifyAudit found.
type AuditReport struct {
	Rows    int   // rows checked
	Keyed   int   // of which hashed with the audit key (the others predate it)
	LastID  int64 // the last row's id
	HeadID  int64 // the last row the audit head records (0: none, or no usable head)
	Problem *AuditProblem
}

// VerifyAudit checks the audit log against itself and against its head and
// returns the first thing that is not as buddy wrote it. Every row must
// carry a hash; a row's hash must be the keyed hash of its content and of the
// previous row's hash (the unkeyed SHA-256 for the rows written before the
// key, which the head names); ids must run 1, 2, 3, ...; the log must reach
// the row the head records, with the hash it records (it may run past it:
// the head is written after its rows commit); and the AUTOINCREMENT counter
// must not be past the last row. A missing head, or one whose MAC does not
// verify, is reported as AuditUnverifiable once the rows themselves show
// nothing. It writes nothing.
func (s *Store) VerifyAudit(ctx context.Context) (AuditReport, error) {
	const op = "verifying the audit log"
	var rep AuditReport
	// The head first, then the rows: a head is written after its rows
	// commit, so a head read before the rows never names a row they lack.
	head, headProblem := s.anchor.loadHead()
	rows, seq, err := s.readAuditLog(ctx, op)
	if err != nil {
		return rep, err
	}
	rep.Rows = len(rows)
	fail := func(kind string, id int64, format string, args ...any) (AuditReport, error) {
		rep.Problem = &AuditProblem{Kind: kind, ID: id, Detail: fmt.Sprintf(format, args...)}
		return rep, nil
	}

	// Rows from `from` on are keyed. Without a usable head, the first row
	// whose hash is keyed is taken as the first keyed row, to say what else
	// is wrong before saying that the head is.
	from := int64(math.MaxInt64)
	a := s.anchor
	switch {
	case a == nil: // a database opened at a schema before the key (tests)
	case headProblem == nil:
		from = head.From
		rep.HeadID = head.ID
	default:
		for _, r := range rows {
			if r.hash != "" && a.keyedOK(r) {
				from = r.id
				break
			}
		}
		if from == math.MaxInt64 && len(rows) > 0 {
			// No row verifies under this key: the key was replaced (or
			// every keyed row altered), which the head says first.
			rep.Problem = headProblem
			return rep, nil
		}
	}
	selfOK := func(r auditRecord) bool {
		if r.id >= from {
			return a.keyedOK(r)
		}
		return auditHash(r.entry(), r.prevHash) == r.hash
	}

	byHash := make(map[string]int, len(rows))
	for i, r := range rows {
		if _, dup := byHash[r.hash]; !dup && r.hash != "" {
			byHash[r.hash] = i
		}
	}
	prev, prevID := "", int64(0)
	for i, r := range rows {
		rep.LastID = r.id
		if r.hash == "" {
			return fail(AuditEdited, r.id, "it has no hash (rows without one existed only before the log was sealed, at the upgrade to schema v%d)", auditAnchorSchema)
		}
		if j := byHash[r.hash]; j < i {
			return fail(AuditInserted, r.id, "it repeats row %d", rows[j].id)
		}
		self := selfOK(r)
		link := r.prevHash == prev
		gap := r.id != prevID+1
		if self && link && !gap {
			if r.id >= from {
				rep.Keyed++
			}
			prev, prevID = r.hash, r.id
			continue
		}
		j, chained := byHash[r.prevHash]
		chained = chained && r.prevHash != ""
		switch {
		case self && !link && chained && j > i:
			return fail(AuditReordered, r.id, "it was chained to row %d, which comes after it", rows[j].id)
		case i+1 < len(rows) && rows[i+1].prevHash == prev && prev != r.hash:
			return fail(AuditInserted, r.id, "the next row follows the row before it")
		case !self:
			return fail(AuditEdited, r.id, "its content does not match its hash")
		case !link:
			if chained && j == i-2 {
				return fail(AuditInserted, prevID, "row %d was chained to row %d", r.id, rows[j].id)
			}
			if chained && j != i-1 {
				return fail(AuditReordered, r.id, "it was chained to row %d, not row %d", rows[j].id, prevID)
			}
			if gap {
				return fail(AuditDeleted, r.id, "%s", missing(prevID+1, r.id-1, ""))
			}
			if i == 0 {
				return fail(AuditDeleted, r.id, "the rows before it are missing")
			}
			if r.id >= from && prevID >= from {
				// Both rows carry hashes only the key makes: buddy wrote
				// them, chained to a row that is gone.
				return fail(AuditDeleted, r.id, "the row it was chained to is missing: rows before it were deleted and the ids after them renumbered")
			}
			return fail(AuditEdited, prevID, "the next row was chained to another hash: this row was rewritten with a new hash, or the row after it deleted and the ids renumbered")
		default: // a gap with intact links: ids were renumbered
			return fail(AuditEdited, r.id, "its id was changed from %d", prevID+1)
		}
	}

	if headProblem != nil {
		rep.Problem = headProblem
		return rep, nil
	}
	if a != nil {
		if head.ID > rep.LastID {
			if rep.Rows == 0 {
				return fail(AuditDeleted, 0, "rows 1 to %d (the whole log) are missing", head.ID)
			}
			return fail(AuditDeleted, 0, "%s", missing(rep.LastID+1, head.ID, " (the end of the log)"))
		}
		// Ids run 1, 2, 3, ... (checked above): row head.ID is rows[head.ID-1].
		if head.ID > 0 && rows[head.ID-1].hash != head.Hash {
			if head.ID >= from {
				return fail(AuditDeleted, head.ID, "it is not the row %d the audit head recorded: rows were deleted at the end and new ones written with their ids", head.ID)
			}
			return fail(AuditEdited, head.ID, "its hash is not the one the audit head recorded: rows up to it were rewritten and their hashes recomputed")
		}
	}
	if seq > rep.LastID {
		return fail(AuditDeleted, 0, "%s", missing(rep.LastID+1, seq, " (the end of the log)"))
	}
	return rep, nil
}

// missing says that rows first to last are missing: "row 5 is missing",
// "rows 4 to 5 (the end of the log) are missing".
func missing(first, last int64, what string) string {
	if first == last {
		return fmt.Sprintf("row %d%s is missing", first, what)
	}
	return fmt.Sprintf("rows %d to %d%s are missing", first, last, what)
}

// readAuditLog reads every audit row, in id order, and the table's
// AUTOINCREMENT counter, in one read transaction.
func (s *Store) readAuditLog(ctx context.Context, op string) ([]auditRecord, int64, error) {
	tx, err := s.reader.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, dbErr(ctx, op, err)
	}
	defer tx.Rollback()
	rows, err := queryOn(ctx, tx, op, scanRecord, `SELECT `+auditColumns+` FROM audit ORDER BY id`)
	if err != nil {
		return nil, 0, err
	}
	var seq int64
	err = tx.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'audit'`).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, 0, dbErr(ctx, op, err)
	}
	return rows, seq, nil
}

// loadHead reads the audit head for VerifyAudit: a missing head, one that
// cannot be read and one whose MAC does not verify are problems.
func (a *auditAnchor) loadHead() (auditHead, *AuditProblem) {
	if a == nil {
		return auditHead{}, nil
	}
	h, err := a.readHead()
	if err == nil {
		return h, nil
	}
	p := &AuditProblem{Kind: AuditUnverifiable}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.Detail = fmt.Sprintf("the audit head %s is missing, so rows cut from the end of the log could not be seen", a.headPath)
	case errors.Is(err, errHeadMAC):
		p.Detail = fmt.Sprintf("the audit head %s does not match the audit key %s: one of them was edited or replaced", a.headPath, a.keyPath)
	default:
		p.Detail = fmt.Sprintf("the audit head %s could not be used: %v", a.headPath, err)
	}
	return auditHead{}, p
}

// queryTx is query inside a transaction.
func queryTx[T any](ctx context.Context, tx execer, op string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	return queryOn(ctx, tx, op, scan, q, args...)
}
