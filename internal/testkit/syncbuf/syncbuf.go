// Package syncbuf is a bytes.Buffer safe for concurrent writers and readers:
// what tests use to collect a process's output or a server's log while it
// runs and read it meanwhile. Only tests import it.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer behind a mutex. The zero value is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Len is how many bytes were written so far.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Len()
}

// From returns what was written from offset off on ("" past the end).
func (b *Buffer) From(off int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b.Bytes()[min(max(off, 0), b.b.Len()):])
}
