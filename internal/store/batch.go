package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/buddy-run/buddy/internal/errs"
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

// maxBatch bounds the writes of one transaction, so that one commit never holds
// the writer for long.
const maxBatch = 128

// batcher is the queue of writes waiting for a transaction. Its zero value is
// ready; a goroutine drains it while it is not empty, then exits.
type batcher struct {
	mu       sync.Mutex
	queue    []*batchReq
	draining bool
}

type batchReq struct {
	ctx  context.Context
	op   string
	fn   func(ctx context.Context, tx *sql.Tx) error
	err  error
	done chan struct{}
}

// writeBatched runs fn in a write transaction shared with the writes queued at
// the same moment and returns once that transaction has committed. fn runs with
// a context that carries ctx's values but not its cancellation: interrupting a
// statement would roll back the other writes of the transaction. A ctx done
// before fn starts fails the write with ctx's kind and writes nothing. fn's
// errors are returned as they are (fn wraps its own).
func (s *Store) writeBatched(ctx context.Context, op string, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return dbErr(ctx, op, err)
	}
	r := &batchReq{ctx: ctx, op: op, fn: fn, done: make(chan struct{})}
	b := &s.batch
	b.mu.Lock()
	b.queue = append(b.queue, r)
	start := !b.draining
	b.draining = true
	b.mu.Unlock()
	if start {
		go s.drain()
	}
	<-r.done
	return r.err
}

// drain commits the queued writes, a batch at a time, until the queue is empty.
func (s *Store) drain() {
	b := &s.batch
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.queue = nil
			b.draining = false
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		s.commitBatch(batch)
	}
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
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		failAll(err)
		return
	}
	defer tx.Rollback() // a no-op after Commit
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
		if _, err := tx.ExecContext(ctx, `SAVEPOINT batch_write`); err != nil {
			failAll(err)
			return
		}
		r.err = runFn(r, tx)
		if r.err != nil {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO batch_write`); err != nil {
				failAll(err)
				return
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE batch_write`); err != nil {
			failAll(err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		failAll(err)
	}
}

// runFn runs one write's function, turning a panic into an internal error so
// that the other writes of the batch are still answered.
func runFn(r *batchReq, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.ErrInternal, fmt.Sprintf("%s: panic: %v", r.op, p))
		}
	}()
	return r.fn(context.WithoutCancel(r.ctx), tx)
}

// insertID runs an INSERT in tx and returns the new row's id.
func insertID(ctx context.Context, tx *sql.Tx, op, query string, args ...any) (int64, error) {
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
