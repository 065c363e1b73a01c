package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/buddy-run/buddy/internal/base/osfile"
)

// The skills stamp. A running server asks SkillsFingerprint before every use
// of its catalog (several times a call), so that a skill installed or removed
// by another process is seen at once; the query costs a read transaction each
// time. Instead, every install, upgrade and removal, by any buddy process, is
// followed by one byte appended to a file next to the database (<db>.skills),
// whose size therefore only grows; SkillsFingerprint queries the table only
// when that file is not the one, or not the size, it saw before its last
// query, and otherwise returns that query's answer. A stat is a few
// microseconds.
//
// The stamp is looked at before the query, so no answer is kept for a stamp
// newer than what it read, and a change is stamped after its commit, before
// the process that made it goes on. A process killed between the two (a
// window of microseconds) leaves its change unseen by a running server until
// the next buddy command opens the database, which stamps. Without a usable
// stamp (removed, not a regular file) every call queries, as before: a change
// whose stamp cannot be appended removes it. The stamp is named after the
// database file with symlinks resolved, as SQLite resolves them, so that
// every process reaching one database through any link shares one stamp.

// stampRotate: a stamp this large is replaced by a new file of one byte (a
// new file is a change too). Every Open appends a byte, so it grows with use.
const stampRotate = 64 << 10

// skillsStamp is a Store's view of its stamp.
type skillsStamp struct {
	path string
	mu   sync.Mutex
	seen fs.FileInfo // the stamp just before the query that gave fp
	fp   string
}

// stampSuffix names the stamp after the database's real path.
const stampSuffix = ".skills"

// SkillsFingerprint is a short value that changes whenever a skill is
// installed, upgraded or removed (by this process or another): a long-running
// reader compares it with the last one it saw instead of listing every row.
// A status change alone does not change it.
func (s *Store) SkillsFingerprint(ctx context.Context) (string, error) {
	st := &s.stamp
	before, err := os.Lstat(st.path)
	usable := err == nil && before.Mode().IsRegular()
	if usable {
		st.mu.Lock()
		if st.seen != nil && sameStamp(st.seen, before) {
			fp := st.fp
			st.mu.Unlock()
			return fp, nil
		}
		st.mu.Unlock()
	}
	fp, err := s.queryFingerprint(ctx)
	if err != nil {
		return "", err
	}
	if usable {
		st.mu.Lock()
		st.seen, st.fp = before, fp
		st.mu.Unlock()
	}
	return fp, nil
}

func sameStamp(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// queryFingerprint computes the fingerprint from the table.
func (s *Store) queryFingerprint(ctx context.Context) (string, error) {
	s.fingerprints.Add(1)
	var n int64
	var sum, names string
	err := s.readRow(ctx, sqlSkillsFingerprint).Scan(&n, &sum, &names)
	if err != nil {
		return "", dbErr(ctx, "fingerprinting installed skills", err)
	}
	h := sha256.Sum256([]byte(names))
	return fmt.Sprintf("%d/%s/%x", n, sum, h[:8]), nil
}

// stampSkills stamps a change of installed_skills (or an open). If the
// stamp cannot be appended it is removed, so that readers query every time;
// it fails only when a regular stamp is left, which readers would trust.
func (s *Store) stampSkills() error {
	err := appendStamp(s.stamp.path)
	if err == nil {
		return nil
	}
	if rmErr := os.Remove(s.stamp.path); rmErr == nil || errors.Is(rmErr, fs.ErrNotExist) {
		return nil
	}
	if fi, lerr := os.Lstat(s.stamp.path); lerr == nil && !fi.Mode().IsRegular() {
		return nil // readers do not trust it: they query every time
	}
	return fmt.Errorf("cannot update or remove %s: %w", s.stamp.path, err)
}

// appendStamp appends one byte to the stamp at path, creating it (0600), or
// replaces it by a new one-byte file once it has grown to stampRotate. A
// stamp that is not a regular file (a symlink, a directory) is an error.
func appendStamp(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Size() >= stampRotate:
		return replaceStamp(path)
	}
	f, err := os.OpenFile(path, stampFlags, 0o600)
	if err != nil {
		return err
	}
	fi, err = f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	default:
		_, err = f.Write([]byte{'+'})
	}
	return errors.Join(err, f.Close())
}

// replaceStamp writes a new one-byte stamp and renames it over the old one.
func replaceStamp(path string) error {
	return osfile.WriteAtomic(path, []byte{'+'}, 0o600)
}

// Files are the database at path and every file the store keeps beside it
// (SQLite's journal, WAL and shared memory, the lock, the audit key and
// head, the skills stamp), by the path given and by its real path: what no
// skill may read or replace (hostfns.Deps.PrivateFiles).
func Files(path string) []string {
	bases := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		bases = append(bases, real)
	}
	var out []string
	for _, b := range bases {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal", ".lock", auditKeySuffix, auditHeadSuffix, stampSuffix} {
			out = append(out, b+suffix)
		}
	}
	return out
}
