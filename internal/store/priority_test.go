package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// writeLog records, in commit order, which write ran in which transaction.
type writeLog struct {
	mu  sync.Mutex
	ran []string
	tx  []*sql.Tx
}

func (l *writeLog) fn(name string) func(ctx context.Context, tx txn) error {
	return func(ctx context.Context, tx txn) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.ran = append(l.ran, name)
		l.tx = append(l.tx, tx.Tx)
		return nil
	}
}

// transactions is the number of distinct transactions and the size of each.
func (l *writeLog) transactions() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sizes []int
	for i, tx := range l.tx {
		if i == 0 || tx != l.tx[i-1] {
			sizes = append(sizes, 0)
		}
		sizes[len(sizes)-1]++
	}
	return sizes
}

// holdWriter starts a write that blocks the writer until the returned
// function is called, and waits until it runs.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	running, hold := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.writeBatched(t.Context(), "holding the writer", func(ctx context.Context, tx txn) error {
			close(running)
			<-hold
			return nil
		})
	}()
	<-running
	return func() {
		close(hold)
		if err := <-done; err != nil {
			t.Errorf("holding write: %v", err)
		}
	}
}

// queueWrites starts each write in its own goroutine, in order, each once the
// one before it is queued, and returns a wait for all of them.
func queueWrites(t *testing.T, s *Store, ctxs []context.Context, fns []func(context.Context, txn) error) func() {
	t.Helper()
	var wg sync.WaitGroup
	for i := range fns {
		before := s.queued()
		wg.Go(func() {
			if err := s.writeBatched(ctxs[i], "write", fns[i]); err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		})
		for s.queued() == before {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return wg.Wait
}

// queued is the number of writes waiting for a transaction.
func (s *Store) queued() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.finishing) + len(s.batch.ordinary)
}

// TestFinishingWritesGoFirst: writes queued while the writer is busy commit
// finishing ones first, with at most minOrdinary ordinary ones in their
// transaction; the ordinary ones follow in the order they came.
func TestFinishingWritesGoFirst(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	var log writeLog
	release := holdWriter(t, s)
	var ctxs []context.Context
	var fns []func(context.Context, txn) error
	var names []string
	for _, n := range []string{"o1", "o2", "o3", "o4", "f1", "f2", "o5", "f3"} {
		c := ctx
		if n[0] == 'f' {
			c = Finishing(ctx)
		}
		ctxs, fns, names = append(ctxs, c), append(fns, log.fn(n)), append(names, n)
	}
	wait := queueWrites(t, s, ctxs, fns)
	release()
	wait()
	want := []string{"f1", "f2", "f3", "o1", "o2", "o3", "o4", "o5"}
	if got := log.ran; !slices.Equal(got, want) {
		t.Fatalf("commit order %v, want %v (queued as %v)", got, want, names)
	}
	if got := log.transactions(); !slices.Equal(got, []int{3 + minOrdinary, 3}) {
		t.Errorf("transactions of %v writes, want [%d 3]", got, 3+minOrdinary)
	}
}

// TestOrdinaryWritesNotStarved: ordinary writes join every transaction of
// finishing writes, however many of those wait.
func TestOrdinaryWritesNotStarved(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	var log writeLog
	release := holdWriter(t, s)
	ctxs := []context.Context{ctx}
	fns := []func(context.Context, txn) error{log.fn("ordinary")}
	for range maxBatch + 10 {
		ctxs, fns = append(ctxs, Finishing(ctx)), append(fns, log.fn("finishing"))
	}
	wait := queueWrites(t, s, ctxs, fns)
	release()
	wait()
	first := log.transactions()[0]
	if first != maxBatch+1 || !slices.Contains(log.ran[:first], "ordinary") {
		t.Errorf("first transaction: %d writes, ordinary in it: %v; want %d with the ordinary one", first, slices.Contains(log.ran[:first], "ordinary"), maxBatch+1)
	}
}

// TestOrdinaryBatchSize: ordinary writes alone are grouped maxOrdinary to a
// transaction while calls are finishing or a finishing write is expected
// (ExpectFinishing), and up to maxBatch otherwise.
func TestOrdinaryBatchSize(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	for _, c := range []struct {
		name          string
		lastFinishing time.Time
		expect        int // ExpectFinishing calls not done
		done          int // ExpectFinishing calls done (twice each)
		want          []int
	}{
		{"calls finishing", time.Now().Add(time.Hour), 0, 0, []int{maxOrdinary, maxOrdinary, 3}},
		{"no call finishing", time.Time{}, 0, 0, []int{2*maxOrdinary + 3}},
		{"a finishing write expected", time.Time{}, 1, 0, []int{maxOrdinary, maxOrdinary, 3}},
		{"two expected", time.Time{}, 2, 0, []int{maxOrdinary, maxOrdinary, 3}},
		{"expected, then done", time.Time{}, 0, 2, []int{2*maxOrdinary + 3}},
	} {
		var pending []func()
		for range c.expect {
			pending = append(pending, s.ExpectFinishing())
		}
		for range c.done {
			done := s.ExpectFinishing()
			done()
			done() // a second call does nothing
		}
		var log writeLog
		release := holdWriter(t, s)
		var ctxs []context.Context
		var fns []func(context.Context, txn) error
		for range 2*maxOrdinary + 3 {
			ctxs, fns = append(ctxs, ctx), append(fns, log.fn("ordinary"))
		}
		wait := queueWrites(t, s, ctxs, fns)
		s.batch.mu.Lock()
		s.batch.lastFinishing = c.lastFinishing
		s.batch.mu.Unlock()
		release()
		wait()
		if got := log.transactions(); !slices.Equal(got, c.want) {
			t.Errorf("%s: transactions of %v ordinary writes, want %v", c.name, got, c.want)
		}
		for _, done := range pending {
			done()
		}
		s.batch.mu.Lock()
		left := s.batch.expecting
		s.batch.mu.Unlock()
		if left != 0 {
			t.Fatalf("%s: %d finishing writes still expected", c.name, left)
		}
	}
}

// TestOrdinaryUndoesFinishing: a write under Ordinary(Finishing(ctx)) is
// ordinary again.
func TestOrdinaryUndoesFinishing(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"plain", ctx, false},
		{"finishing", Finishing(ctx), true},
		{"ordinary again", Ordinary(Finishing(ctx)), false},
		{"finishing again", Finishing(Ordinary(Finishing(ctx))), true},
		{"ordinary of plain", Ordinary(ctx), false},
	} {
		if got := isFinishing(c.ctx); got != c.want {
			t.Errorf("%s: finishing %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDeferredWrites: under Deferred, AppendAudits and AppendMessage return
// at once with zero IDs and the wait returns once they are stored, with their
// errors; other writes under it are made before they return.
func TestDeferredWrites(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	mustCreate(t, s, Conversation{ID: "c"})

	release := holdWriter(t, s)
	dctx, wait := Deferred(ctx)
	ids, err := s.AppendAudits(dctx, AuditEntry{Skill: "write_file", Outcome: "ok", Conversation: "c"})
	if err != nil || len(ids) != 1 || ids[0] != 0 {
		t.Fatalf("deferred AppendAudits: %v, %v; want [0], nil", ids, err)
	}
	id, err := s.AppendMessage(dctx, Message{Conversation: "c", Role: RoleTool, CallID: "call_1", Skill: "write_file", OK: true})
	if err != nil || id != 0 {
		t.Fatalf("deferred AppendMessage: %d, %v; want 0, nil", id, err)
	}
	// Nothing is stored yet: the writer is held.
	if got, _ := s.Audit(ctx, "c", 0); len(got) != 0 {
		t.Fatalf("%d audit rows before the writer ran", len(got))
	}
	waited := make(chan error, 1)
	go func() { waited <- wait() }()
	select {
	case err := <-waited:
		t.Fatalf("wait returned (%v) before the writes committed", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-waited; err != nil {
		t.Fatalf("wait: %v", err)
	}
	rows, err := s.Audit(ctx, "c", 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("audit rows after wait: %d, %v", len(rows), err)
	}
	msgs, err := s.Messages(ctx, "c")
	if err != nil || len(msgs) != 1 || msgs[0].CallID != "call_1" {
		t.Fatalf("messages after wait: %+v, %v", msgs, err)
	}

	// A deferred write that fails reports through the wait, and changes
	// nothing.
	dctx, wait = Deferred(ctx)
	if _, err := s.AppendMessage(dctx, Message{Conversation: "missing", Role: RoleTool}); err != nil {
		t.Fatalf("deferred AppendMessage to a missing conversation returned %v at once, want nil", err)
	}
	// A write that cannot be deferred is made before it returns.
	if err := s.CreateConversation(dctx, Conversation{ID: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetConversation(ctx, "d"); err != nil {
		t.Errorf("a conversation created under Deferred is not there when CreateConversation returns: %v", err)
	}
	if err := wait(); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("wait: %v, want the missing conversation's not_found", err)
	}
	if err := wait(); err != nil {
		t.Errorf("second wait: %v, want nil (nothing left)", err)
	}
	// Input refused before queueing fails at once, deferred or not.
	dctx, wait = Deferred(ctx)
	if _, err := s.AppendAudits(dctx, AuditEntry{Skill: "x"}); !errors.Is(err, errs.ErrInvalidInput) {
		t.Errorf("deferred AppendAudits without an outcome: %v, want invalid_input at once", err)
	}
	if err := wait(); err != nil {
		t.Errorf("wait after a refused write: %v", err)
	}
}

// TestAppendAuditsAllOrNone: several rows in one write are chained in order,
// and an invalid one stores none.
func TestAppendAuditsAllOrNone(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	in := []AuditEntry{
		{Kind: AuditApproval, Skill: "write_file", Outcome: "approved"},
		{Skill: "write_file", Outcome: "ok"},
	}
	ids, err := s.AppendAudits(ctx, in...)
	if err != nil || len(ids) != 2 || ids[1] <= ids[0] {
		t.Fatalf("AppendAudits: %v, %v", ids, err)
	}
	if in[0].Hash != "" || in[0].Time != (time.Time{}) {
		t.Errorf("AppendAudits changed the caller's entries: %+v", in[0])
	}
	rep, err := s.VerifyAudit(ctx)
	if err != nil || rep.Rows != 2 {
		t.Fatalf("VerifyAudit: %+v, %v", rep, err)
	}
	rows, err := s.Audit(ctx, "", 0)
	if err != nil || len(rows) != 2 || rows[1].PrevHash != rows[0].Hash {
		t.Fatalf("rows not chained in order: %+v, %v", rows, err)
	}
	_, err = s.AppendAudits(ctx, AuditEntry{Skill: "a", Outcome: "ok"}, AuditEntry{Skill: "b"})
	if !errors.Is(err, errs.ErrInvalidInput) {
		t.Fatalf("AppendAudits with an entry without outcome: %v, want invalid_input", err)
	}
	if rows, _ := s.Audit(ctx, "", 0); len(rows) != 2 {
		t.Errorf("%d rows after a refused AppendAudits, want 2", len(rows))
	}
}

// TestCallPathStatementsPrepared: every statement of a call's path is
// prepared on a new database (a typo in one would silently run it parsed).
func TestCallPathStatementsPrepared(t *testing.T) {
	s := openTest(t, Options{})
	for _, c := range []struct {
		pool string
		st   statements
		want []string
	}{{"writer", s.writes, preparedWrites}, {"reader", s.reads, preparedReads}} {
		for _, q := range c.want {
			if c.st[q] == nil {
				t.Errorf("%s: not prepared: %s", c.pool, q)
			}
		}
	}
}

// TestAppendAuditsTouchesEachConversation: rows of several conversations in
// one write move each conversation's updated_at to its latest row, never
// back.
func TestAppendAuditsTouchesEachConversation(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mustCreate(t, s, Conversation{ID: "a", CreatedAt: t0, UpdatedAt: t0})
	mustCreate(t, s, Conversation{ID: "b", CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)})
	row := func(conv string, at time.Duration) AuditEntry {
		return AuditEntry{Conversation: conv, Skill: "write_file", Outcome: "ok", Time: t0.Add(at)}
	}
	if _, err := s.AppendAudits(ctx, row("a", 2*time.Minute), row("b", time.Minute), row("a", time.Minute), row("", 3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for conv, want := range map[string]time.Time{
		"a": t0.Add(2 * time.Minute), // its latest row, not its last
		"b": t0.Add(time.Hour),       // its rows are older: unchanged
	} {
		c, err := s.GetConversation(ctx, conv)
		if err != nil {
			t.Fatal(err)
		}
		if !c.UpdatedAt.Equal(want) {
			t.Errorf("conversation %s updated at %v, want %v", conv, c.UpdatedAt, want)
		}
	}
}
