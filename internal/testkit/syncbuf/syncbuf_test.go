package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWritesAndReads: writers and readers at once (run with -race)
// lose no byte, and From clips offsets to what was written.
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := b.Write([]byte("ab")); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				_ = b.From(b.Len() / 2)
			}
		}()
	}
	wg.Wait()
	if got := b.Len(); got != 8*100*2 {
		t.Fatalf("Len = %d, want %d", got, 8*100*2)
	}
	if got := b.String(); got != strings.Repeat("ab", 800) {
		t.Fatalf("String has %d bytes, not 800 × \"ab\"", len(got))
	}
	for _, c := range []struct {
		off  int
		want string
	}{{-3, strings.Repeat("ab", 800)}, {1598, "ab"}, {1600, ""}, {5000, ""}} {
		if got := b.From(c.off); got != c.want {
			t.Errorf("From(%d) = %q, want %q", c.off, got, c.want)
		}
	}
}
