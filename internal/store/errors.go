package store

import (
	"errors"
	"fmt"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// ErrExists is wrapped (inside an errs.ErrConfig error) by InsertSkill when a
// skill of that name is already installed: an upgrade goes through ReplaceSkill.
var ErrExists = errors.New("already exists")

// Quota names a per-namespace limit of Options.
type Quota string

// The quotas. Their names appear in error messages and are stable.
const (
	QuotaKVKeys           Quota = "kv_keys"            // Options.MaxKeys
	QuotaKVKeyBytes       Quota = "kv_key_bytes"       // MaxKeyBytes
	QuotaKVValueBytes     Quota = "kv_value_bytes"     // Options.MaxValueBytes
	QuotaKVTotalBytes     Quota = "kv_total_bytes"     // Options.MaxTotalBytes
	QuotaMemories         Quota = "memories"           // Options.MaxMemories
	QuotaMemoryBytes      Quota = "memory_bytes"       // Options.MaxMemoryBytes
	QuotaMemoryTags       Quota = "memory_tags"        // MaxTags and MaxTagBytes
	QuotaMemoryTotalBytes Quota = "memory_total_bytes" // Options.MaxMemoryTotalBytes
)

// QuotaError reports a write refused because it would take a namespace over a
// quota. Nothing was changed. It matches errs.ErrTooLarge.
type QuotaError struct {
	Namespace string
	Quota     Quota
	Limit     int64 // the quota
	Want      int64 // the size or count the write would have reached
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("namespace %q: quota %s exceeded: %d > %d", e.Namespace, e.Quota, e.Want, e.Limit)
}

// Unwrap makes errors.Is(err, errs.ErrTooLarge) hold.
func (e *QuotaError) Unwrap() error { return errs.ErrTooLarge }

// checkQuota returns a *QuotaError if want exceeds limit.
func checkQuota(ns string, q Quota, want, limit int64) error {
	if want > limit {
		return &QuotaError{Namespace: ns, Quota: q, Limit: limit, Want: want}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return errs.New(errs.ErrInvalidInput, fmt.Sprintf(format, args...))
}

func notFound(format string, args ...any) error {
	return errs.New(errs.ErrNotFound, fmt.Sprintf(format, args...))
}
