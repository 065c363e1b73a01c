package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Scheduled jobs (schema v7): what internal/scheduler keeps. The store knows
// rows, not schedules: the scheduler computes next_run, and the store makes
// sure that of several processes on one database only one runs a due job
// (ClaimJob) and that a run's result and its message in the job's
// conversation are committed together (FinishJob).

// Kinds of job.
const (
	JobReminder  = "reminder"
	JobCheck     = "check"
	JobHeartbeat = "heartbeat"
)

// ErrLeaseLost is matched (errors.Is) by FinishJob's and RenewJobLease's
// error when the job is no longer leased by the caller: it was removed, or
// its lease ran out and another process claimed it.
var ErrLeaseLost = errors.New("the job's lease was lost")

// Job is one scheduled job.
type Job struct {
	ID   string
	Kind string // JobReminder, JobCheck or JobHeartbeat
	// Exactly one of At, Every and Cron is set.
	At    time.Time
	Every time.Duration
	Cron  string
	// Text is a reminder's text or a check's prompt.
	Text         string
	Conversation string
	CreatedBy    string // "cli", "api", "skill", "config"
	CreatedAt    time.Time
	// NextRun is when it is next due; zero once a one-shot job has run.
	NextRun    time.Time
	LastRun    time.Time
	LastStatus string
	LastDetail string
	Runs       int64
	LeaseOwner string
	LeaseUntil time.Time
	// BlockedCap is the budget cap that stopped the job ("" when none),
	// BlockedLimit its value then, BlockedUntil the end of its period.
	BlockedCap   string
	BlockedLimit float64
	BlockedUntil time.Time
}

const jobColumns = `id, kind, at, every_ns, cron, text, conversation, created_by, created_at, next_run,
	last_run, last_status, last_detail, runs, lease_owner, lease_until, blocked_cap, blocked_limit, blocked_until`

// InsertJob stores a new job and, when title is not "", creates its
// conversation (j.Conversation) in the same transaction.
func (s *Store) InsertJob(ctx context.Context, j Job, title string) error {
	if j.ID == "" || j.Kind == "" {
		return invalid("job: empty id or kind")
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = s.now()
	}
	op := fmt.Sprintf("storing job %q", j.ID)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		if title != "" && j.Conversation != "" {
			if _, err := tx.ExecContext(ctx, sqlInsertConversation, j.Conversation, capText(title, MaxTitleBytes),
				unixNanos(j.CreatedAt), unixNanos(j.CreatedAt), nil); err != nil {
				return dbErr(ctx, op, err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO jobs (`+jobColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			jobArgs(j)...)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
}

// PutJob stores j, replacing the job with its id if there is one but keeping
// that job's run history and lease (the heartbeat, whose schedule comes from
// buddy.toml). A changed schedule takes j.NextRun; an unchanged one keeps the
// stored next_run. title creates the conversation if needed.
func (s *Store) PutJob(ctx context.Context, j Job, title string) error {
	if j.CreatedAt.IsZero() {
		j.CreatedAt = s.now()
	}
	op := fmt.Sprintf("storing job %q", j.ID)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		if title != "" && j.Conversation != "" {
			if _, err := tx.ExecContext(ctx, sqlInsertConversation, j.Conversation, capText(title, MaxTitleBytes),
				unixNanos(j.CreatedAt), unixNanos(j.CreatedAt), nil); err != nil {
				return dbErr(ctx, op, err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO jobs (`+jobColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET
				next_run = CASE WHEN jobs.every_ns = excluded.every_ns AND jobs.cron = excluded.cron AND jobs.at = excluded.at
					AND jobs.next_run IS NOT NULL THEN jobs.next_run ELSE excluded.next_run END,
				kind = excluded.kind, at = excluded.at, every_ns = excluded.every_ns, cron = excluded.cron,
				text = excluded.text, conversation = excluded.conversation`, jobArgs(j)...)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
}

func jobArgs(j Job) []any {
	return []any{j.ID, j.Kind, nanosOrZero(j.At), int64(j.Every), j.Cron, j.Text, j.Conversation, j.CreatedBy,
		unixNanos(j.CreatedAt), nullTime(j.NextRun), nanosOrZero(j.LastRun), j.LastStatus, j.LastDetail, j.Runs,
		j.LeaseOwner, nanosOrZero(j.LeaseUntil), j.BlockedCap, j.BlockedLimit, nanosOrZero(j.BlockedUntil)}
}

// GetJob returns a job (errs.ErrNotFound when there is none).
func (s *Store) GetJob(ctx context.Context, id string) (Job, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id)
	if err != nil {
		return Job{}, dbErr(ctx, "reading job "+id, err)
	}
	js, err := scanJobs(ctx, rows)
	if err != nil {
		return Job{}, err
	}
	if len(js) == 0 {
		return Job{}, notFound("no job %q", id)
	}
	return js[0], nil
}

// ListJobs returns every job, those due first (then by creation), one-shot
// jobs that have run last.
func (s *Store) ListJobs(ctx context.Context) ([]Job, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs
		ORDER BY next_run IS NULL, next_run, created_at, id`)
	if err != nil {
		return nil, dbErr(ctx, "listing jobs", err)
	}
	return scanJobs(ctx, rows)
}

// DueJobs returns the jobs due at now that no live lease holds.
func (s *Store) DueJobs(ctx context.Context, now time.Time) ([]Job, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE next_run IS NOT NULL AND next_run <= ? AND (lease_owner = '' OR lease_until <= ?)
		ORDER BY next_run, id`, unixNanos(now), unixNanos(now))
	if err != nil {
		return nil, dbErr(ctx, "listing due jobs", err)
	}
	return scanJobs(ctx, rows)
}

// NextDue is the earliest next_run of any job (ok false when none is
// scheduled). A leased job counts at its lease's end.
func (s *Store) NextDue(ctx context.Context) (t time.Time, ok bool, err error) {
	var n sql.NullInt64
	err = s.reader.QueryRowContext(ctx, `SELECT min(CASE WHEN lease_owner = '' THEN next_run ELSE max(next_run, lease_until) END)
		FROM jobs WHERE next_run IS NOT NULL`).Scan(&n)
	if err != nil {
		return time.Time{}, false, dbErr(ctx, "reading the next due job", err)
	}
	if !n.Valid {
		return time.Time{}, false, nil
	}
	return fromUnixNanos(n.Int64), true, nil
}

// DeleteJob removes a job (errs.ErrNotFound when there is none). Its
// conversation stays.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	op := fmt.Sprintf("removing job %q", id)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = ?`, id)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return dbErr(ctx, op, err)
		} else if n == 0 {
			return notFound("no job %q", id)
		}
		return nil
	})
}

// ClaimJob leases a job due at due to owner until until, if it is still due
// then (next_run = due) and no live lease holds it at now. Of several
// processes claiming the same run, exactly one gets true: the statement is
// one write under SQLite's single-writer lock.
func (s *Store) ClaimJob(ctx context.Context, id, owner string, due, now, until time.Time) (bool, error) {
	op := fmt.Sprintf("claiming job %q", id)
	var claimed bool
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET lease_owner = ?, lease_until = ?
			WHERE id = ? AND next_run = ? AND (lease_owner = '' OR lease_until <= ?)`,
			owner, unixNanos(until), id, unixNanos(due), unixNanos(now))
		if err != nil {
			return dbErr(ctx, op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return dbErr(ctx, op, err)
		}
		claimed = n == 1
		return nil
	})
	return claimed, err
}

// RenewJobLease extends owner's lease of a job (a long check); it fails
// with ErrLeaseLost when owner no longer holds it.
func (s *Store) RenewJobLease(ctx context.Context, id, owner string, until time.Time) error {
	op := fmt.Sprintf("renewing the lease of job %q", id)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_owner = ?`,
			unixNanos(until), id, owner)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return dbErr(ctx, op, err)
		} else if n == 0 {
			return fmt.Errorf("%s: %w", op, ErrLeaseLost)
		}
		return nil
	})
}

// JobRun is how a run of a job ended (FinishJob).
type JobRun struct {
	ID, Owner string
	// NextRun is when the job is next due; zero: never (a one-shot job).
	NextRun time.Time
	Ran     time.Time
	Status  string
	Detail  string
	// Counted says the run counts in the job's runs (a run skipped because
	// of a budget does not).
	Counted bool
	// Block records (or, zero, clears) the budget that stopped the job.
	BlockedCap   string
	BlockedLimit float64
	BlockedUntil time.Time
	// Message, when set, is appended to the job's conversation in the same
	// transaction: a reminder is delivered to the conversation exactly once.
	Message *Message
}

// FinishJob records the end of a run owner claimed and releases the lease,
// with the run's message if any, in one transaction. It fails with
// ErrLeaseLost (and changes nothing) when owner no longer holds the job.
func (s *Store) FinishJob(ctx context.Context, r JobRun) (int64, error) {
	if r.Message != nil {
		if err := r.Message.validate(); err != nil {
			return 0, err
		}
		if r.Message.CreatedAt.IsZero() {
			r.Message.CreatedAt = s.now()
		}
	}
	op := fmt.Sprintf("finishing a run of job %q", r.ID)
	var msgID int64
	counted := 0
	if r.Counted {
		counted = 1
	}
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET next_run = ?, last_run = ?, last_status = ?, last_detail = ?,
				runs = runs + ?, lease_owner = '', lease_until = 0, blocked_cap = ?, blocked_limit = ?, blocked_until = ?
			WHERE id = ? AND lease_owner = ?`,
			nullTime(r.NextRun), unixNanos(r.Ran), r.Status, capText(r.Detail, MaxAuditDetailBytes), counted,
			r.BlockedCap, r.BlockedLimit, nanosOrZero(r.BlockedUntil), r.ID, r.Owner)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return dbErr(ctx, op, err)
		} else if n == 0 {
			return fmt.Errorf("%s: %w", op, ErrLeaseLost)
		}
		if m := r.Message; m != nil {
			if ok, err := touch(ctx, tx, op, m.Conversation, m.CreatedAt); err != nil {
				return err
			} else if !ok {
				return notFound("conversation %q", m.Conversation)
			}
			msgID, err = insertID(ctx, tx, op, sqlInsertMessage,
				m.Conversation, m.Role, m.Text, nullJSON(m.ToolCalls),
				m.CallID, m.Skill, nullJSON(m.Arguments), m.OK, nullJSON(m.Result), m.ResultText, m.ErrorKind, m.ErrorDetail,
				fuelToDB(m.Fuel), m.DurationUS, unixNanos(m.CreatedAt), m.CoversFrom, m.CoversTo, nullJSON(m.Meta))
			return err
		}
		return nil
	})
	return msgID, err
}

// ConversationUsageSince sums the usage of one conversation's requests at or
// after since (a job's spend today).
func (s *Store) ConversationUsageSince(ctx context.Context, conversation string, since time.Time) (UsageTotals, error) {
	return s.usageTotals(ctx, fmt.Sprintf("reading the usage of conversation %q", conversation),
		`WHERE conversation = ? AND time >= ?`, conversation, unixNanos(since))
}

func scanJobs(ctx context.Context, rows *sql.Rows) ([]Job, error) {
	defer rows.Close()
	var out []Job
	for rows.Next() {
		var j Job
		var at, every, created, last, lease, blocked int64
		var next sql.NullInt64
		if err := rows.Scan(&j.ID, &j.Kind, &at, &every, &j.Cron, &j.Text, &j.Conversation, &j.CreatedBy, &created, &next,
			&last, &j.LastStatus, &j.LastDetail, &j.Runs, &j.LeaseOwner, &lease, &j.BlockedCap, &j.BlockedLimit, &blocked); err != nil {
			return nil, dbErr(ctx, "reading jobs", err)
		}
		j.At, j.Every, j.CreatedAt = zeroOrTime(at), time.Duration(every), fromUnixNanos(created)
		if next.Valid {
			j.NextRun = fromUnixNanos(next.Int64)
		}
		j.LastRun, j.LeaseUntil, j.BlockedUntil = zeroOrTime(last), zeroOrTime(lease), zeroOrTime(blocked)
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(ctx, "reading jobs", err)
	}
	return out, nil
}

func nanosOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return unixNanos(t)
}

func zeroOrTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return fromUnixNanos(n)
}
