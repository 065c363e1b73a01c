package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Group commit for the server's writes (conversations, messages, approvals,
// audit). Every one of them must be durable before it returns, and a commit
// costs an fsync of the WAL: with one transaction per write, a thousand
// sessions writing at once would queue behind a thousand fsyncs. Instead, the
// writes that arrive while a commit is in progress are queued and run together
// in the next transaction, each inside its own savepoint, and committed with one
// fsync. A write whose function fails is rolled back to its savepoint alone; the
// others commit. Every caller still returns only after the commit that holds its
// write (or with the error that kept it out), so an acknowledged row is on disk.

// Two classes of writes share the queue. A write whose context carries
// Finishing (the server marks the writes that finish a call a user is
// waiting on: the approval decision, the audit row, the tool result) goes
// into the next transaction ahead of every ordinary write (a new
// conversation, a new approval request). Under a burst the writes that start
// new work then wait, not the ones that finish work already approved, and
// the ones that start work are throttled by the writer instead of crowding
// it: a finishing write waits for at most one short transaction before its
// own. Ordinary writes are never starved: each transaction takes at least
// minOrdinary of them, and finishing writes exist only for calls that
// ordinary writes started.

// Batch sizes. maxBatch bounds the writes of one transaction. While calls
// are finishing (a finishing write was taken within finishingWindow), a
// transaction of ordinary writes alone takes at most maxOrdinary, so that a
// finishing write arriving during its commit waits for little (each write
// costs tens of microseconds of SQLite work); otherwise ordinary writes are
// grouped as many as maxBatch, as before (64 concurrent AppendAudits: ~50 µs
// each grouped by 128, ~100 µs by 4). minOrdinary ordinary writes join every
// transaction that has finishing ones.
const (
	maxBatch        = 128
	maxOrdinary     = 4
	minOrdinary     = 2
	finishingWindow = 100 * time.Millisecond
)

type priorityKey struct{}

// Finishing marks ctx's writes as finishing a call someone waits on: they
// are committed ahead of ordinary writes (see the package's group commit).
// Durability is the same for both classes.
func Finishing(ctx context.Context) context.Context {
	return context.WithValue(ctx, priorityKey{}, true)
}

// Ordinary undoes Finishing for the writes made with the returned context.
func Ordinary(ctx context.Context) context.Context {
	if !isFinishing(ctx) {
		return ctx
	}
	return context.WithValue(ctx, priorityKey{}, false)
}

func isFinishing(ctx context.Context) bool {
	v, _ := ctx.Value(priorityKey{}).(bool)
	return v
}

// batcher is the queue of writes waiting for a transaction, one list per
// class. Its zero value is ready; a goroutine drains it while it is not
// empty, then exits.
type batcher struct {
	mu        sync.Mutex
	finishing []*batchReq
	ordinary  []*batchReq
	draining  bool
	// lastFinishing is when a transaction last took finishing writes.
	lastFinishing time.Time
	// expecting counts the finishing writes announced by ExpectFinishing
	// and not yet done.
	expecting int
}

// ExpectFinishing tells the group commit that a finishing write will follow
// (the server calls it when it asks a question: the decision will be one).
// Until done is called (once; more calls do nothing), ordinary-only
// transactions stay as short as they do within finishingWindow of a
// finishing write. Without it, the first answer after a quiet spell waited
// for a transaction of up to maxBatch new conversations: the first approval
// of a burst took ~60 ms.
func (s *Store) ExpectFinishing() (done func()) {
	b := &s.batch
	b.mu.Lock()
	b.expecting++
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.expecting--
			b.mu.Unlock()
		})
	}
}

type batchReq struct {
	ctx  context.Context
	op   string
	fn   func(ctx context.Context, tx txn) error
	err  error
	done chan struct{}
}

// writeBatched runs fn in a write transaction shared with the writes queued at
// the same moment and returns once that transaction has committed. fn runs with
// a context that carries ctx's values but not its cancellation: interrupting a
// statement would roll back the other writes of the transaction. A ctx done
// before fn starts fails the write with ctx's kind and writes nothing. fn's
// errors are returned as they are (fn wraps its own).
func (s *Store) writeBatched(ctx context.Context, op string, fn func(ctx context.Context, tx txn) error) error {
	r, err := s.enqueue(ctx, op, fn)
	if err != nil {
		return err
	}
	<-r.done
	return r.err
}

// enqueue queues a write for the next transaction of its class.
func (s *Store) enqueue(ctx context.Context, op string, fn func(ctx context.Context, tx txn) error) (*batchReq, error) {
	if err := ctx.Err(); err != nil {
		return nil, dbErr(ctx, op, err)
	}
	r := &batchReq{ctx: ctx, op: op, fn: fn, done: make(chan struct{})}
	b := &s.batch
	b.mu.Lock()
	if isFinishing(ctx) {
		b.finishing = append(b.finishing, r)
	} else {
		b.ordinary = append(b.ordinary, r)
	}
	start := !b.draining
	b.draining = true
	b.mu.Unlock()
	if start {
		go s.drain()
	}
	return r, nil
}

// Deferred returns a context under which AppendAudits and AppendMessage queue
// their write and return at once (with IDs 0), and a wait function that
// returns once every write queued under it has committed (or failed: their
// errors, joined). The writes still commit in order, each as durable as ever;
// nothing is acknowledged until wait returns. The server runs a call under it
// so that the call's audit rows (written by the gate) and its tool message
// (written by the server) are queued back to back, so they usually share one
// commit, and the tool_result goes out once both are durable.
// Every other write under the context is made as usual.
func Deferred(ctx context.Context) (context.Context, func() error) {
	g := &deferredWrites{}
	return context.WithValue(ctx, deferredKey{}, g), g.wait
}

type deferredKey struct{}

// deferredWrites is the writes queued under one Deferred context.
type deferredWrites struct {
	mu     sync.Mutex
	queued []*batchReq
}

func (g *deferredWrites) wait() error {
	g.mu.Lock()
	queued := g.queued
	g.queued = nil
	g.mu.Unlock()
	var err error
	for _, r := range queued {
		<-r.done
		err = errors.Join(err, r.err)
	}
	return err
}

// writeBehind is writeBatched for the writes that may be deferred: under a
// Deferred context it queues the write and returns later true at once
// (fn then runs later: the caller must not read what fn sets).
func (s *Store) writeBehind(ctx context.Context, op string, fn func(ctx context.Context, tx txn) error) (later bool, err error) {
	g, _ := ctx.Value(deferredKey{}).(*deferredWrites)
	if g == nil {
		return false, s.writeBatched(ctx, op, fn)
	}
	r, err := s.enqueue(ctx, op, fn)
	if err != nil {
		return false, err
	}
	g.mu.Lock()
	g.queued = append(g.queued, r)
	g.mu.Unlock()
	return true, nil
}

// drain commits the queued writes, a batch at a time, until both queues are
// empty.
func (s *Store) drain() {
	b := &s.batch
	for {
		b.mu.Lock()
		batch := b.next()
		if len(batch) == 0 {
			b.draining = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		s.commitBatch(batch)
	}
}

// next takes the writes of the next transaction off the queues (b.mu held):
// the finishing writes first, then ordinary ones: minOrdinary of them with
// finishing writes; maxOrdinary alone while calls are finishing (a finishing
// write was taken within finishingWindow, or one is expected), so that the
// next finishing write waits little; maxBatch alone otherwise.
func (b *batcher) next() []*batchReq {
	now := time.Now()
	nf := min(len(b.finishing), maxBatch)
	no := min(len(b.ordinary), maxBatch)
	switch {
	case nf > 0:
		no = min(no, minOrdinary)
		b.lastFinishing = now
	case b.expecting > 0 || now.Sub(b.lastFinishing) < finishingWindow:
		no = min(no, maxOrdinary)
	}
	batch := make([]*batchReq, 0, nf+no)
	batch = append(batch, b.finishing[:nf]...)
	batch = append(batch, b.ordinary[:no]...)
	b.finishing = shift(b.finishing, nf)
	b.ordinary = shift(b.ordinary, no)
	return batch
}

// shift drops the first n elements of q, releasing the array once q is empty.
func shift(q []*batchReq, n int) []*batchReq {
	if n == len(q) {
		return nil
	}
	return q[n:]
}

// commitBatch runs a batch of writes in one transaction and tells each its
// outcome.
func (s *Store) commitBatch(batch []*batchReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	// The transaction outlives any one caller: it must not be rolled back
	// because the first caller gave up.
	ctx := context.WithoutCancel(batch[0].ctx)
	failAll := func(err error) {
		for _, r := range batch {
			if r.err == nil {
				r.err = dbErr(ctx, r.op, err)
			}
		}
	}
	// A caller that gave up before its write started gets its context's
	// error and writes nothing: checked before waiting for the writer and again
	// once it is ours.
	canceled := func(r *batchReq) bool {
		if err := r.ctx.Err(); err != nil {
			r.err = dbErr(r.ctx, r.op, err)
			return true
		}
		return false
	}
	live := 0
	for _, r := range batch {
		if !canceled(r) {
			live++
		}
	}
	if live == 0 {
		return
	}
	sqlTx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		failAll(err)
		return
	}
	defer sqlTx.Rollback() // a no-op after Commit
	var tail auditTail     // the last audit row written, for the head
	tx := txn{Tx: sqlTx, prepared: s.writes, tail: &tail}
	for _, r := range batch {
		if r.err != nil || canceled(r) {
			continue
		}
		if len(batch) == 1 {
			// Alone in its transaction: no savepoint needed.
			if r.err = runFn(r, tx); r.err != nil {
				return
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, sqlSavepoint); err != nil {
			failAll(err)
			return
		}
		r.err = runFn(r, tx)
		if r.err != nil {
			if _, err := tx.ExecContext(ctx, sqlRollbackTo); err != nil {
				failAll(err)
				return
			}
		}
		if _, err := tx.ExecContext(ctx, sqlRelease); err != nil {
			failAll(err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		failAll(err)
		return
	}
	// Before the writers hear of their commit: an acknowledged audit row
	// is one the head covers.
	s.advanceHead(ctx, tail)
}

// runFn runs one write's function, turning a panic into an internal error so
// that the other writes of the batch are still answered.
func runFn(r *batchReq, tx txn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.ErrInternal, fmt.Sprintf("%s: panic: %v", r.op, p))
		}
	}()
	return r.fn(context.WithoutCancel(r.ctx), tx)
}

// insertID runs an INSERT in tx and returns the new row's id.
func insertID(ctx context.Context, tx execer, op, query string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, dbErr(ctx, op, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, dbErr(ctx, op, err)
	}
	return id, nil
}
