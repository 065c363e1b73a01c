package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

func TestKVBasics(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	steps := []struct {
		name    string
		do      func() error
		key     string
		want    []byte // nil: absent
		wantErr error
	}{
		{"get missing", func() error { return nil }, "a", nil, nil},
		{"set", func() error { return s.KVSet(ctx, "ns", "a", []byte("one")) }, "a", []byte("one"), nil},
		{"overwrite", func() error { return s.KVSet(ctx, "ns", "a", []byte("two")) }, "a", []byte("two"), nil},
		{"binary", func() error { return s.KVSet(ctx, "ns", "bin", binary) }, "bin", binary, nil},
		{"empty value", func() error { return s.KVSet(ctx, "ns", "empty", []byte{}) }, "empty", []byte{}, nil},
		{"nil value", func() error { return s.KVSet(ctx, "ns", "nil", nil) }, "nil", []byte{}, nil},
		{"unicode key", func() error { return s.KVSet(ctx, "ns", "clé/日本", []byte("x")) }, "clé/日本", []byte("x"), nil},
		{"delete", func() error { return s.KVDelete(ctx, "ns", "a") }, "a", nil, nil},
		{"delete missing", func() error { return s.KVDelete(ctx, "ns", "a") }, "a", nil, errs.ErrNotFound},
		{"empty key", func() error { return s.KVSet(ctx, "ns", "", []byte("x")) }, "bin", binary, errs.ErrInvalidInput},
		{"empty namespace", func() error { return s.KVSet(ctx, "", "k", []byte("x")) }, "k", nil, errs.ErrInvalidInput},
		{"invalid utf-8 key", func() error { return s.KVSet(ctx, "ns", "\xff", []byte("x")) }, "bin", binary, errs.ErrInvalidInput},
		{"long key", func() error { return s.KVSet(ctx, "ns", strings.Repeat("k", MaxKeyBytes+1), []byte("x")) }, "bin", binary, errs.ErrTooLarge},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := st.do()
			if (st.wantErr == nil) != (err == nil) || (st.wantErr != nil && !errors.Is(err, st.wantErr)) {
				t.Fatalf("error %v, want %v", err, st.wantErr)
			}
			got, err := s.KVGet(ctx, "ns", st.key)
			if st.want == nil {
				if !errors.Is(err, errs.ErrNotFound) {
					t.Errorf("KVGet(%q) = %q, %v; want ErrNotFound", st.key, got, err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, st.want) || got == nil {
				t.Errorf("KVGet(%q) = %q, %v; want %q", st.key, got, err, st.want)
			}
		})
	}
}

func TestKVNamespacesIsolated(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	if err := s.KVSet(ctx, "alice", "k", []byte("from alice")); err != nil {
		t.Fatal(err)
	}
	if err := s.KVSet(ctx, "bob", "k", []byte("from bob")); err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]string{"alice": "from alice", "bob": "from bob"} {
		if got, err := s.KVGet(ctx, ns, "k"); err != nil || string(got) != want {
			t.Errorf("KVGet(%s) = %q, %v; want %q", ns, got, err, want)
		}
	}
	if err := s.KVDelete(ctx, "alice", "k"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.KVGet(ctx, "bob", "k"); err != nil || string(got) != "from bob" {
		t.Errorf("bob's key after alice deleted hers: %q, %v", got, err)
	}
	if _, err := s.KVGet(ctx, "carol", "k"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("carol sees a key: %v", err)
	}
	if keys, err := s.KVList(ctx, "alice", "", 0); err != nil || len(keys) != 0 {
		t.Errorf("alice lists %q, %v", keys, err)
	}
}

func TestKVList(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	keys := []string{"user:1", "user:2", "user:10", "users", "user", "User:3", "admin:1", "user:é", "usex"}
	for _, k := range keys {
		if err := s.KVSet(ctx, "ns", k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.KVSet(ctx, "other", "user:99", nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"", 0, []string{"User:3", "admin:1", "user", "user:1", "user:10", "user:2", "user:é", "users", "usex"}},
		{"user:", 0, []string{"user:1", "user:10", "user:2", "user:é"}},
		{"user:", 2, []string{"user:1", "user:10"}},
		{"user", -1, []string{"user", "user:1", "user:10", "user:2", "user:é", "users"}},
		{"User", 0, []string{"User:3"}},
		{"%", 0, nil},
		{"_ser", 0, nil},
		{"user:é", 0, []string{"user:é"}},
		{"zzz", 0, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q limit %d", tt.prefix, tt.limit), func(t *testing.T) {
			got, err := s.KVList(ctx, "ns", tt.prefix, tt.limit)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("KVList = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestKVQuotas(t *testing.T) {
	opts := Options{MaxKeys: 3, MaxValueBytes: 100, MaxTotalBytes: 250}
	tests := []struct {
		name  string
		setup map[string]int // key -> value size
		key   string
		size  int
		quota Quota
	}{
		{"value too large", nil, "k", 101, QuotaKVValueBytes},
		{"too many keys", map[string]int{"a": 1, "b": 1, "c": 1}, "d", 1, QuotaKVKeys},
		{"total bytes", map[string]int{"a": 100, "b": 100}, "c", 48, QuotaKVTotalBytes},
		{"value cap before total on overwrite", map[string]int{"a": 100, "b": 100}, "b", 148, QuotaKVValueBytes},
		{"total bytes on overwrite under value cap", map[string]int{"a": 100, "b": 100, "c": 40}, "c", 50, QuotaKVTotalBytes},
		{"key too long", nil, strings.Repeat("k", MaxKeyBytes+1), 1, QuotaKVKeyBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := openTest(t, opts)
			for k, n := range tt.setup {
				if err := s.KVSet(ctx, "ns", k, bytes.Repeat([]byte("v"), n)); err != nil {
					t.Fatalf("setup %s: %v", k, err)
				}
			}
			before := kvDump(t, s, "ns")
			err := s.KVSet(ctx, "ns", tt.key, bytes.Repeat([]byte("w"), tt.size))
			var qe *QuotaError
			if !errors.Is(err, errs.ErrTooLarge) || !errors.As(err, &qe) || qe.Quota != tt.quota || qe.Namespace != "ns" {
				t.Fatalf("KVSet: %v, want a %s QuotaError", err, tt.quota)
			}
			if !strings.Contains(err.Error(), string(tt.quota)) || !strings.Contains(err.Error(), `"ns"`) {
				t.Errorf("error %q does not name the quota and the namespace", err)
			}
			if after := kvDump(t, s, "ns"); after != before {
				t.Errorf("the refused write changed the namespace:\n%s\nwas\n%s", after, before)
			}
			// Another namespace is not affected by this one's usage.
			if err := s.KVSet(ctx, "other", "k", []byte("fine")); err != nil {
				t.Errorf("other namespace: %v", err)
			}
		})
	}
}

func TestKVQuotaFreedByDelete(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{MaxKeys: 2, MaxTotalBytes: 100})
	for _, k := range []string{"a", "b"} {
		if err := s.KVSet(ctx, "ns", k, bytes.Repeat([]byte("v"), 40)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.KVSet(ctx, "ns", "c", nil); !errors.Is(err, errs.ErrTooLarge) {
		t.Fatalf("third key: %v, want ErrTooLarge", err)
	}
	if err := s.KVDelete(ctx, "ns", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.KVSet(ctx, "ns", "c", bytes.Repeat([]byte("v"), 58)); err != nil { // 41 + 1+58 = 100
		t.Errorf("after a delete: %v", err)
	}
	// Shrinking a value frees bytes too.
	if err := s.KVSet(ctx, "ns", "b", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.KVSet(ctx, "ns", "c", bytes.Repeat([]byte("v"), 98)); err != nil {
		t.Errorf("after shrinking b: %v", err)
	}
	var keys, total int64
	s.reader.QueryRowContext(ctx, `SELECT kv_keys, kv_bytes FROM namespace_usage WHERE namespace = 'ns'`).Scan(&keys, &total)
	if keys != 2 || total != 1+0+1+98 {
		t.Errorf("usage = %d keys, %d bytes; want 2, 100", keys, total)
	}
}

// kvDump renders a namespace's entries and usage, to compare before and after.
func kvDump(t *testing.T, s *Store, ns string) string {
	t.Helper()
	rows, err := s.reader.QueryContext(t.Context(), `SELECT key, hex(value) FROM kv WHERE namespace = ? ORDER BY key`, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var k, v string
		rows.Scan(&k, &v)
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	var keys, total int64
	s.reader.QueryRowContext(t.Context(), `SELECT kv_keys, kv_bytes FROM namespace_usage WHERE namespace = ?`, ns).Scan(&keys, &total)
	fmt.Fprintf(&b, "usage %d %d\n", keys, total)
	return b.String()
}
