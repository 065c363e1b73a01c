package store

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3/driver"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// auditLog writes n audit rows of mixed kinds to a new database and closes
// it, returning its path.
func auditLog(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "buddy.db")
	appendRows(t, path, 0, n)
	return path
}

// appendRows opens the database at path, appends n audit rows (numbered from
// first, for their content) and closes it.
func appendRows(t *testing.T, path string, first, n int) {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i < first+n; i++ {
		if _, err := s.AppendAudit(t.Context(), testAuditEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func testAuditEntry(i int) AuditEntry {
	kinds := []string{AuditInvocation, AuditApproval, AuditInstall, AuditRemove, AuditConfig}
	return AuditEntry{Time: time.Unix(1_800_000_000+int64(i), 0), Kind: kinds[i%len(kinds)], Skill: "read_file",
		Outcome: "ok", Paths: []string{"/home/u/a.txt"}, Hosts: []string{"x.example"}, Addresses: []string{"93.184.215.14:443"},
		BytesRead: int64(i), Fuel: uint64(i) * 1000}
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
	rep, err := verifyErr(t, path)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// verifyErr opens the database at path and verifies its audit log.
func verifyErr(t *testing.T, path string) (AuditReport, error) {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		return AuditReport{}, err
	}
	defer s.Close(context.Background())
	return s.VerifyAudit(t.Context())
}

// rehash recomputes the hash of row id from its content with the unkeyed
// encoding, as a tamperer who knows the encoding but not the key would.
func rehash(t *testing.T, path string, id int64) {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Audit(t.Context(), "", 0)
	s.Close(context.Background())
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

// TestVerifyAudit: every edit made to a log of 6 rows with SQL access to the
// database alone (no audit key) fails verification with its kind, at its
// row (0: the end of the log, or the head); so do a missing or forged head.
func TestVerifyAudit(t *testing.T) {
	const dropTrigger = "DROP TRIGGER audit_append_only"
	// forged is a well-formed hash no key made.
	forged := strings.Repeat("ab", 32)
	tests := []struct {
		name   string
		tamper func(t *testing.T, path string)
		kind   string // "" = intact
		id     int64
		open   error // Open itself refuses the database, with this kind
	}{
		{"intact", func(*testing.T, string) {}, "", 0, nil},
		{"the update trigger still refuses edits", func(t *testing.T, path string) {
			db, err := driver.Open("file:" + path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(t.Context(), "UPDATE audit SET outcome = 'denied' WHERE id = 2"); err == nil {
				t.Fatal("the trigger let an audit row be updated")
			}
			if _, err := db.ExecContext(t.Context(), "UPDATE audit SET prev_hash = '', hash = ''"); err == nil {
				t.Fatal("the trigger let audit hashes be removed")
			}
		}, "", 0, nil},

		// Edits.
		{"outcome edited", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET outcome = 'denied' WHERE id = 3")
		}, AuditEdited, 3, nil},
		{"path list edited", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, `UPDATE audit SET paths = '["/tmp/other"]' WHERE id = 2`)
		}, AuditEdited, 2, nil},
		{"path list rewritten to the same list in other JSON", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, `UPDATE audit SET paths = '[ "/home/u/a.txt" ]' WHERE id = 2`)
		}, AuditEdited, 2, nil},
		{"asked flag set to another true value", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, `UPDATE audit SET asked = 2 WHERE id = 4`)
		}, AuditEdited, 4, nil},
		{"edited and re-hashed without the key", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET skill = 'fetch_url' WHERE id = 3")
			rehash(t, path, 3)
		}, AuditEdited, 3, nil},
		{"hash replaced by a forged one", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET hash = '"+forged+"' WHERE id = 6")
		}, AuditEdited, 6, nil},
		{"last row's prev_hash edited", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET prev_hash = '"+forged+"' WHERE id = 6")
		}, AuditEdited, 6, nil},

		// Hashes blanked: since the log was sealed, a row without a hash is
		// an edit, never a row from before the chain.
		{"every hash blanked (red team 1)", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET prev_hash = '', hash = ''")
		}, AuditEdited, 1, nil},
		{"every hash blanked, then a call is audited", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET prev_hash = '', hash = ''")
			appendRows(t, path, 6, 1) // under v3 this re-sealed the forged rows
		}, AuditEdited, 1, nil},
		{"one hash blanked", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET hash = '' WHERE id = 5")
		}, AuditEdited, 5, nil},
		{"the last hashes blanked", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET prev_hash = '', hash = '' WHERE id >= 5")
		}, AuditEdited, 5, nil},
		{"one prev_hash blanked", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET prev_hash = '' WHERE id = 4")
		}, AuditEdited, 4, nil},
		{"a legacy-looking row added after sealing", func(t *testing.T, path string) {
			tamper(t, path, `INSERT INTO audit (time, skill, outcome) VALUES (1, 'fetch_url', 'ok')`)
		}, AuditEdited, 7, nil},

		// Deletions.
		{"row deleted", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id = 3")
		}, AuditDeleted, 4, nil},
		{"first row deleted", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id = 1")
		}, AuditDeleted, 2, nil},
		{"first rows deleted, ids renumbered, counter rewritten", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "DELETE FROM audit WHERE id <= 2", "UPDATE audit SET id = id - 2",
				"UPDATE sqlite_sequence SET seq = 4 WHERE name = 'audit'")
		}, AuditDeleted, 1, nil},
		{"middle row deleted, ids renumbered, counter rewritten", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "DELETE FROM audit WHERE id = 3", "UPDATE audit SET id = id - 1 WHERE id > 3",
				"UPDATE sqlite_sequence SET seq = 5 WHERE name = 'audit'")
		}, AuditDeleted, 3, nil},
		{"last rows deleted", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id >= 5")
		}, AuditDeleted, 0, nil},
		{"last rows deleted, counter rewritten (red team 2)", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id >= 5", "UPDATE sqlite_sequence SET seq = 4 WHERE name = 'audit'")
		}, AuditDeleted, 0, nil},
		{"last rows deleted, counter rewritten, then calls audited", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit WHERE id >= 5", "UPDATE sqlite_sequence SET seq = 4 WHERE name = 'audit'")
			appendRows(t, path, 100, 3) // rows 5, 6, 7: the head must not move onto them
		}, AuditDeleted, 6, nil},
		{"whole log emptied", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit")
		}, AuditDeleted, 0, nil},
		{"whole log emptied, counter removed", func(t *testing.T, path string) {
			tamper(t, path, "DELETE FROM audit", "DELETE FROM sqlite_sequence WHERE name = 'audit'")
		}, AuditDeleted, 0, nil},
		{"table dropped and made again", func(t *testing.T, path string) {
			var ddl string
			db, err := driver.Open("file:" + path)
			if err != nil {
				t.Fatal(err)
			}
			err = db.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_schema WHERE name = 'audit'`).Scan(&ddl)
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			tamper(t, path, "DROP TABLE audit", ddl)
		}, AuditDeleted, 0, nil},

		// Insertions.
		{"row inserted, later ids renumbered", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger,
				"UPDATE audit SET id = id + 100 WHERE id >= 3",
				"UPDATE audit SET id = id - 99 WHERE id >= 103",
				`INSERT INTO audit (id, time, kind, skill, outcome, prev_hash, hash)
					SELECT 3, time, kind, 'fetch_url', 'ok', hash, 'forged' FROM audit WHERE id = 2`)
		}, AuditInserted, 3, nil},
		{"row appended without the key", func(t *testing.T, path string) {
			tamper(t, path, `INSERT INTO audit (time, skill, outcome, prev_hash, hash)
				SELECT time + 1, 'fetch_url', 'ok', hash, '`+forged+`' FROM audit WHERE id = 6`)
		}, AuditEdited, 7, nil},
		{"a row copied to the end", func(t *testing.T, path string) {
			tamper(t, path, `INSERT INTO audit (time, kind, conversation, skill, version, module_sha256, arguments_hash,
				outcome, detail, asked, fuel, duration_us, bytes_in, bytes_out, bytes_read, bytes_written, paths, hosts,
				addresses, prev_hash, hash) SELECT time, kind, conversation, skill, version, module_sha256, arguments_hash,
				outcome, detail, asked, fuel, duration_us, bytes_in, bytes_out, bytes_read, bytes_written, paths, hosts,
				addresses, prev_hash, hash FROM audit WHERE id = 3`)
		}, AuditInserted, 7, nil},

		// Order and ids.
		{"rows swapped", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET id = 100 WHERE id = 2", "UPDATE audit SET id = 2 WHERE id = 3", "UPDATE audit SET id = 3 WHERE id = 100")
		}, AuditReordered, 2, nil},
		{"ids renumbered", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET id = id + 100", "UPDATE sqlite_sequence SET seq = 106 WHERE name = 'audit'")
		}, AuditEdited, 101, nil},
		{"last id moved on", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET id = 10 WHERE id = 6")
		}, AuditEdited, 10, nil},

		// The schema version set back, to have the log taken for one from
		// before the chain (and its rows sealed again).
		{"schema version set back to 3, hashes blanked", func(t *testing.T, path string) {
			tamper(t, path, dropTrigger, "UPDATE audit SET prev_hash = '', hash = ''", "PRAGMA user_version = 3")
		}, "", 0, errs.ErrTampered},
		{"schema version set back to 2", func(t *testing.T, path string) {
			tamper(t, path, "PRAGMA user_version = 2")
		}, "", 0, errs.ErrTampered},
		{"database deleted (a new one is made in its place)", func(t *testing.T, path string) {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
			}
		}, "", 0, errs.ErrTampered},

		// The head itself (file access, not SQL).
		{"audit head removed", func(t *testing.T, path string) {
			must(t, os.Remove(path+auditHeadSuffix))
		}, AuditUnverifiable, 0, nil},
		{"audit head edited", func(t *testing.T, path string) {
			b, err := os.ReadFile(path + auditHeadSuffix)
			must(t, err)
			must(t, os.WriteFile(path+auditHeadSuffix, bytes.Replace(b, []byte("id 6"), []byte("id 4"), 1), 0o600))
		}, AuditUnverifiable, 0, nil},
		{"audit head not a head", func(t *testing.T, path string) {
			must(t, os.WriteFile(path+auditHeadSuffix, []byte("id 4\n"), 0o600))
		}, AuditUnverifiable, 0, nil},
		{"audit key replaced", func(t *testing.T, path string) {
			must(t, os.Remove(path+auditKeySuffix)) // Open makes a new one
		}, AuditUnverifiable, 0, nil},
		{"audit head removed, whole log emptied", func(t *testing.T, path string) {
			must(t, os.Remove(path+auditHeadSuffix))
			tamper(t, path, "DELETE FROM audit")
		}, AuditUnverifiable, 0, nil},
		{"audit head removed, last rows deleted", func(t *testing.T, path string) {
			must(t, os.Remove(path+auditHeadSuffix))
			tamper(t, path, "DELETE FROM audit WHERE id >= 5", "UPDATE sqlite_sequence SET seq = 4 WHERE name = 'audit'")
		}, AuditUnverifiable, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := auditLog(t, 6)
			tc.tamper(t, path)
			rep, err := verifyErr(t, path)
			if tc.open != nil {
				if !errors.Is(err, tc.open) {
					t.Fatalf("Open: %v, want %v", err, tc.open)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.kind == "" {
				if rep.Problem != nil || rep.Rows != 6 || rep.Keyed != 6 || rep.HeadID != 6 {
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

// TestVerifyAuditHonest: logs written as buddy writes them verify, however
// they were written: fresh, across reopens, by concurrent appends from two
// stores (two processes) while a third verifies, and with a head that lags
// its rows (a crash between a commit and the head's update).
func TestVerifyAuditHonest(t *testing.T) {
	t.Run("fresh log", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "buddy.db")
		rep := verify(t, path)
		if rep.Problem != nil || rep.Rows != 0 || rep.HeadID != 0 {
			t.Fatalf("report = %+v (%v), want an empty intact log", rep, rep.Problem)
		}
	})
	t.Run("written across reopens", func(t *testing.T) {
		path := auditLog(t, 3)
		appendRows(t, path, 3, 2)
		appendRows(t, path, 5, 1)
		rep := verify(t, path)
		if rep.Problem != nil || rep.Rows != 6 || rep.HeadID != 6 {
			t.Fatalf("report = %+v (%v), want 6 intact rows", rep, rep.Problem)
		}
	})
	t.Run("concurrent appends, two stores, verified meanwhile", func(t *testing.T) {
		const workers, each = 4, 10
		path := filepath.Join(t.TempDir(), "buddy.db")
		ctx := t.Context()
		stores := make([]*Store, 3)
		for i := range stores {
			s, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			stores[i] = s
		}
		done := make(chan struct{})
		var verified sync.WaitGroup
		verified.Go(func() {
			for {
				rep, err := stores[2].VerifyAudit(ctx)
				if err != nil || rep.Problem != nil {
					t.Errorf("verify during appends: %+v (%v), %v", rep, rep.Problem, err)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				s := stores[w%2]
				for i := range each {
					actx, wait := ctx, func() error { return nil }
					if i%2 == 1 {
						actx, wait = Deferred(ctx)
					}
					_, err := s.AppendAudits(actx, testAuditEntry(w*100+i), testAuditEntry(w*100+i+50))
					if err == nil {
						err = wait()
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(done)
		verified.Wait()
		rep, err := stores[2].VerifyAudit(ctx)
		if err != nil || rep.Problem != nil || rep.Rows != 2*workers*each || rep.HeadID != int64(rep.Rows) {
			t.Fatalf("after the appends: %+v (%v), %v; want %d rows, the head at the last", rep, rep.Problem, err, 2*workers*each)
		}
	})
	t.Run("head lags its rows", func(t *testing.T) {
		path := auditLog(t, 3)
		old, err := os.ReadFile(path + auditHeadSuffix)
		must(t, err)
		appendRows(t, path, 3, 3)
		must(t, os.WriteFile(path+auditHeadSuffix, old, 0o600)) // as if the last updates never reached the disk
		rep := verify(t, path)
		if rep.Problem != nil || rep.Rows != 6 || rep.HeadID != 3 {
			t.Fatalf("report = %+v (%v), want 6 intact rows, the head at 3", rep, rep.Problem)
		}
		appendRows(t, path, 6, 1) // the next commit catches the head up
		if rep := verify(t, path); rep.Problem != nil || rep.HeadID != 7 {
			t.Fatalf("after an append: %+v (%v), want the head at 7", rep, rep.Problem)
		}
	})
}

// TestAuditUpgradeFromV3: a log written by the v3 code (unkeyed SHA-256
// chain) is anchored by the upgrade, verifies, takes keyed rows after it,
// and rewriting its old rows with their hashes recomputed is seen, before
// and after the first keyed row.
func TestAuditUpgradeFromV3(t *testing.T) {
	v3Log := func(t *testing.T) string {
		ctx := t.Context()
		path := filepath.Join(t.TempDir(), "buddy.db")
		saved := migrations
		t.Cleanup(func() { migrations = saved })
		migrations = saved[:3]
		old, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for i := range 3 {
			e := AuditEntry{Time: time.Unix(1_800_000_000+int64(i), 0).UTC(), Kind: AuditInvocation, Skill: "read_file", Outcome: "ok"}
			h := auditHash(e, prev)
			if _, err := old.writer.ExecContext(ctx, `INSERT INTO audit (time, kind, skill, outcome, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)`,
				unixNanos(e.Time), e.Kind, e.Skill, e.Outcome, prev, h); err != nil {
				t.Fatal(err)
			}
			prev = h
		}
		old.Close(context.Background())
		migrations = saved
		if _, err := os.Stat(path + auditHeadSuffix); err == nil {
			t.Fatal("a v3 database got an audit head")
		}
		return path
	}
	// rewrite changes row 2 of the v3 rows and recomputes the unkeyed
	// hashes of rows 2 and 3, as anyone knowing the encoding could.
	rewrite := func(t *testing.T, path string) {
		tamper(t, path, "DROP TRIGGER audit_append_only", "UPDATE audit SET outcome = 'denied' WHERE id = 2")
		rehash(t, path, 2)
		s, err := Open(t.Context(), path, Options{})
		must(t, err)
		rows, err := s.Audit(t.Context(), "", 0)
		s.Close(context.Background())
		must(t, err)
		var r2, r3 AuditEntry
		for _, r := range rows {
			switch r.ID {
			case 2:
				r2 = r
			case 3:
				r3 = r
			}
		}
		tamper(t, path, "DROP TRIGGER IF EXISTS audit_append_only",
			"UPDATE audit SET prev_hash = '"+r2.Hash+"', hash = '"+auditHash(r3, r2.Hash)+"' WHERE id = 3")
	}

	t.Run("upgraded, then appended", func(t *testing.T) {
		path := v3Log(t)
		rep := verify(t, path)
		if rep.Problem != nil || rep.Rows != 3 || rep.Keyed != 0 || rep.HeadID != 3 {
			t.Fatalf("after the upgrade: %+v (%v), want 3 unkeyed rows, anchored", rep, rep.Problem)
		}
		appendRows(t, path, 0, 2)
		rep = verify(t, path)
		if rep.Problem != nil || rep.Rows != 5 || rep.Keyed != 2 || rep.HeadID != 5 {
			t.Fatalf("after appends: %+v (%v), want 5 rows, 2 keyed", rep, rep.Problem)
		}
	})
	t.Run("old rows rewritten before any keyed row", func(t *testing.T) {
		path := v3Log(t)
		verify(t, path) // the upgrade
		rewrite(t, path)
		if rep := verify(t, path); rep.Problem == nil || rep.Problem.Kind != AuditEdited || rep.Problem.ID != 3 {
			t.Fatalf("problem = %v, want edited at row 3", rep.Problem)
		}
	})
	t.Run("old rows rewritten after keyed rows", func(t *testing.T) {
		path := v3Log(t)
		appendRows(t, path, 0, 2)
		rewrite(t, path)
		if rep := verify(t, path); rep.Problem == nil || rep.Problem.Kind != AuditEdited || rep.Problem.ID != 3 {
			t.Fatalf("problem = %v, want edited at row 3", rep.Problem)
		}
	})
}

// TestAuditKeyRefused: an audit key others may read or write, or that is
// not a regular file, stops Open with a config error naming the fix; the
// key Open creates is 0600, as is the head.
func TestAuditKeyRefused(t *testing.T) {
	path := auditLog(t, 1)
	for _, suffix := range []string{auditKeySuffix, auditHeadSuffix} {
		fi, err := os.Stat(path + suffix)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v; want mode 0600", suffix, fi.Mode(), err)
		}
	}
	if runtime.GOOS == "windows" {
		return
	}
	key := path + auditKeySuffix
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620} {
		must(t, os.Chmod(key, mode))
		_, err := Open(t.Context(), path, Options{})
		if !errors.Is(err, errs.ErrConfig) || !strings.Contains(err.Error(), "chmod 600 "+key) {
			t.Errorf("Open with the key at %04o: %v, want a config error naming chmod 600", mode, err)
		}
	}
	must(t, os.Chmod(key, 0o600))
	must(t, os.Rename(key, key+".real"))
	must(t, os.Symlink(key+".real", key))
	if _, err := Open(t.Context(), path, Options{}); !errors.Is(err, errs.ErrConfig) {
		t.Errorf("Open with the key a symlink: %v, want a config error", err)
	}
}

// TestAuditSealsOldRows: rows written before schema v3 have no hash; the
// upgrade seals them in order, once, and anchors the log, so that it
// verifies before any append. (Under v3 the first append sealed them, and
// any row without a hash was "unsealed" and fine: that was how a log with
// every hash blanked passed as intact.)
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
	old.Close(context.Background())
	migrations = saved
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	rep, err := s.VerifyAudit(ctx)
	if err != nil || rep.Problem != nil || rep.Rows != 2 || rep.Keyed != 0 || rep.HeadID != 2 {
		t.Fatalf("after the upgrade: %+v (%v), %v; want 2 sealed rows, anchored", rep, rep.Problem, err)
	}
	if _, err := s.AppendAudit(ctx, AuditEntry{Skill: "c", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	rep, err = s.VerifyAudit(ctx)
	if err != nil || rep.Problem != nil || rep.Rows != 3 || rep.Keyed != 1 || rep.HeadID != 3 {
		t.Fatalf("after an append: %+v (%v), %v; want 3 chained rows, 1 keyed", rep, rep.Problem, err)
	}
	rows, _ := s.Audit(ctx, "", 0)
	if rows[0].PrevHash != "" || rows[1].PrevHash != rows[0].Hash || rows[2].PrevHash != rows[1].Hash {
		t.Fatalf("chain = %+v", rows)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE audit SET outcome = 'x' WHERE id = 1`); err == nil {
		t.Fatal("a sealed row was updated")
	}
}
