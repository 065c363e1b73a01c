package later

import (
	"context"
	"sync"
	"testing"
)

// TestCleanups: clean-ups wait for RunPending or Done, run once each, in
// order; after Done, Add refuses; concurrent Adds and Dones lose nothing.
func TestCleanups(t *testing.T) {
	if From(context.Background()) != nil {
		t.Fatal("a plain context has Cleanups")
	}
	ctx, done := With(t.Context())
	c := From(ctx)
	var got []int
	for i := range 3 {
		if !c.Add(func() { got = append(got, i) }) {
			t.Fatalf("Add %d refused before Done", i)
		}
	}
	if len(got) != 0 {
		t.Fatal("a clean-up ran before it was asked to")
	}
	c.RunPending()
	if len(got) != 3 || got[0] != 0 || got[2] != 2 {
		t.Fatalf("ran %v, want [0 1 2]", got)
	}
	c.RunPending()
	if !c.Add(func() { got = append(got, 3) }) {
		t.Fatal("Add refused after RunPending")
	}
	done()
	done()
	if len(got) != 4 {
		t.Fatalf("ran %v, want 4 clean-ups once each", got)
	}
	if c.Add(func() { t.Error("kept after Done") }) {
		t.Fatal("Add accepted after Done")
	}

	// Adds racing a Done: each clean-up either runs in Done or is refused.
	ctx, done = With(t.Context())
	c = From(ctx)
	var mu sync.Mutex
	ran, refused := 0, 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if !c.Add(func() { mu.Lock(); ran++; mu.Unlock() }) {
				mu.Lock()
				refused++
				mu.Unlock()
			}
		})
	}
	wg.Go(done)
	wg.Wait()
	done()
	if ran+refused != 50 {
		t.Fatalf("%d ran and %d refused of 50", ran, refused)
	}
}
