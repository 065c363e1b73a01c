package hostile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Snapshot describes every entry under dir, by path relative to dir: its
// type and permission bits, and a symlink's target or a regular file's size
// and sha256. It opens nothing but regular files (never a FIFO or a device),
// and follows no symlink. Compare two snapshots with Diff.
func Snapshot(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	return SnapshotExcept(tb, dir, nil)
}

// SnapshotExcept is Snapshot without the entries (and subtrees) skip selects;
// skip gets paths relative to dir.
func SnapshotExcept(tb testing.TB, dir string, skip func(rel string) bool) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + t
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += fmt.Sprintf(" %d bytes sha256 %s", len(b), hex.EncodeToString(sum[:8]))
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Diff lists what differs between two snapshots ("created x", "removed x",
// "changed x: before => after"), sorted; entries skip selects are ignored.
func Diff(before, after map[string]string, skip func(rel string) bool) []string {
	var diffs []string
	for k, v := range before {
		if skip != nil && skip(k) {
			continue
		}
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if w != v {
			diffs = append(diffs, "changed "+k+": "+v+" => "+w)
		}
	}
	for k := range after {
		if skip != nil && skip(k) {
			continue
		}
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "created "+k)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// InRoot returns a skip function for SnapshotExcept and Diff that selects
// root's subtree, for a snapshot of root's parent: what is outside the root
// must never change.
func InRoot(root string) func(rel string) bool {
	name := filepath.Base(root)
	return func(rel string) bool {
		return rel == name || len(rel) > len(name) && rel[:len(name)] == name && rel[len(name)] == filepath.Separator
	}
}
