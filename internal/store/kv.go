package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"
)

// validKey checks a namespace and a key: both non-empty UTF-8, the key at most
// MaxKeyBytes.
func validKey(ns, key string) error {
	if err := validNamespace(ns); err != nil {
		return err
	}
	if key == "" {
		return invalid("namespace %q: empty key", ns)
	}
	if len(key) > MaxKeyBytes {
		return checkQuota(ns, QuotaKVKeyBytes, int64(len(key)), MaxKeyBytes)
	}
	if !utf8.ValidString(key) {
		return invalid("namespace %q: key is not valid UTF-8", ns)
	}
	return nil
}

func validNamespace(ns string) error {
	if ns == "" {
		return invalid("empty namespace")
	}
	if len(ns) > MaxNamespaceBytes {
		return invalid("namespace of %d bytes, longer than %d", len(ns), MaxNamespaceBytes)
	}
	if !utf8.ValidString(ns) {
		return invalid("namespace is not valid UTF-8")
	}
	return nil
}

// KVGet returns the value of key in namespace, or an errs.ErrNotFound error.
// A value stored empty comes back as an empty, non-nil slice.
func (s *Store) KVGet(ctx context.Context, namespace, key string) ([]byte, error) {
	if err := validKey(namespace, key); err != nil {
		return nil, err
	}
	var v []byte
	err := s.reader.QueryRowContext(ctx, `SELECT value FROM kv WHERE namespace = ? AND key = ?`, namespace, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("key %q in namespace %q", key, namespace)
	}
	if err != nil {
		return nil, dbErr(ctx, fmt.Sprintf("reading key %q in namespace %q", key, namespace), err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// KVSet stores value under key in namespace, replacing any previous value. A
// write that would exceed a quota of the namespace fails with a *QuotaError
// (errs.ErrTooLarge) and changes nothing.
func (s *Store) KVSet(ctx context.Context, namespace, key string, value []byte) error {
	if err := validKey(namespace, key); err != nil {
		return err
	}
	value = s.redact(value)
	if err := checkQuota(namespace, QuotaKVValueBytes, int64(len(value)), int64(s.opts.MaxValueBytes)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // the column is NOT NULL; nil and empty are the same value
	}
	op := fmt.Sprintf("setting key %q in namespace %q", key, namespace)
	return s.write(ctx, op, func(tx *sql.Tx) error {
		var keys, total int64
		err := tx.QueryRowContext(ctx, `SELECT kv_keys, kv_bytes FROM namespace_usage WHERE namespace = ?`, namespace).Scan(&keys, &total)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return dbErr(ctx, op, err)
		}
		var old sql.NullInt64 // size of the entry being replaced
		err = tx.QueryRowContext(ctx, `SELECT octet_length(key) + length(value) FROM kv WHERE namespace = ? AND key = ?`, namespace, key).Scan(&old)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return dbErr(ctx, op, err)
		}
		if !old.Valid {
			if err := checkQuota(namespace, QuotaKVKeys, keys+1, int64(s.opts.MaxKeys)); err != nil {
				return err
			}
		}
		want := total - old.Int64 + int64(len(key)+len(value))
		if err := checkQuota(namespace, QuotaKVTotalBytes, want, s.opts.MaxTotalBytes); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO kv (namespace, key, value, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			namespace, key, value, unixNanos(s.now()))
		if err != nil {
			return dbErr(ctx, op, err)
		}
		return nil
	})
}

// KVDelete deletes key from namespace. Deleting a key that does not exist fails
// with errs.ErrNotFound.
func (s *Store) KVDelete(ctx context.Context, namespace, key string) error {
	if err := validKey(namespace, key); err != nil {
		return err
	}
	op := fmt.Sprintf("deleting key %q in namespace %q", key, namespace)
	return s.write(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM kv WHERE namespace = ? AND key = ?`, namespace, key)
		return affectedOne(ctx, op, res, err, "key %q in namespace %q", key, namespace)
	})
}

// KVList returns the keys of namespace that start with prefix, in byte order,
// at most limit of them (all for limit <= 0; a namespace holds at most
// Options.MaxKeys keys).
func (s *Store) KVList(ctx context.Context, namespace, prefix string, limit int) ([]string, error) {
	if err := validNamespace(namespace); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	// A range over the primary key instead of LIKE: no escaping, case-sensitive,
	// and it uses the index. Keys are valid UTF-8, which never contains 0xFF, so
	// prefix+"\xff" sorts after every key that starts with prefix.
	rows, err := s.reader.QueryContext(ctx, `SELECT key FROM kv
		WHERE namespace = ? AND key >= ? AND key < ? ORDER BY key LIMIT ?`,
		namespace, prefix, prefix+"\xff", limit)
	if err != nil {
		return nil, dbErr(ctx, fmt.Sprintf("listing keys of namespace %q", namespace), err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, dbErr(ctx, fmt.Sprintf("listing keys of namespace %q", namespace), err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(ctx, fmt.Sprintf("listing keys of namespace %q", namespace), err)
	}
	return keys, nil
}
