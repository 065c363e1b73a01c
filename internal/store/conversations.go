package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Conversations, their messages, the approvals asked in them and the audit log
// of skill invocations: what `buddy serve` keeps across restarts (schema v2).
//
// Every write is committed and fsynced before it returns (concurrent ones share
// a transaction: see batch.go): an ID returned by AppendMessage or AppendAudit,
// or a nil error from any of the writes, means the row survives a kill -9 of the
// process. A write that concerns a conversation
// moves its UpdatedAt forward (never back), so ListConversations shows the
// latest activity first.

// Limits on the text the store keeps for a conversation.
const (
	// MaxConversationIDBytes is the longest conversation or approval ID.
	MaxConversationIDBytes = 256
	// MaxTitleBytes is the longest title kept; a longer one is cut (at a
	// character boundary, ending with "…").
	MaxTitleBytes = 1024
	// MaxAuditDetailBytes is the longest audit detail kept; a longer one is cut
	// the same way.
	MaxAuditDetailBytes = 1024
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	// RoleSummary is a compaction: Text stands for the messages with ids
	// CoversFrom to CoversTo (which stay stored), Meta says how it was made.
	RoleSummary = "summary"
)

// Approval statuses. An approval is created pending and decided once.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalCanceled = "canceled"
)

// Who decided an approval (Approval.DecidedBy).
const (
	DecidedByUser     = "user"
	DecidedByTimeout  = "timeout"
	DecidedByPolicy   = "policy"
	DecidedByCanceled = "canceled"
)

// ErrDecided is matched (with errors.Is) by the error DecideApproval returns for
// an approval that is no longer pending; the error is a *DecidedError, which
// also matches errs.ErrInvalidInput.
var ErrDecided = errors.New("already decided")

// DecidedError reports a decision refused because the approval was already
// decided (or has just expired: see DecideApproval). Status and DecidedBy are
// the decision that stands.
type DecidedError struct {
	ID        string
	Status    string
	DecidedBy string
	DecidedAt time.Time
}

func (e *DecidedError) Error() string {
	if e.Status == ApprovalExpired {
		return fmt.Sprintf("approval %q has expired", e.ID)
	}
	return fmt.Sprintf("approval %q was already decided: %s (by %s)", e.ID, e.Status, e.DecidedBy)
}

// Unwrap makes errors.Is(err, ErrDecided) and errors.Is(err, errs.ErrInvalidInput) hold.
func (e *DecidedError) Unwrap() []error { return []error{ErrDecided, errs.ErrInvalidInput} }

// Conversation is one conversation of the server.
type Conversation struct {
	ID        string
	Title     string    // first user text or skill, "" allowed
	CreatedAt time.Time // UTC
	UpdatedAt time.Time // last message/approval/audit touching it
	EndedAt   time.Time // zero while open; DELETE /api/conversations/{id} ends it
}

// Ended reports whether the conversation has ended.
func (c Conversation) Ended() bool { return !c.EndedAt.IsZero() }

// Message is one message of a conversation: user or assistant text, an
// assistant's tool calls, or the result of one tool call.
type Message struct {
	ID           int64 // assigned
	Conversation string
	Role         string // "user" | "assistant" | "tool"
	Text         string // user/assistant text
	// assistant tool calls, as JSON the agent loop owns (may be empty)
	ToolCalls json.RawMessage
	// tool messages (one per tool call / tool_result):
	CallID      string
	Skill       string
	Arguments   json.RawMessage
	OK          bool
	Result      json.RawMessage // the skill's output when OK and it is JSON; otherwise see ResultText
	ResultText  string          // output that is not JSON
	ErrorKind   string
	ErrorDetail string
	Fuel        uint64
	DurationUS  int64
	CreatedAt   time.Time
	// summary messages: the ids of the first and last message summarised,
	// and what the compaction recorded (JSON the agent loop owns).
	CoversFrom, CoversTo int64
	Meta                 json.RawMessage
}

// Approval is one request for the user's approval of a skill call.
type Approval struct {
	ID            string
	Conversation  string
	CallID        string
	Skill         string
	Permission    string
	Arguments     json.RawMessage
	ArgumentsHash string // hex sha256 of canonical JSON, computed by the caller
	Status        string // "pending" | "approved" | "denied" | "expired" | "canceled"
	DecidedBy     string // "" while pending; "user" | "timeout" | "policy" | "canceled"
	RequestedAt   time.Time
	ExpiresAt     time.Time
	DecidedAt     time.Time
	// ModuleSHA256 is the sha256 of the module the user was asked about.
	ModuleSHA256 string
}

// AuditEntry is one row of the audit log: a skill invocation whatever its
// outcome, or (Kind) an approval, an install, a removal, a configuration.
type AuditEntry struct {
	ID            int64 // assigned, increasing
	Time          time.Time
	Kind          string // AuditInvocation when ""; see the Audit* kinds
	Conversation  string // "" for CLI calls
	Skill         string
	Version       string
	ModuleSHA256  string
	ArgumentsHash string
	Outcome       string // "ok" or an error kind of the CLI contract (denied, forbidden, timeout, ...)
	Detail        string // capped at MaxAuditDetailBytes by the store
	Asked         bool   // the user was asked
	Fuel          uint64
	DurationUS    int64
	BytesIn       int64
	BytesOut      int64
	// What the call's host functions touched.
	BytesRead    int64
	BytesWritten int64
	Paths        []string // canonical
	Hosts        []string
	Addresses    []string // ip:port
	// Credentials are the names of the credentials buddy added to the
	// call's requests (schema v8).
	Credentials []string
	// PrevHash and Hash chain the rows (assigned by AppendAudit).
	PrevHash string
	Hash     string
}

func validID(what, id string) error {
	if id == "" {
		return invalid("empty %s id", what)
	}
	if len(id) > MaxConversationIDBytes {
		return invalid("%s id of %d bytes, longer than %d", what, len(id), MaxConversationIDBytes)
	}
	if !utf8.ValidString(id) {
		return invalid("%s id is not valid UTF-8", what)
	}
	return nil
}

// validJSON checks an optional JSON field: empty, or valid JSON.
func validJSON(what string, v json.RawMessage) error {
	if len(v) > 0 && !json.Valid(v) {
		return invalid("%s is not valid JSON", what)
	}
	return nil
}

// capText cuts s to at most n bytes, at a character boundary, ending with "…".
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// nullJSON stores an empty JSON field as NULL.
func nullJSON(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return string(v)
}

func rawJSON(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	return json.RawMessage(v.String)
}

// nullTime stores a zero time as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return unixNanos(t)
}

func timeOrZero(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromUnixNanos(v.Int64)
}

// fuelToDB and fuelFromDB keep a uint64 in SQLite's int64 bit for bit.
func fuelToDB(f uint64) int64   { return int64(f) }
func fuelFromDB(f int64) uint64 { return uint64(f) }

// touch moves a conversation's updated_at forward to at and reports whether the
// conversation exists.
func touch(ctx context.Context, tx execer, op, id string, at time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, sqlTouch, unixNanos(at), id)
	if err != nil {
		return false, dbErr(ctx, op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, dbErr(ctx, op, err)
	}
	return n > 0, nil
}

// CreateConversation records a new conversation. A zero CreatedAt means now, a
// zero UpdatedAt means CreatedAt; EndedAt may be set. An ID already used fails
// with an errs.ErrInvalidInput error wrapping ErrExists, and changes nothing.
// A title longer than MaxTitleBytes is cut.
func (s *Store) CreateConversation(ctx context.Context, c Conversation) error {
	if err := validID("conversation", c.ID); err != nil {
		return err
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.now()
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = c.CreatedAt
	}
	c.Title = s.redactString(c.Title)
	op := fmt.Sprintf("creating conversation %q", c.ID)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, sqlInsertConversation,
			c.ID, capText(c.Title, MaxTitleBytes), unixNanos(c.CreatedAt), unixNanos(c.UpdatedAt), nullTime(c.EndedAt))
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return dbErr(ctx, op, err)
		} else if n == 0 {
			return errs.Wrap(errs.ErrInvalidInput, fmt.Sprintf("conversation %q", c.ID), ErrExists)
		}
		return nil
	})
}

const conversationColumns = `id, title, created_at, updated_at, ended_at`

func scanConversation(r scanner) (Conversation, error) {
	var c Conversation
	var created, updated int64
	var ended sql.NullInt64
	if err := r.Scan(&c.ID, &c.Title, &created, &updated, &ended); err != nil {
		return Conversation{}, err
	}
	c.CreatedAt = fromUnixNanos(created)
	c.UpdatedAt = fromUnixNanos(updated)
	c.EndedAt = timeOrZero(ended)
	return c, nil
}

// GetConversation returns the conversation, or an errs.ErrNotFound error.
func (s *Store) GetConversation(ctx context.Context, id string) (Conversation, error) {
	row := s.readRow(ctx, sqlGetConversation, id)
	c, err := scanConversation(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Conversation{}, notFound("conversation %q", id)
	}
	if err != nil {
		return Conversation{}, dbErr(ctx, fmt.Sprintf("reading conversation %q", id), err)
	}
	return c, nil
}

// ListConversations returns the conversations, the most recently updated
// first; ended ones only when includeEnded.
func (s *Store) ListConversations(ctx context.Context, includeEnded bool) ([]Conversation, error) {
	q := `SELECT ` + conversationColumns + ` FROM conversations`
	if !includeEnded {
		q += ` WHERE ended_at IS NULL`
	}
	q += ` ORDER BY updated_at DESC, created_at DESC, id`
	return query(ctx, s.reader, "listing conversations", scanConversation, q)
}

// EndConversation records that the conversation ended at at (zero: now). Ending
// an ended conversation keeps its first end time and succeeds. It fails with
// errs.ErrNotFound if the conversation does not exist.
func (s *Store) EndConversation(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		at = s.now()
	}
	op := fmt.Sprintf("ending conversation %q", id)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE conversations SET ended_at = coalesce(ended_at, ?) WHERE id = ?`, unixNanos(at), id)
		return affectedOne(ctx, op, res, err, "conversation %q", id)
	})
}

func (m *Message) validate() error {
	if m.Conversation == "" {
		return invalid("message: empty conversation id")
	}
	switch m.Role {
	case RoleUser, RoleAssistant, RoleTool:
	case RoleSummary:
		if m.CoversFrom <= 0 || m.CoversTo < m.CoversFrom {
			return invalid("summary message: covers %d to %d", m.CoversFrom, m.CoversTo)
		}
	default:
		return invalid("message: role %q is not user, assistant, tool or summary", m.Role)
	}
	if err := validJSON("message meta", m.Meta); err != nil {
		return err
	}
	if err := validJSON("message tool calls", m.ToolCalls); err != nil {
		return err
	}
	if err := validJSON("message arguments", m.Arguments); err != nil {
		return err
	}
	return validJSON("message result", m.Result)
}

// AppendMessage appends a message to its conversation and returns its ID (IDs
// increase). A zero CreatedAt means now. The conversation must exist
// (errs.ErrNotFound otherwise); its UpdatedAt moves to the message's time. The
// JSON fields must be empty or valid JSON (errs.ErrInvalidInput). Under a
// Deferred context it returns 0 at once and the context's wait reports the
// write.
func (s *Store) AppendMessage(ctx context.Context, m Message) (int64, error) {
	if err := m.validate(); err != nil {
		return 0, err
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.now()
	}
	m.Text, m.ResultText, m.ErrorDetail = s.redactString(m.Text), s.redactString(m.ResultText), s.redactString(m.ErrorDetail)
	m.ToolCalls, m.Arguments, m.Result, m.Meta = s.redactJSON(m.ToolCalls), s.redactJSON(m.Arguments), s.redactJSON(m.Result), s.redactJSON(m.Meta)
	op := fmt.Sprintf("appending a message to conversation %q", m.Conversation)
	var id int64
	deferred, err := s.writeBehind(ctx, op, func(ctx context.Context, tx txn) error {
		if ok, err := touch(ctx, tx, op, m.Conversation, m.CreatedAt); err != nil {
			return err
		} else if !ok {
			return notFound("conversation %q", m.Conversation)
		}
		var err error
		id, err = insertID(ctx, tx, op, sqlInsertMessage,
			m.Conversation, m.Role, m.Text, nullJSON(m.ToolCalls),
			m.CallID, m.Skill, nullJSON(m.Arguments), m.OK, nullJSON(m.Result), m.ResultText, m.ErrorKind, m.ErrorDetail,
			fuelToDB(m.Fuel), m.DurationUS, unixNanos(m.CreatedAt), m.CoversFrom, m.CoversTo, nullJSON(m.Meta))
		return err
	})
	if err != nil || deferred {
		return 0, err
	}
	return id, nil
}

// messageColumns are the columns scanMessage reads.
const messageColumns = `id, conversation, role, text, tool_calls, call_id, skill, arguments, ok, result,
	result_text, error_kind, error_detail, fuel, duration_us, created_at, covers_from, covers_to, meta`

func scanMessage(r scanner) (Message, error) {
	var m Message
	var toolCalls, args, result, meta sql.NullString
	var fuel, created int64
	err := r.Scan(&m.ID, &m.Conversation, &m.Role, &m.Text, &toolCalls, &m.CallID, &m.Skill, &args,
		&m.OK, &result, &m.ResultText, &m.ErrorKind, &m.ErrorDetail, &fuel, &m.DurationUS, &created,
		&m.CoversFrom, &m.CoversTo, &meta)
	if err != nil {
		return Message{}, err
	}
	m.ToolCalls, m.Arguments, m.Result, m.Meta = rawJSON(toolCalls), rawJSON(args), rawJSON(result), rawJSON(meta)
	m.Fuel = fuelFromDB(fuel)
	m.CreatedAt = fromUnixNanos(created)
	return m, nil
}

// Messages returns the messages of a conversation in the order they were
// appended; none (and no error) for an unknown conversation.
func (s *Store) Messages(ctx context.Context, conversation string) ([]Message, error) {
	return s.MessagesAfter(ctx, conversation, 0)
}

// MessagesAfter returns the messages of a conversation whose ids are above
// after, in order: what was appended since a caller last read it.
func (s *Store) MessagesAfter(ctx context.Context, conversation string, after int64) ([]Message, error) {
	return query(ctx, s.reader, fmt.Sprintf("reading the messages of conversation %q", conversation), scanMessage,
		`SELECT `+messageColumns+` FROM messages WHERE conversation = ? AND id > ? ORDER BY id`, conversation, after)
}

func validDecision(status, decidedBy string) error {
	switch status {
	case ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalCanceled:
	default:
		return invalid("approval status %q is not approved, denied, expired or canceled", status)
	}
	switch decidedBy {
	case DecidedByUser, DecidedByTimeout, DecidedByPolicy, DecidedByCanceled:
	default:
		return invalid("approval decided by %q, not user, timeout, policy or canceled", decidedBy)
	}
	return nil
}

// InsertApproval records an approval request. Status empty means pending, a
// zero RequestedAt means now; an approval may be inserted already decided (by
// policy, say), with its DecidedBy. The conversation must exist
// (errs.ErrNotFound); an ID already used fails with an errs.ErrInvalidInput error
// wrapping ErrExists.
func (s *Store) InsertApproval(ctx context.Context, a Approval) error {
	if err := validID("approval", a.ID); err != nil {
		return err
	}
	if a.Conversation == "" {
		return invalid("approval %q: empty conversation id", a.ID)
	}
	if a.Skill == "" {
		return invalid("approval %q: empty skill", a.ID)
	}
	a.Arguments = s.redactJSON(a.Arguments)
	if err := validJSON("approval arguments", a.Arguments); err != nil {
		return err
	}
	if a.Status == "" {
		a.Status = ApprovalPending
	}
	if a.RequestedAt.IsZero() {
		a.RequestedAt = s.now()
	}
	if a.Status == ApprovalPending {
		if a.DecidedBy != "" || !a.DecidedAt.IsZero() {
			return invalid("approval %q: pending, yet decided by %q", a.ID, a.DecidedBy)
		}
	} else {
		if err := validDecision(a.Status, a.DecidedBy); err != nil {
			return err
		}
		if a.DecidedAt.IsZero() {
			a.DecidedAt = a.RequestedAt
		}
	}
	op := fmt.Sprintf("recording approval %q", a.ID)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		if ok, err := touch(ctx, tx, op, a.Conversation, a.RequestedAt); err != nil {
			return err
		} else if !ok {
			return notFound("conversation %q", a.Conversation)
		}
		res, err := tx.ExecContext(ctx, sqlInsertApproval,
			a.ID, a.Conversation, a.CallID, a.Skill, a.Permission, nullJSON(a.Arguments), a.ArgumentsHash,
			a.Status, a.DecidedBy, unixNanos(a.RequestedAt), nullTime(a.ExpiresAt), nullTime(a.DecidedAt), a.ModuleSHA256)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return dbErr(ctx, op, err)
		} else if n == 0 {
			return errs.Wrap(errs.ErrInvalidInput, fmt.Sprintf("approval %q", a.ID), ErrExists)
		}
		return nil
	})
}

// DecideApproval decides a pending approval: status approved, denied, expired
// or canceled, decidedBy user, timeout, policy or canceled, at at (zero: now).
// It fails with errs.ErrNotFound if the approval does not exist, and with a
// *DecidedError (errors.Is ErrDecided) if it is no longer pending: of racing
// decisions exactly one succeeds.
//
// A decision other than expired or canceled made after the approval's ExpiresAt
// is too late: the approval is recorded as expired (by timeout) instead, and
// the *DecidedError says so. A late "yes" never counts.
func (s *Store) DecideApproval(ctx context.Context, id, status, decidedBy string, at time.Time) error {
	if err := validDecision(status, decidedBy); err != nil {
		return err
	}
	if at.IsZero() {
		at = s.now()
	}
	op := fmt.Sprintf("deciding approval %q", id)
	var late *DecidedError
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		var conv, cur, by string
		var expires, decided sql.NullInt64
		err := tx.QueryRowContext(ctx, sqlApprovalState, id).Scan(&conv, &cur, &by, &expires, &decided)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("approval %q", id)
		}
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if cur != ApprovalPending {
			return &DecidedError{ID: id, Status: cur, DecidedBy: by, DecidedAt: timeOrZero(decided)}
		}
		if status != ApprovalExpired && status != ApprovalCanceled && expires.Valid && unixNanos(at) > expires.Int64 {
			status, decidedBy = ApprovalExpired, DecidedByTimeout
			late = &DecidedError{ID: id, Status: status, DecidedBy: decidedBy, DecidedAt: at.UTC()}
		}
		if _, err := tx.ExecContext(ctx, sqlDecideApproval, status, decidedBy, unixNanos(at), id); err != nil {
			return dbErr(ctx, op, err)
		}
		_, err = touch(ctx, tx, op, conv, at)
		return err
	})
	if err != nil {
		return err
	}
	if late != nil {
		return late
	}
	return nil
}

const approvalColumns = `id, conversation, call_id, skill, permission, arguments, arguments_hash,
	status, decided_by, requested_at, expires_at, decided_at, module_sha256`

func scanApproval(r scanner) (Approval, error) {
	var a Approval
	var args sql.NullString
	var requested int64
	var expires, decided sql.NullInt64
	err := r.Scan(&a.ID, &a.Conversation, &a.CallID, &a.Skill, &a.Permission, &args, &a.ArgumentsHash,
		&a.Status, &a.DecidedBy, &requested, &expires, &decided, &a.ModuleSHA256)
	if err != nil {
		return Approval{}, err
	}
	a.Arguments = rawJSON(args)
	a.RequestedAt = fromUnixNanos(requested)
	a.ExpiresAt = timeOrZero(expires)
	a.DecidedAt = timeOrZero(decided)
	return a, nil
}

// GetApproval returns the approval, or an errs.ErrNotFound error.
func (s *Store) GetApproval(ctx context.Context, id string) (Approval, error) {
	row := s.readRow(ctx, sqlGetApproval, id)
	a, err := scanApproval(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, notFound("approval %q", id)
	}
	if err != nil {
		return Approval{}, dbErr(ctx, fmt.Sprintf("reading approval %q", id), err)
	}
	return a, nil
}

// Approvals returns the approvals of a conversation in the order they were
// requested; none (and no error) for an unknown conversation.
func (s *Store) Approvals(ctx context.Context, conversation string) ([]Approval, error) {
	return query(ctx, s.reader, fmt.Sprintf("reading the approvals of conversation %q", conversation), scanApproval,
		`SELECT `+approvalColumns+` FROM approvals WHERE conversation = ? ORDER BY requested_at, rowid`, conversation)
}

// ExpirePendingApprovals marks every pending approval expired, decided by
// timeout at at (zero: now), and returns how many there were. The server calls
// it at startup and shutdown: nobody is waiting for those answers any more. It
// does not move the conversations' UpdatedAt: a restart is not activity.
func (s *Store) ExpirePendingApprovals(ctx context.Context, at time.Time) (int, error) {
	if at.IsZero() {
		at = s.now()
	}
	op := "expiring pending approvals"
	var n int64
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?
			WHERE status = 'pending'`, ApprovalExpired, DecidedByTimeout, unixNanos(at))
		if err != nil {
			return dbErr(ctx, op, err)
		}
		n, err = res.RowsAffected()
		if err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
	return int(n), err
}

// query runs a query and scans every row with scan.
func query[T any](ctx context.Context, db *sql.DB, op string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	return queryOn(ctx, db, op, scan, q, args...)
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// queryOn runs a query on db or tx and scans every row with scan.
func queryOn[T any](ctx context.Context, on querier, op string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := on.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbErr(ctx, op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, dbErr(ctx, op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(ctx, op, err)
	}
	return out, nil
}

// LastSummary returns the conversation's latest summary message; ok is false
// when it has none.
func (s *Store) LastSummary(ctx context.Context, conversation string) (m Message, ok bool, err error) {
	rows, err := query(ctx, s.reader, fmt.Sprintf("reading the summary of conversation %q", conversation), scanMessage,
		`SELECT `+messageColumns+` FROM messages WHERE conversation = ? AND role = 'summary' ORDER BY id DESC LIMIT 1`, conversation)
	if err != nil || len(rows) == 0 {
		return Message{}, false, err
	}
	return rows[0], true, nil
}
