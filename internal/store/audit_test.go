package store

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3/driver"
)

// auditLog writes n audit rows of mixed kinds to a new database and closes
// it, returning its path.
func auditLog(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "buddy.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{AuditInvocation, AuditApproval, AuditInstall, AuditRemove, AuditConfig}
	for i := range n {
		e := AuditEntry{Time: time.Unix(1_800_000_000+int64(i), 0), Kind: kinds[i%len(kinds)], Skill: "read_file",
			Outcome: "ok", Paths: []string{"/home/u/a.txt"}, Hosts: []string{"x.example"}, Addresses: []string{"93.184.215.14:443"},
			BytesRead: int64(i), Fuel: uint64(i) * 1000}
		if _, err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// tamper runs SQL on the database file directly, as another process with
// the user's rights could.
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := driver.Open("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func verify(t *testing.T, path string) AuditReport {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.VerifyAudit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// rehash recomputes the hash of row id from its content, as a tamperer who
// knows the encoding would, and returns the new hash.
func rehash(t *testing.T, path string, id int64) {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Audit(t.Context(), "", 0)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID == id {
			tamper(t, path, "DROP TRIGGER IF EXISTS audit_append_only",
				"UPDATE audit SET hash = '"+auditHash(r, r.PrevHash)+"' WHERE id = "+itoa(id))
			return
		}
	}
	t.Fatalf("no row %d", id)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestVerifyAudit(t *testing.T) {
	const dropTrigger = "DROP TRIGGER audit_append_only"
	tests := []struct {
		name   string
		tamper func(t *testing.T, path string)
		kind   string // "" = intact
		id     int64
	}{
		{"intact", func(*testing.T, string) {}, "", 0},
		{"the update trigger still refuses edits", func(t *testing.T, path string) {
			db, err := driver.Open("file:" + path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(t.Context(), "UPDATE audit SET outcome = 'denied' WHERE id = 2"); err == nil {
				t.Fatal("the trigger let an audit row be updated")
			}
		}, "", 0},
		{"outcome edited", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET outcome = 'denied' WHERE id = 3")
		}, "edited", 3},
		{"path list edited", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, `UPDATE audit SET paths = '["/tmp/other"]' WHERE id = 2`)
		}, "edited", 2},
		{"edited and re-hashed", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET skill = 'fetch_url' WHERE id = 3")
			rehash(t, path, 3)
		}, "edited", 3}, // no id gap, and row 4 was chained to a hash no row has
		{"hash removed", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET hash = '' WHERE id = 5")
		}, "edited", 5},
		{"row deleted", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id = 3")
		}, "deleted", 4},
		{"first row deleted", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id = 1")
		}, "deleted", 2},
		{"last rows deleted", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id >= 5")
		}, "deleted", 0},
		{"rows swapped", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET id = 100 WHERE id = 2", "UPDATE audit SET id = 2 WHERE id = 3", "UPDATE audit SET id = 3 WHERE id = 100")
		}, "reordered", 2},
		{"row inserted, later ids renumbered", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger,
				"UPDATE audit SET id = id + 100 WHERE id >= 3",
				"UPDATE audit SET id = id - 99 WHERE id >= 103",
				`INSERT INTO audit (id, time, kind, skill, outcome, prev_hash, hash)
					SELECT 3, time, kind, 'fetch_url', 'ok', hash, 'forged' FROM audit WHERE id = 2`)
		}, "inserted", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := auditLog(t, 6)
			tc.tamper(t, path)
			rep := verify(t, path)
			if tc.kind == "" {
				if rep.Problem != nil || rep.Rows != 6 {
					t.Fatalf("report = %+v (%v), want 6 intact rows", rep, rep.Problem)
				}
				return
			}
			if rep.Problem == nil {
				t.Fatalf("tampering not seen: %+v", rep)
			}
			if rep.Problem.Kind != tc.kind || rep.Problem.ID != tc.id {
				t.Fatalf("problem = %v, want %s at row %d", rep.Problem, tc.kind, tc.id)
			}
		})
	}
}

// TestAuditSealsOldRows: rows written before schema v3 have no hash; the
// first append after the upgrade chains them, and the log verifies.
func TestAuditSealsOldRows(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "buddy.db")
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	migrations = saved[:2]
	old, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, skill := range []string{"a", "b"} {
		if _, err := old.writer.ExecContext(ctx, `INSERT INTO audit (time, skill, outcome) VALUES (1, ?, 'ok')`, skill); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	migrations = saved
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.VerifyAudit(ctx)
	if err != nil || rep.Problem != nil || rep.Unsealed != 2 {
		t.Fatalf("before any append: %+v, %v; want 2 unsealed rows", rep, err)
	}
	if _, err := s.AppendAudit(ctx, AuditEntry{Skill: "c", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	rep, err = s.VerifyAudit(ctx)
	if err != nil || rep.Problem != nil || rep.Unsealed != 0 || rep.Rows != 3 {
		t.Fatalf("after an append: %+v, %v; want 3 chained rows", rep, err)
	}
	rows, _ := s.Audit(ctx, "", 0)
	if rows[0].PrevHash != "" || rows[1].PrevHash != rows[0].Hash || rows[2].PrevHash != rows[1].Hash {
		t.Fatalf("chain = %+v", rows)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE audit SET outcome = 'x' WHERE id = 1`); err == nil {
		t.Fatal("a sealed row was updated")
	}
}
