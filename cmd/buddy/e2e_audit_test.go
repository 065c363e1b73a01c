//go:build unix

package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3/driver"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestAuditListAndVerify: CLI calls are audited with what they touched, the
// log verifies, and an edit of the SQLite file made behind buddy's back is
// reported with its row and exit code 14.
func TestAuditListAndVerify(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	dir := filepath.Join(s.dir, "files")
	write(t, filepath.Join(dir, "tax.txt"), "income\n")
	cfg := write(t, filepath.Join(s.dir, "audit.toml"), `
[skills.read_file]
allowed_directories = [`+q(dir)+`]
[skills.write_file]
allowed_directories = [`+q(dir)+`]
`)
	s.run(t, "skill", "run", "read_file", "--config", cfg, "--input", `{"path":"tax.txt"}`).ok(t)
	s.run(t, "skill", "run", "write_file", "--config", cfg, "--yes", "--input", `{"path":"out/new.txt","content":"hello"}`).ok(t)
	s.run(t, "skill", "run", "read_file", "--config", cfg, "--input", `{"path":"/etc/passwd"}`).fails(t, errs.KindForbidden)

	var rows []struct {
		ID           int64    `json:"id"`
		Kind         string   `json:"kind"`
		Skill        string   `json:"skill"`
		Outcome      string   `json:"outcome"`
		Paths        []string `json:"paths"`
		BytesRead    int64    `json:"bytes_read"`
		BytesWritten int64    `json:"bytes_written"`
		Hash         string   `json:"hash"`
	}
	out := s.run(t, "audit", "list", "--json", "--config", cfg).ok(t)
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("audit list --json: %v\n%s", err, out)
	}
	var got []string
	for _, r := range rows {
		line := r.Kind + " " + r.Skill + " " + r.Outcome + " " + strings.Join(r.Paths, ",")
		got = append(got, line)
		if r.Hash == "" {
			t.Errorf("row %d has no hash", r.ID)
		}
	}
	want := []string{
		"config  first seen ",
		"config  changed " + cfg,
		"invocation read_file ok " + dir + "/tax.txt",
		"approval write_file approved " + dir + "/out/new.txt",
		"invocation write_file ok " + dir + "/out/new.txt",
		"invocation read_file forbidden ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rows[2].BytesRead != 7 || rows[4].BytesWritten != 5 {
		t.Errorf("bytes: read %d, written %d", rows[2].BytesRead, rows[4].BytesWritten)
	}
	text := s.run(t, "audit", "list", "--config", cfg).ok(t)
	if !strings.Contains(text, dir+"/tax.txt") || !strings.HasPrefix(text, "ID") {
		t.Errorf("audit list:\n%s", text)
	}
	if out := s.run(t, "audit", "verify", "--config", cfg).ok(t); !strings.Contains(out, "intact: 6 rows") {
		t.Fatalf("audit verify: %q", out)
	}

	// Another process with the user's rights rewrites an outcome.
	tamperAudit(t, filepath.Join(s.dataDir(), "buddy.db"), "UPDATE audit SET outcome = 'ok' WHERE id = 6")
	detail := s.run(t, "audit", "verify", "--config", cfg).fails(t, errs.KindTampered)
	if !strings.Contains(detail, "row 6: edited") {
		t.Fatalf("verify detail %q, want row 6 edited", detail)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "new.txt")); err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerifyRedTeam: the two cheap forgeries found against the
// unkeyed chain, through the real `buddy audit verify`: blanking every hash
// (the rows passed for rows from before the chain, and the next call sealed
// them again), and deleting the last rows with the AUTOINCREMENT counter
// rewritten. Both exit 14 and name the problem, and a later call changes
// nothing to that.
func TestAuditVerifyRedTeam(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stmt string
		want       [2]string // the detail before and after another call
	}{
		{"every hash blanked", "UPDATE audit SET prev_hash = '', hash = ''", [2]string{
			"first problem at row 1: edited: it has no hash",
			"first problem at row 1: edited: it has no hash",
		}},
		{"last rows deleted, counter rewritten",
			"DELETE FROM audit WHERE id > 3; UPDATE sqlite_sequence SET seq = 3 WHERE name = 'audit'", [2]string{
				"first problem at the end of the log: deleted: rows 4 to 5 (the end of the log) are missing",
				"first problem at the end of the log: deleted: row 5 (the end of the log) is missing", // the call wrote a new row 4
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			dir := filepath.Join(s.dir, "files")
			write(t, filepath.Join(dir, "a.txt"), "a\n")
			cfg := write(t, filepath.Join(s.dir, "audit.toml"), `
[skills.read_file]
allowed_directories = [`+q(dir)+`]
`)
			// Two config rows (the first open notes the defaults), then
			// three calls: 5 rows.
			for range 3 {
				s.run(t, "skill", "run", "read_file", "--config", cfg, "--input", `{"path":"a.txt"}`).ok(t)
			}
			if out := s.run(t, "audit", "verify", "--config", cfg).ok(t); out != "audit log intact: 5 rows chained\n" {
				t.Fatalf("audit verify: %q", out)
			}
			tamperAudit(t, filepath.Join(s.dataDir(), "buddy.db"), tc.stmt)
			for _, want := range tc.want {
				detail := s.run(t, "audit", "verify", "--config", cfg).fails(t, errs.KindTampered)
				if !strings.Contains(detail, want) {
					t.Fatalf("verify detail %q, want %q", detail, want)
				}
				s.run(t, "skill", "run", "read_file", "--config", cfg, "--input", `{"path":"a.txt"}`).ok(t)
			}
		})
	}
}

// tamperAudit edits the audit log of the database at path directly, as any
// process with the user's rights could: it drops the append-only trigger
// and runs stmt.
func tamperAudit(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := driver.Open("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"DROP TRIGGER audit_append_only", stmt} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
