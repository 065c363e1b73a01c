//go:build !unix

package store

import "context"

// setupLock is a no-op where advisory file locks are not available; SQLite's
// own locking and busy timeout still apply.
func setupLock(context.Context, string) (func(), error) { return func() {}, nil }
