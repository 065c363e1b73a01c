package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestGroupCommitIsolatesFailures: many writes at once share transactions; the
// ones that fail (an unknown conversation, invalid JSON caught only by the
// database, a panic) change nothing and get their own error, and every other
// write commits.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	mustCreate(t, s, Conversation{ID: "c"})
	const writers = 60
	var wg sync.WaitGroup
	errsOf := make([]error, writers)
	ids := make([]int64, writers)
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			switch i % 3 {
			case 0:
				ids[i], errsOf[i] = s.AppendMessage(ctx, Message{Conversation: "c", Role: RoleUser, Text: fmt.Sprint(i)})
			case 1:
				// Inserts a row, then fails: the row must go with it.
				errsOf[i] = s.writeBatched(ctx, "half a write", func(ctx context.Context, tx txn) error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO messages (conversation, role, created_at) VALUES ('c', 'user', 0)`); err != nil {
						return err
					}
					if i%2 == 0 {
						panic("boom")
					}
					return errs.New(errs.ErrNotFound, "no such thing")
				})
			case 2:
				ids[i], errsOf[i] = s.AppendMessage(ctx, Message{Conversation: "missing", Role: RoleUser})
			}
		})
	}
	close(start)
	wg.Wait()
	seen := map[int64]bool{}
	for i, err := range errsOf {
		switch i % 3 {
		case 0:
			if err != nil || ids[i] == 0 || seen[ids[i]] {
				t.Errorf("writer %d: id %d, %v; want a new id", i, ids[i], err)
			}
			seen[ids[i]] = true
		case 1:
			want := errs.ErrNotFound
			if i%2 == 0 {
				want = errs.ErrInternal
			}
			if !errors.Is(err, want) {
				t.Errorf("writer %d: %v, want %v", i, err, want)
			}
		case 2:
			if !errors.Is(err, errs.ErrNotFound) || ids[i] != 0 {
				t.Errorf("writer %d: id %d, %v; want not_found", i, ids[i], err)
			}
		}
	}
	msgs, err := s.Messages(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != writers/3 {
		t.Errorf("%d messages stored, want the %d successful ones only", len(msgs), writers/3)
	}
	for _, m := range msgs {
		if !seen[m.ID] {
			t.Errorf("message %d (%q) was not acknowledged to anyone", m.ID, m.Text)
		}
	}
	// The store still works, alone and in a batch.
	if _, err := s.AppendMessage(ctx, Message{Conversation: "c", Role: RoleTool, Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Errorf("after the failures: %v", err)
	}
}

// TestGroupCommitCanceledWaiter: a write whose context ends while it waits for
// the writer writes nothing and says so.
func TestGroupCommitCanceledWaiter(t *testing.T) {
	s := openTest(t, Options{})
	ctx := t.Context()
	mustCreate(t, s, Conversation{ID: "c"})
	// Hold the writer so that the next write waits in the queue.
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := s.AppendMessage(wctx, Message{Conversation: "c", Role: RoleUser, Text: "late"})
		done <- err
	}()
	// The write is queued (or being started) behind the held connection.
	for {
		s.batch.mu.Lock()
		draining := s.batch.draining
		s.batch.mu.Unlock()
		if draining {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	conn.Close()
	err = <-done
	msgs, _ := s.Messages(ctx, "c")
	if errs.KindOf(err) != errs.KindCanceled || len(msgs) != 0 {
		t.Errorf("canceled waiter: %v (kind %s), %d messages; want canceled and none", err, errs.KindOf(err), len(msgs))
	}
}
