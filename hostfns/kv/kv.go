// Package kv declares what the key-value and memory host functions need of a
// store: a leaf package, so that the store implementing it (internal/store)
// depends on nothing of the runtime.
//
//	var _ kv.Store = (*store.Store)(nil)
//	var _ kv.Memories = (*store.Store)(nil)
package kv

import (
	"context"
	"time"
)

// Store is a namespaced key-value store with quotas. Errors wrap
// errs.ErrNotFound (no such key) and errs.ErrTooLarge (a quota would be
// exceeded, nothing changed).
type Store interface {
	KVGet(ctx context.Context, namespace, key string) ([]byte, error)
	KVSet(ctx context.Context, namespace, key string, value []byte) error
	KVDelete(ctx context.Context, namespace, key string) error
}

// Memories is a namespaced store of free-text memories searched by relevance.
// Errors wrap errs.ErrTooLarge (quota) and errs.ErrInvalidInput (empty text).
type Memories interface {
	Remember(ctx context.Context, namespace, text string, tags []string) (int64, error)
	Recall(ctx context.Context, namespace, query string, limit int) ([]Memory, error)
}

// Memory is one remembered text.
type Memory struct {
	ID        int64     `json:"id"`
	Text      string    `json:"text"`
	Tags      []string  `json:"tags"`
	CreatedAt time.Time `json:"created_at"`
}
