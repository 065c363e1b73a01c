package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// The chat channels' state (schema v9; internal/front/channels): the inbox
// of updates received, the cursor that acknowledges them, the outbox of
// messages to send, the conversation of each chat, and pairing. Every write
// is durable before it returns, as every other write of the store.

// Inbox states.
const (
	InboxNew     = "new"     // stored, not yet handled
	InboxRunning = "running" // a turn started on it
	InboxDone    = "done"    // handled
	InboxRefused = "refused" // from a sender not allowed: nothing of it reached the agent
)

// Outbox states.
const (
	OutboxPending = "pending" // to send, or to bring up to date (a streamed answer)
	OutboxDone    = "done"    // the platform confirmed its final body
	OutboxFailed  = "failed"  // the platform refused it for good
)

// Pairing statuses.
const (
	PairingPending = "pending"
	PairingPaired  = "paired"
	PairingExpired = "expired"
	PairingRevoked = "revoked"
)

// Bounds of channel rows.
const (
	maxChannelName  = 64
	maxChannelID    = 256 // a chat, user, update or message id
	maxChannelEvent = 1 << 20
	maxChannelBody  = 1 << 20
	maxChannelNote  = 1024
)

// ErrTooManyPairings is wrapped by RequestPairing's error when the channel
// already has as many pending pairing codes as allowed.
var ErrTooManyPairings = errors.New("too many pending pairing codes")

// ChannelEvent is one update as a channel's adapter parsed it.
type ChannelEvent struct {
	Chat     string
	UpdateID string
	Event    json.RawMessage // the adapter's event, JSON
}

// InboxItem is one stored update.
type InboxItem struct {
	Seq        int64 // the order updates were received in
	Channel    string
	Chat       string
	UpdateID   string
	Event      json.RawMessage
	State      string
	Note       string
	ReceivedAt time.Time
	StartedAt  time.Time // zero unless running or finished after running
	DoneAt     time.Time
}

func validChannelID(what, v string) error {
	switch {
	case v == "":
		return invalid("channel %s is empty", what)
	case len(v) > maxChannelID:
		return invalid("channel %s of %d bytes is over %d", what, len(v), maxChannelID)
	case !utf8.ValidString(v):
		return invalid("channel %s is not UTF-8", what)
	}
	return nil
}

func validChannel(name string) error {
	if name == "" || len(name) > maxChannelName || !utf8.ValidString(name) {
		return invalid("channel name %q must be 1 to %d bytes of UTF-8", name, maxChannelName)
	}
	return nil
}

// ChannelCursor is the cursor a channel's next poll starts from ("" before
// the first update).
func (s *Store) ChannelCursor(ctx context.Context, channel string) (string, error) {
	var c string
	err := s.reader.QueryRowContext(ctx, `SELECT cursor FROM channel_cursors WHERE channel = ?`, channel).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", dbErr(ctx, fmt.Sprintf("reading the cursor of channel %q", channel), err)
	}
	return c, nil
}

// ReceiveChannelUpdates stores the updates of one poll (or one webhook
// delivery) and the cursor that acknowledges them, in one transaction: an
// update is acknowledged only once it is stored. An update already stored
// (the same chat and update id: a poll repeated after a crash) is not stored
// again; added is the ones that were new, in order. cursor "" keeps the
// stored one.
func (s *Store) ReceiveChannelUpdates(ctx context.Context, channel string, events []ChannelEvent, cursor string) (added []InboxItem, err error) {
	if err := validChannel(channel); err != nil {
		return nil, err
	}
	for _, e := range events {
		if err := validChannelID("chat", e.Chat); err != nil {
			return nil, err
		}
		if err := validChannelID("update id", e.UpdateID); err != nil {
			return nil, err
		}
		if len(e.Event) > maxChannelEvent || !json.Valid(e.Event) {
			return nil, invalid("channel %q: the event of update %q is not JSON of at most %d bytes", channel, e.UpdateID, maxChannelEvent)
		}
	}
	if len(cursor) > maxChannelID || !utf8.ValidString(cursor) {
		return nil, invalid("channel %q: cursor of %d bytes", channel, len(cursor))
	}
	if len(events) == 0 && cursor == "" {
		return nil, nil
	}
	now := s.now()
	op := fmt.Sprintf("storing the updates of channel %q", channel)
	err = s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		added = added[:0]
		for _, e := range events {
			res, err := tx.ExecContext(ctx, `INSERT INTO channel_inbox (channel, chat, update_id, event, state, received_at)
				VALUES (?, ?, ?, ?, 'new', ?) ON CONFLICT (channel, chat, update_id) DO NOTHING`,
				channel, e.Chat, e.UpdateID, string(e.Event), unixNanos(now))
			if err != nil {
				return dbErr(ctx, op, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return dbErr(ctx, op, err)
			} else if n == 0 {
				continue
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return dbErr(ctx, op, err)
			}
			added = append(added, InboxItem{Seq: seq, Channel: channel, Chat: e.Chat, UpdateID: e.UpdateID,
				Event: e.Event, State: InboxNew, ReceivedAt: now.UTC()})
		}
		if cursor != "" {
			if _, err := tx.ExecContext(ctx, `INSERT INTO channel_cursors (channel, cursor, updated_at) VALUES (?, ?, ?)
				ON CONFLICT (channel) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at`,
				channel, cursor, unixNanos(now)); err != nil {
				return dbErr(ctx, op, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

const inboxColumns = `seq, channel, chat, update_id, event, state, note, received_at, started_at, done_at`

func scanInbox(r scanner) (InboxItem, error) {
	var it InboxItem
	var event string
	var received int64
	var started, done sql.NullInt64
	if err := r.Scan(&it.Seq, &it.Channel, &it.Chat, &it.UpdateID, &event, &it.State, &it.Note, &received, &started, &done); err != nil {
		return InboxItem{}, err
	}
	it.Event = json.RawMessage(event)
	it.ReceivedAt = fromUnixNanos(received)
	it.StartedAt = timeOrZero(started)
	it.DoneAt = timeOrZero(done)
	return it, nil
}

// OpenInbox returns a channel's updates not yet handled (new or running),
// in the order they were received.
func (s *Store) OpenInbox(ctx context.Context, channel string) ([]InboxItem, error) {
	return query(ctx, s.reader, fmt.Sprintf("reading the inbox of channel %q", channel), scanInbox,
		`SELECT `+inboxColumns+` FROM channel_inbox WHERE channel = ? AND state IN ('new', 'running') ORDER BY seq`, channel)
}

// Inbox returns a channel's last limit updates, newest first (for tests and
// diagnostics).
func (s *Store) Inbox(ctx context.Context, channel string, limit int) ([]InboxItem, error) {
	if limit <= 0 {
		limit = 100
	}
	return query(ctx, s.reader, fmt.Sprintf("reading the inbox of channel %q", channel), scanInbox,
		`SELECT `+inboxColumns+` FROM channel_inbox WHERE channel = ? ORDER BY seq DESC LIMIT ?`, channel, limit)
}

// SetInboxState moves a stored update to state (running, done or refused),
// with a note saying why. forget replaces its event by {}: what a refused
// sender wrote is not kept.
func (s *Store) SetInboxState(ctx context.Context, seq int64, state, note string, forget bool) error {
	switch state {
	case InboxRunning, InboxDone, InboxRefused:
	default:
		return invalid("inbox state %q", state)
	}
	now := unixNanos(s.now())
	op := fmt.Sprintf("marking inbox update %d %s", seq, state)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		q := `UPDATE channel_inbox SET state = ?, note = ?, done_at = ? WHERE seq = ?`
		args := []any{state, capText(note, maxChannelNote), now, seq}
		switch {
		case state == InboxRunning:
			q = `UPDATE channel_inbox SET state = ?, note = ?, started_at = ? WHERE seq = ?`
		case forget:
			q = `UPDATE channel_inbox SET state = ?, note = ?, done_at = ?, event = '{}' WHERE seq = ?`
		}
		res, err := tx.ExecContext(ctx, q, args...)
		return affectedOne(ctx, op, res, err, "no inbox update %d", seq)
	})
}

// InboxBacklog is how many of a channel's updates wait to be handled, and
// when the oldest of them was received (zero when none waits).
func (s *Store) InboxBacklog(ctx context.Context, channel string) (n int, oldest time.Time, err error) {
	var first sql.NullInt64
	err = s.reader.QueryRowContext(ctx, `SELECT count(*), min(received_at) FROM channel_inbox
		WHERE channel = ? AND state IN ('new', 'running')`, channel).Scan(&n, &first)
	if err != nil {
		return 0, time.Time{}, dbErr(ctx, fmt.Sprintf("reading the inbox of channel %q", channel), err)
	}
	return n, timeOrZero(first), nil
}

// PruneChannelInbox deletes a channel's updates handled before before. Their
// cursor is past them: the platform never sends them again.
func (s *Store) PruneChannelInbox(ctx context.Context, channel string, before time.Time) (int, error) {
	op := fmt.Sprintf("pruning the inbox of channel %q", channel)
	var n int64
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM channel_inbox WHERE channel = ? AND state IN ('done', 'refused') AND done_at < ?`,
			channel, unixNanos(before))
		if err != nil {
			return dbErr(ctx, op, err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// OutboxItem is one message to a chat.
type OutboxItem struct {
	ID      int64
	Channel string
	Chat    string
	// Kind says what it is (the channels package's: an answer, an approval
	// question, a notice); Ref what it belongs to (an approval id).
	Kind, Ref string
	// Body is what the message should show (JSON the channels package
	// owns); Final says it will not change any more.
	Body  json.RawMessage
	Final bool
	// MessageID is the platform's id once sent; SentHash the sha256 of the
	// body the platform last confirmed.
	MessageID string
	SentHash  string
	State     string
	Attempts  int
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
	SentAt    time.Time
}

// BodyHash is the hash an outbox row's SentHash is compared with.
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// InSync reports whether the platform shows the row's body.
func (it OutboxItem) InSync() bool { return it.MessageID != "" && it.SentHash == BodyHash(it.Body) }

const outboxColumns = `id, channel, chat, kind, ref, body, final, message_id, sent_hash, state, attempts, error, created_at, updated_at, sent_at`

func scanOutbox(r scanner) (OutboxItem, error) {
	var it OutboxItem
	var body string
	var final int
	var created, updated int64
	var sent sql.NullInt64
	if err := r.Scan(&it.ID, &it.Channel, &it.Chat, &it.Kind, &it.Ref, &body, &final, &it.MessageID, &it.SentHash,
		&it.State, &it.Attempts, &it.Error, &created, &updated, &sent); err != nil {
		return OutboxItem{}, err
	}
	it.Body = json.RawMessage(body)
	it.Final = final != 0
	it.CreatedAt = fromUnixNanos(created)
	it.UpdatedAt = fromUnixNanos(updated)
	it.SentAt = timeOrZero(sent)
	return it, nil
}

// EnqueueOutbox stores a message to send (state pending) and returns its id.
func (s *Store) EnqueueOutbox(ctx context.Context, it OutboxItem) (int64, error) {
	if err := validChannel(it.Channel); err != nil {
		return 0, err
	}
	if err := validChannelID("chat", it.Chat); err != nil {
		return 0, err
	}
	if len(it.Body) > maxChannelBody || !json.Valid(it.Body) {
		return 0, invalid("outbox body is not JSON of at most %d bytes", maxChannelBody)
	}
	if it.Kind == "" || len(it.Kind) > 64 || len(it.Ref) > maxChannelID {
		return 0, invalid("outbox kind %q or ref of %d bytes", it.Kind, len(it.Ref))
	}
	now := unixNanos(s.now())
	op := fmt.Sprintf("queueing a message to chat %q of channel %q", it.Chat, it.Channel)
	var id int64
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		var err error
		id, err = insertID(ctx, tx, op, `INSERT INTO channel_outbox (channel, chat, kind, ref, body, final, state, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`, it.Channel, it.Chat, it.Kind, it.Ref, string(it.Body), boolInt(it.Final), now, now)
		return err
	})
	return id, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// UpdateOutbox changes what a message should show (a streamed answer that
// grew, an approval question answered); a message done or failed is
// pending again, to be edited.
func (s *Store) UpdateOutbox(ctx context.Context, id int64, body json.RawMessage, final bool) error {
	if len(body) > maxChannelBody || !json.Valid(body) {
		return invalid("outbox body is not JSON of at most %d bytes", maxChannelBody)
	}
	now := unixNanos(s.now())
	op := fmt.Sprintf("updating outbox message %d", id)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE channel_outbox SET body = ?, final = ?, updated_at = ?,
			state = CASE WHEN state = 'failed' AND message_id = '' THEN 'failed' ELSE 'pending' END WHERE id = ?`,
			string(body), boolInt(final), now, id)
		return affectedOne(ctx, op, res, err, "no outbox message %d", id)
	})
}

// PendingOutbox returns a channel's messages to send or bring up to date,
// oldest first.
func (s *Store) PendingOutbox(ctx context.Context, channel string) ([]OutboxItem, error) {
	return query(ctx, s.reader, fmt.Sprintf("reading the outbox of channel %q", channel), scanOutbox,
		`SELECT `+outboxColumns+` FROM channel_outbox WHERE channel = ? AND state = 'pending' ORDER BY id`, channel)
}

// Outbox returns one message.
func (s *Store) Outbox(ctx context.Context, id int64) (OutboxItem, error) {
	rows, err := query(ctx, s.reader, fmt.Sprintf("reading outbox message %d", id), scanOutbox,
		`SELECT `+outboxColumns+` FROM channel_outbox WHERE id = ?`, id)
	if err != nil {
		return OutboxItem{}, err
	}
	if len(rows) == 0 {
		return OutboxItem{}, notFound("no outbox message %d", id)
	}
	return rows[0], nil
}

// OutboxSent returns a channel's messages of a chat ("" for every chat),
// oldest first (for tests and diagnostics).
func (s *Store) OutboxSent(ctx context.Context, channel, chat string) ([]OutboxItem, error) {
	return query(ctx, s.reader, fmt.Sprintf("reading the outbox of channel %q", channel), scanOutbox,
		`SELECT `+outboxColumns+` FROM channel_outbox WHERE channel = ? AND (? = '' OR chat = ?) ORDER BY id`, channel, chat, chat)
}

// OpenOutboxRefs returns a channel's messages of a kind that are not final
// (questions left open by an earlier run).
func (s *Store) OpenOutboxRefs(ctx context.Context, channel, kind string) ([]OutboxItem, error) {
	return query(ctx, s.reader, fmt.Sprintf("reading the outbox of channel %q", channel), scanOutbox,
		`SELECT `+outboxColumns+` FROM channel_outbox WHERE channel = ? AND kind = ? AND final = 0 ORDER BY id`, channel, kind)
}

// NoteOutboxAttempt counts an attempt to send a message, before it is made.
func (s *Store) NoteOutboxAttempt(ctx context.Context, id int64) error {
	op := fmt.Sprintf("counting an attempt of outbox message %d", id)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE channel_outbox SET attempts = attempts + 1 WHERE id = ?`, id)
		return affectedOne(ctx, op, res, err, "no outbox message %d", id)
	})
}

// ConfirmOutbox records that the platform shows body as message messageID:
// the message is done when that body is its final one.
func (s *Store) ConfirmOutbox(ctx context.Context, id int64, messageID string, body json.RawMessage) error {
	if err := validChannelID("message id", messageID); err != nil {
		return err
	}
	hash := BodyHash(body)
	now := unixNanos(s.now())
	op := fmt.Sprintf("confirming outbox message %d", id)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE channel_outbox SET message_id = ?, sent_hash = ?, sent_at = ?, attempts = 0, error = '',
			state = CASE WHEN final = 1 AND body = ? THEN 'done' ELSE state END WHERE id = ?`,
			messageID, hash, now, string(body), id)
		return affectedOne(ctx, op, res, err, "no outbox message %d", id)
	})
}

// FailOutbox records why a message was not sent; permanent marks it failed
// (the platform refused it for good), otherwise it stays pending.
func (s *Store) FailOutbox(ctx context.Context, id int64, detail string, permanent bool) error {
	op := fmt.Sprintf("recording the failure of outbox message %d", id)
	state := OutboxPending
	if permanent {
		state = OutboxFailed
	}
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE channel_outbox SET error = ?, state = ? WHERE id = ?`, capText(detail, maxChannelNote), state, id)
		return affectedOne(ctx, op, res, err, "no outbox message %d", id)
	})
}

// OutboxBacklog is how many of a channel's messages wait to be sent (or
// brought up to date).
func (s *Store) OutboxBacklog(ctx context.Context, channel string) (int, error) {
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM channel_outbox WHERE channel = ? AND state = 'pending'`, channel).Scan(&n); err != nil {
		return 0, dbErr(ctx, fmt.Sprintf("reading the outbox of channel %q", channel), err)
	}
	return n, nil
}

// ChannelChat returns the conversation of a chat; ok is false when it has
// none yet.
func (s *Store) ChannelChat(ctx context.Context, channel, chat string) (conversation string, ok bool, err error) {
	err = s.reader.QueryRowContext(ctx, `SELECT conversation FROM channel_chats WHERE channel = ? AND chat = ?`, channel, chat).Scan(&conversation)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, dbErr(ctx, fmt.Sprintf("reading the conversation of chat %q", chat), err)
	}
	return conversation, true, nil
}

// SetChannelChat ties a chat to a conversation (replacing an earlier one).
func (s *Store) SetChannelChat(ctx context.Context, channel, chat, conversation string) error {
	if err := validChannel(channel); err != nil {
		return err
	}
	if err := validChannelID("chat", chat); err != nil {
		return err
	}
	if err := validID("conversation", conversation); err != nil {
		return err
	}
	now := unixNanos(s.now())
	op := fmt.Sprintf("tying chat %q of channel %q to conversation %q", chat, channel, conversation)
	return s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO channel_chats (channel, chat, conversation, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (channel, chat) DO UPDATE SET conversation = excluded.conversation, created_at = excluded.created_at`,
			channel, chat, conversation, now)
		if err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
}

// ChatOfConversation returns the channel and chat a conversation belongs
// to; ok is false for a conversation of no chat.
func (s *Store) ChatOfConversation(ctx context.Context, conversation string) (channel, chat string, ok bool, err error) {
	err = s.reader.QueryRowContext(ctx, `SELECT channel, chat FROM channel_chats WHERE conversation = ? LIMIT 1`, conversation).Scan(&channel, &chat)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, dbErr(ctx, fmt.Sprintf("reading the chat of conversation %q", conversation), err)
	}
	return channel, chat, true, nil
}

// Pairing is a pairing code asked for by a sender, or a paired sender.
type Pairing struct {
	ID        int64
	Channel   string
	User      string // the platform's user id
	Chat      string // the chat the code was sent to
	Name      string // what the platform calls the user
	Code      string // "" once paired
	Status    string // pending | paired | expired | revoked
	CreatedAt time.Time
	ExpiresAt time.Time // of a pending code
	DecidedAt time.Time
}

const pairingColumns = `id, channel, user_id, chat, name, code, status, created_at, expires_at, decided_at`

func scanPairing(r scanner) (Pairing, error) {
	var p Pairing
	var created int64
	var expires, decided sql.NullInt64
	if err := r.Scan(&p.ID, &p.Channel, &p.User, &p.Chat, &p.Name, &p.Code, &p.Status, &created, &expires, &decided); err != nil {
		return Pairing{}, err
	}
	p.CreatedAt = fromUnixNanos(created)
	p.ExpiresAt = timeOrZero(expires)
	p.DecidedAt = timeOrZero(decided)
	return p, nil
}

// expirePairings marks the pending codes past their expiry expired.
func expirePairings(ctx context.Context, tx execer, op string, at int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE channel_pairing SET status = 'expired', decided_at = ? WHERE status = 'pending' AND expires_at <= ?`, at, at)
	if err != nil {
		return dbErr(ctx, op, err)
	}
	return nil
}

// RequestPairing records a pending pairing code for a sender, unless the
// sender already has one (returned, created false) or is paired (returned
// with status paired). With maxPending codes already pending on the
// channel, it fails with an error wrapping ErrTooManyPairings and
// errs.ErrTooLarge. Codes past their expiry are expired first.
func (s *Store) RequestPairing(ctx context.Context, p Pairing, maxPending int) (Pairing, bool, error) {
	if err := validChannel(p.Channel); err != nil {
		return Pairing{}, false, err
	}
	if err := validChannelID("user id", p.User); err != nil {
		return Pairing{}, false, err
	}
	if p.Code == "" || len(p.Code) > 64 || p.ExpiresAt.IsZero() {
		return Pairing{}, false, invalid("a pairing request needs a code and an expiry")
	}
	now := s.now()
	if p.CreatedAt.IsZero() {
		p.CreatedAt = now
	}
	op := fmt.Sprintf("recording a pairing request on channel %q", p.Channel)
	var out Pairing
	created := false
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		created = false
		if err := expirePairings(ctx, tx, op, unixNanos(p.CreatedAt)); err != nil {
			return err
		}
		rows, err := queryOn(ctx, tx, op, scanPairing, `SELECT `+pairingColumns+` FROM channel_pairing
			WHERE channel = ? AND user_id = ? AND status IN ('pending', 'paired')`, p.Channel, p.User)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			out = rows[0]
			return nil
		}
		var pending int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM channel_pairing WHERE channel = ? AND status = 'pending'`, p.Channel).Scan(&pending); err != nil {
			return dbErr(ctx, op, err)
		}
		if pending >= maxPending {
			return errs.Wrap(errs.ErrTooLarge, fmt.Sprintf("channel %q has %d pairing codes pending", p.Channel, pending), ErrTooManyPairings)
		}
		id, err := insertID(ctx, tx, op, `INSERT INTO channel_pairing (channel, user_id, chat, name, code, status, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`, p.Channel, p.User, p.Chat, capText(p.Name, 256), p.Code,
			unixNanos(p.CreatedAt), unixNanos(p.ExpiresAt))
		if err != nil {
			return err
		}
		out = p
		out.ID, out.Status, out.Name = id, PairingPending, capText(p.Name, 256)
		out.CreatedAt, out.ExpiresAt = p.CreatedAt.UTC(), p.ExpiresAt.UTC()
		created = true
		return nil
	})
	return out, created, err
}

// ApprovePairing pairs the sender of a pending code. An unknown code is
// errs.ErrNotFound; an expired one errs.ErrTimeout.
func (s *Store) ApprovePairing(ctx context.Context, code string, at time.Time) (Pairing, error) {
	op := "approving a pairing code"
	var out Pairing
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		if err := expirePairings(ctx, tx, op, unixNanos(at)); err != nil {
			return err
		}
		rows, err := queryOn(ctx, tx, op, scanPairing, `SELECT `+pairingColumns+` FROM channel_pairing
			WHERE code = ? ORDER BY id DESC LIMIT 1`, code)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return notFound("no pairing code %q", code)
		}
		p := rows[0]
		switch p.Status {
		case PairingPending:
		case PairingExpired:
			return errs.New(errs.ErrTimeout, fmt.Sprintf("pairing code %s expired at %s: the sender must write again for a new one", code, p.ExpiresAt.Format(time.RFC3339)))
		default:
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("pairing code %s was already %s", code, p.Status))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE channel_pairing SET status = 'paired', code = '', decided_at = ? WHERE id = ?`,
			unixNanos(at), p.ID); err != nil {
			return dbErr(ctx, op, err)
		}
		p.Status, p.DecidedAt = PairingPaired, at.UTC()
		out = p
		return nil
	})
	return out, err
}

// RevokePairing ends a pairing: who is a paired user's id, or a pending
// code (the request is refused). Unknown: errs.ErrNotFound.
func (s *Store) RevokePairing(ctx context.Context, channel, who string, at time.Time) (Pairing, error) {
	op := fmt.Sprintf("revoking %q on channel %q", who, channel)
	var out Pairing
	err := s.writeBatched(ctx, op, func(ctx context.Context, tx txn) error {
		rows, err := queryOn(ctx, tx, op, scanPairing, `SELECT `+pairingColumns+` FROM channel_pairing
			WHERE (? = '' OR channel = ?) AND status IN ('pending', 'paired') AND (user_id = ? OR (code <> '' AND code = ?)) ORDER BY id`,
			channel, channel, who, strings.ToUpper(who))
		if err != nil {
			return err
		}
		switch len(rows) {
		case 0:
			return notFound("no paired user or pending code %q", who)
		case 1:
		default:
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("%q is paired on more than one channel: name the channel", who))
		}
		p := rows[0]
		if _, err := tx.ExecContext(ctx, `UPDATE channel_pairing SET status = 'revoked', code = '', decided_at = ? WHERE id = ?`,
			unixNanos(at), p.ID); err != nil {
			return dbErr(ctx, op, err)
		}
		p.Status, p.DecidedAt = PairingRevoked, at.UTC()
		out = p
		return nil
	})
	return out, err
}

// Pairings returns the pending codes not yet expired at at and the paired
// users of a channel ("" for every channel), oldest first.
func (s *Store) Pairings(ctx context.Context, channel string, at time.Time) ([]Pairing, error) {
	return query(ctx, s.reader, "reading pairings", scanPairing, `SELECT `+pairingColumns+` FROM channel_pairing
		WHERE (? = '' OR channel = ?) AND (status = 'paired' OR (status = 'pending' AND expires_at > ?)) ORDER BY id`,
		channel, channel, unixNanos(at))
}

// Paired reports whether a user is paired on a channel.
func (s *Store) Paired(ctx context.Context, channel, user string) (bool, error) {
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM channel_pairing WHERE channel = ? AND user_id = ? AND status = 'paired'`,
		channel, user).Scan(&n); err != nil {
		return false, dbErr(ctx, "reading pairings", err)
	}
	return n > 0, nil
}
