package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentWrites has 8 goroutines write KV entries and memories at once
// (run it with -race): no write fails, SQLITE_BUSY never surfaces, and every
// write is visible afterwards.
func TestConcurrentWrites(t *testing.T) {
	const workers, perWorker = 8, 40
	s := openTest(t, Options{})
	ctx := t.Context()
	var wg sync.WaitGroup
	errc := make(chan error, workers*perWorker*3)
	for w := range workers {
		wg.Go(func() {
			ns := fmt.Sprint("skill-", w%4) // two workers share each namespace
			for i := range perWorker {
				key := fmt.Sprintf("w%d-k%d", w, i)
				if err := s.KVSet(ctx, ns, key, []byte(key)); err != nil {
					errc <- fmt.Errorf("KVSet %s: %w", key, err)
				}
				if _, err := s.Remember(ctx, ns, fmt.Sprintf("worker%d wrote memory%d", w, i), []string{key}); err != nil {
					errc <- fmt.Errorf("Remember %s: %w", key, err)
				}
				// Reads interleave with the writes.
				if _, err := s.KVGet(ctx, ns, key); err != nil {
					errc <- fmt.Errorf("KVGet %s: %w", key, err)
				}
				if _, err := s.Recall(ctx, ns, fmt.Sprint("memory", i), 5); err != nil {
					errc <- fmt.Errorf("Recall: %w", err)
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}

	for w := range workers {
		ns := fmt.Sprint("skill-", w%4)
		keys, err := s.KVList(ctx, ns, fmt.Sprintf("w%d-", w), 0)
		if err != nil || len(keys) != perWorker {
			t.Errorf("worker %d: %d keys, %v; want %d", w, len(keys), err, perWorker)
		}
		mems, err := s.Recall(ctx, ns, fmt.Sprint("worker", w), MaxRecall)
		if err != nil || len(mems) != perWorker {
			t.Errorf("worker %d: %d memories, %v; want %d", w, len(mems), err, perWorker)
		}
	}
	var keys, memories int64
	if err := s.reader.QueryRowContext(ctx, `SELECT sum(kv_keys), sum(memories) FROM namespace_usage`).Scan(&keys, &memories); err != nil {
		t.Fatal(err)
	}
	if keys != workers*perWorker || memories != workers*perWorker {
		t.Errorf("usage counters: %d keys, %d memories; want %d each", keys, memories, workers*perWorker)
	}
}

// TestConcurrentFirstOpen: many opens of a database file that does not exist
// yet, at the same moment (two buddy processes started together), all succeed:
// none may take the schema another is creating for a foreign database.
func TestConcurrentFirstOpen(t *testing.T) {
	for round := 0; round < 20; round++ {
		path := filepath.Join(t.TempDir(), "buddy.db")
		var wg sync.WaitGroup
		errc := make(chan error, 12)
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := Open(t.Context(), path, Options{})
				if err != nil {
					errc <- err
					return
				}
				st.Close(context.Background())
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
