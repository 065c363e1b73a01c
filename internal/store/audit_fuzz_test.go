package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3/driver"
)

// auditFuzzColumns are the audit table's columns a mutation may change, and
// whether each holds an integer.
var auditFuzzColumns = []struct {
	name    string
	integer bool
}{
	{"id", true}, {"time", true}, {"kind", false}, {"conversation", false}, {"skill", false},
	{"version", false}, {"module_sha256", false}, {"arguments_hash", false}, {"outcome", false},
	{"detail", false}, {"asked", true}, {"fuel", true}, {"duration_us", true}, {"bytes_in", true},
	{"bytes_out", true}, {"bytes_read", true}, {"bytes_written", true}, {"paths", false},
	{"hosts", false}, {"addresses", false}, {"prev_hash", false}, {"hash", false}, {"credentials", false},
}

// Mutations of FuzzVerifyAudit.
const (
	fuzzSet        = iota // set a column of a row to the value
	fuzzDelete            // delete a row
	fuzzDeleteSeq         // delete a row and set the counter to the last id left
	fuzzCopy              // append a copy of a row with a column set to the value
	fuzzBlankChain        // blank prev_hash and hash of a row and every later one
	fuzzOps
)

// FuzzVerifyAudit mutates the rows of a valid log as SQL access to the
// database alone could (a column's bytes, a hash, an id; a row deleted, with
// or without the counter rewritten, or copied) and checks that VerifyAudit
// never panics, never calls intact a log whose rows differ from the rows
// written, and calls intact one whose rows are unchanged.
func FuzzVerifyAudit(f *testing.F) {
	tmpl := filepath.Join(f.TempDir(), "buddy.db")
	s, err := Open(f.Context(), tmpl, Options{})
	if err != nil {
		f.Fatal(err)
	}
	entries := []AuditEntry{
		testAuditEntry(0),
		{Kind: AuditApproval, Conversation: "c1", Skill: "write_file", Outcome: "approved", Asked: true,
			Detail: "asked because: write; caf\u00e9 \xff\xfe", Paths: []string{"/home/u/out.txt", "/home/u/b"}},
		{Kind: AuditInvocation, Conversation: "c1", Skill: "write_file", Outcome: "ok", Fuel: 1 << 63, BytesWritten: 5},
		{Kind: AuditInvocation, Conversation: "c1", Skill: "gh", Outcome: "ok", Hosts: []string{"api.github.com"}, Credentials: []string{"github"}},
		{Kind: AuditConfig, Outcome: "changed", ArgumentsHash: strings.Repeat("cd", 32)},
		testAuditEntry(4),
	}
	if _, err := s.AppendAudits(f.Context(), entries[:2]...); err != nil {
		f.Fatal(err)
	}
	for _, e := range entries[2:] {
		if _, err := s.AppendAudit(f.Context(), e); err != nil {
			f.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		f.Fatal(err)
	}
	written := dumpAudit(f, tmpl)

	col := func(name string) uint8 {
		return uint8(slices.IndexFunc(auditFuzzColumns, func(c struct {
			name    string
			integer bool
		}) bool {
			return c.name == name
		}))
	}
	for _, seed := range []struct {
		op, row, col uint8
		value        []byte
	}{
		{fuzzSet, 2, col("outcome"), []byte("denied")},
		{fuzzSet, 1, col("outcome"), []byte("ok")}, // the value it has: unchanged
		{fuzzSet, 2, col("detail"), []byte("asked because: write; caf\u00e9 \xff\xff")},
		{fuzzSet, 2, col("paths"), []byte(`["/home/u/out.txt","/home/u/b"] `)},
		{fuzzSet, 3, col("fuel"), []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{fuzzSet, 2, col("asked"), []byte{2}},
		{fuzzSet, 4, col("hash"), nil},
		{fuzzSet, 5, col("prev_hash"), []byte(strings.Repeat("0", 64))},
		{fuzzSet, 5, col("id"), []byte{9}},
		{fuzzSet, 1, col("id"), []byte{0}},
		{fuzzSet, 3, col("id"), []byte{2}}, // taken: unchanged
		{fuzzDelete, 5, 0, nil},
		{fuzzDelete, 1, 0, nil},
		{fuzzDeleteSeq, 5, 0, nil},
		{fuzzDeleteSeq, 3, 0, nil},
		{fuzzCopy, 2, col("skill"), []byte("fetch_url")},
		{fuzzCopy, 5, col("time"), []byte{1}},
		{fuzzBlankChain, 1, 0, nil},
		{fuzzBlankChain, 4, 0, nil},
		{fuzzSet, 4, col("credentials"), nil},                   // a credential's name taken out
		{fuzzSet, 2, col("credentials"), []byte(`["github"]`)},  // one put in a row that had none
		{fuzzSet, 4, col("credentials"), []byte(`["github"] `)}, // respelled
	} {
		f.Add(seed.op, seed.row, seed.col, seed.value)
	}

	f.Fuzz(func(t *testing.T, op, row, colIndex uint8, value []byte) {
		path := copyAuditLog(t, tmpl)
		mutateAudit(t, path, op%fuzzOps, int64(row%8), auditFuzzColumns[int(colIndex)%len(auditFuzzColumns)], value)
		changed := dumpAudit(t, path) != written
		rep, err := verifyErr(t, path)
		switch {
		case changed && err == nil && rep.Problem == nil:
			t.Fatalf("the rows differ from the rows written, and the log verifies: %+v", rep)
		case !changed && (err != nil || rep.Problem != nil):
			t.Fatalf("the rows are unchanged, and the log does not verify: %+v (%v), %v", rep, rep.Problem, err)
		}
	})
}

// mutateAudit applies one mutation to the database at path; one that SQLite
// refuses (an id already taken) changes nothing.
func mutateAudit(t *testing.T, path string, op uint8, row int64, col struct {
	name    string
	integer bool
}, value []byte) {
	t.Helper()
	db, err := driver.Open(fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `DROP TRIGGER audit_append_only`); err != nil {
		t.Fatal(err)
	}
	var v any = string(value)
	if col.integer {
		var n int64
		for _, b := range value[:min(len(value), 8)] {
			n = n<<8 | int64(b)
		}
		v = n
	}
	switch op {
	case fuzzSet:
		_, _ = db.ExecContext(ctx, `UPDATE audit SET `+col.name+` = ? WHERE id = ?`, v, row)
	case fuzzDelete:
		_, _ = db.ExecContext(ctx, `DELETE FROM audit WHERE id = ?`, row)
	case fuzzDeleteSeq:
		_, _ = db.ExecContext(ctx, `DELETE FROM audit WHERE id = ?`, row)
		_, _ = db.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = (SELECT coalesce(max(id), 0) FROM audit) WHERE name = 'audit'`)
	case fuzzCopy:
		if col.name == "id" {
			return
		}
		cols := make([]string, 0, len(auditFuzzColumns))
		for _, c := range auditFuzzColumns[1:] {
			cols = append(cols, c.name)
		}
		list := strings.Join(cols, ", ")
		sel := strings.Replace(list, col.name, "?", 1)
		_, _ = db.ExecContext(ctx, `INSERT INTO audit (`+list+`) SELECT `+sel+` FROM audit WHERE id = ?`, v, row)
	case fuzzBlankChain:
		_, _ = db.ExecContext(ctx, `UPDATE audit SET prev_hash = '', hash = '' WHERE id >= ?`, row)
	}
}

// dumpAudit is every audit row of the database at path, every column as
// stored.
func dumpAudit(tb testing.TB, path string) string {
	tb.Helper()
	db, err := driver.Open(fileURI(path))
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(tb.Context(), `SELECT `+auditColumns+` FROM audit ORDER BY id`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	vals := make([]any, len(auditFuzzColumns))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%#v\n", vals)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// fileURI is path as a SQLite URI (a fuzz test's directory has a '#' in
// its name).
func fileURI(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath()
}

// copyAuditLog copies the database at path, with its audit key and head,
// into a new directory, and returns the copy's path.
func copyAuditLog(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	for _, suffix := range []string{"", "-wal", auditKeySuffix, auditHeadSuffix} {
		b, err := os.ReadFile(path + suffix)
		if errors.Is(err, fs.ErrNotExist) && suffix == "-wal" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
