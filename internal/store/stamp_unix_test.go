//go:build unix

package store

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSkillsStampFIFO: a FIFO in the stamp's place neither blocks a change
// nor an open, and readers still see the change.
func TestSkillsStampFIFO(t *testing.T) {
	server := openTest(t, Options{})
	stamp := server.stamp.path
	must(t, os.Remove(stamp))
	must(t, syscall.Mkfifo(stamp, 0o600))
	before := mustFingerprint(t, server)
	done := make(chan error, 1)
	go func() {
		cli, err := Open(t.Context(), server.Path(), Options{})
		if err == nil {
			err = cli.InsertSkill(t.Context(), testSkill("echo"))
			cli.Close(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO at the stamp blocked an open or a change")
	}
	if after := mustFingerprint(t, server); after == before || after != mustQuery(t, server) {
		t.Fatalf("fingerprint %s → %s; the table says %s", before, after, mustQuery(t, server))
	}
}
