package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestSkillsFingerprintAcrossProcesses: a second Store on the same file (as
// the CLI is to a running server) installs, upgrades and removes skills; the
// first Store's fingerprint changes after each change, is the table's own
// answer, and costs no query while nothing changed.
func TestSkillsFingerprintAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	server := openTest(t, Options{})
	cli, err := Open(ctx, server.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close(context.Background())

	upgraded := testSkill("echo")
	upgraded.SHA256 = strings.Repeat("b", 64)
	changes := []struct {
		name string
		do   func() error
	}{
		{"install", func() error { return cli.InsertSkill(ctx, testSkill("echo")) }},
		{"install another", func() error { return cli.InsertSkill(ctx, testSkill("fetch")) }},
		{"upgrade", func() error { return cli.ReplaceSkill(ctx, upgraded) }},
		{"remove", func() error { return cli.DeleteSkill(ctx, "fetch") }},
		{"remove the last", func() error { return cli.DeleteSkill(ctx, "echo") }},
	}
	last := mustFingerprint(t, server)
	seen := map[string]string{last: "start"}
	for _, c := range changes {
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fp := mustFingerprint(t, server)
		if fp == last {
			t.Fatalf("%s: the fingerprint did not change (%s)", c.name, fp)
		}
		if want := mustQuery(t, server); fp != want {
			t.Fatalf("%s: fingerprint %s, the table says %s", c.name, fp, want)
		}
		if prev, ok := seen[fp]; ok && c.name != "remove the last" {
			t.Fatalf("%s: fingerprint %s repeats that of %s", c.name, fp, prev)
		}
		seen[fp] = c.name
		last = fp

		// Nothing changed since: no query, the same answer.
		before := server.fingerprints.Load()
		for range 3 {
			if got := mustFingerprint(t, server); got != fp {
				t.Fatalf("%s: fingerprint moved to %s without a change", c.name, got)
			}
		}
		if n := server.fingerprints.Load() - before; n != 0 {
			t.Fatalf("%s: %d queries while nothing changed, want 0", c.name, n)
		}
	}
	// A status change alone changes nothing.
	if err := cli.InsertSkill(ctx, testSkill("echo")); err != nil {
		t.Fatal(err)
	}
	fp := mustFingerprint(t, server)
	if err := cli.SetSkillStatus(ctx, "echo", StatusUnverified); err != nil {
		t.Fatal(err)
	}
	if got, table := mustFingerprint(t, server), mustQuery(t, server); got != fp || table != fp {
		t.Fatalf("a status change moved the fingerprint %s → %s (the table says %s)", fp, got, table)
	}
}

// TestSkillsStampThroughSymlink: processes reaching one database through
// different paths (a symlink to the file, a symlinked directory) share one
// stamp and one setup lock, as they share one database.
func TestSkillsStampThroughSymlink(t *testing.T) {
	ctx := t.Context()
	server := openTest(t, Options{})
	links := t.TempDir()
	fileLink := filepath.Join(links, "linked.db")
	must(t, os.Symlink(server.Path(), fileLink))
	dirLink := filepath.Join(links, "data")
	must(t, os.Symlink(filepath.Dir(server.Path()), dirLink))
	for i, path := range []string{fileLink, filepath.Join(dirLink, filepath.Base(server.Path()))} {
		before := mustFingerprint(t, server)
		cli, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = cli.InsertSkill(ctx, testSkill(fmt.Sprintf("linked%d", i)))
		cli.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if after := mustFingerprint(t, server); after == before || after != mustQuery(t, server) {
			t.Fatalf("through %s: fingerprint %s → %s; the table says %s", path, before, after, mustQuery(t, server))
		}
	}
	for _, pattern := range []string{"*.skills", "*.lock"} {
		if matches, _ := filepath.Glob(filepath.Join(links, pattern)); len(matches) != 0 {
			t.Fatalf("a file named after the link, not the database: %v", matches)
		}
	}
}

// TestSkillsStampUnusable: without a usable stamp (removed, replaced by a
// directory or a symlink, or rotated) the fingerprint is still exact:
// every call queries until a regular stamp is back, and a change made
// meanwhile is seen.
func TestSkillsStampUnusable(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name  string
		spoil func(t *testing.T, stamp string)
		// recreated: whether the next change leaves a regular stamp (one
		// that is not a regular file is removed, if it can be).
		recreated bool
	}{
		{"removed", func(t *testing.T, stamp string) { must(t, os.Remove(stamp)) }, true},
		{"a directory", func(t *testing.T, stamp string) {
			must(t, os.Remove(stamp))
			must(t, os.Mkdir(stamp, 0o700))
		}, false}, // removed
		{"a directory that cannot be removed", func(t *testing.T, stamp string) {
			must(t, os.Remove(stamp))
			must(t, os.MkdirAll(filepath.Join(stamp, "inside"), 0o700))
		}, false}, // left: readers do not trust it
		{"a symlink", func(t *testing.T, stamp string) {
			must(t, os.Remove(stamp))
			must(t, os.Symlink(filepath.Join(filepath.Dir(stamp), "elsewhere"), stamp))
		}, false}, // removed, not followed
		{"grown to its rotation size", func(t *testing.T, stamp string) {
			must(t, os.WriteFile(stamp, make([]byte, stampRotate), 0o600))
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := openTest(t, Options{})
			cli, err := Open(ctx, server.Path(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close(context.Background())
			stamp := server.stamp.path
			before := mustFingerprint(t, server)
			tt.spoil(t, stamp)
			if err := cli.InsertSkill(ctx, testSkill("echo")); err != nil {
				t.Fatalf("install with the stamp %s: %v", tt.name, err)
			}
			after := mustFingerprint(t, server)
			if after == before || after != mustQuery(t, server) {
				t.Fatalf("fingerprint %s → %s after an install; the table says %s", before, after, mustQuery(t, server))
			}
			fi, err := os.Lstat(stamp)
			regular := err == nil && fi.Mode().IsRegular()
			if regular != tt.recreated {
				t.Fatalf("after the install the stamp is regular: %v, want %v (%v)", regular, tt.recreated, err)
			}
			if tt.name == "a symlink" {
				if _, err := os.Stat(filepath.Join(filepath.Dir(stamp), "elsewhere")); err == nil {
					t.Fatal("the stamp's symlink was followed")
				}
			}
			if tt.name == "grown to its rotation size" && fi.Size() != 1 {
				t.Fatalf("a rotated stamp holds %d bytes, want 1", fi.Size())
			}
			n := server.fingerprints.Load()
			mustFingerprint(t, server)
			queried := server.fingerprints.Load() - n
			if want := map[bool]int64{true: 0, false: 1}[regular]; queried != want {
				t.Fatalf("an unchanged fingerprint cost %d queries with a regular stamp %v, want %d", queried, regular, want)
			}
			// Another process opens the database all the same.
			again, err := Open(ctx, server.Path(), Options{})
			if err != nil {
				t.Fatalf("open with the stamp %s: %v", tt.name, err)
			}
			again.Close(context.Background())
		})
	}
}

// TestSkillsStampOpen: every open stamps (a migration may change skills), and
// the stamp is the owner's alone.
func TestSkillsStampOpen(t *testing.T) {
	s := openTest(t, Options{})
	stamp := s.stamp.path
	fi, err := os.Lstat(stamp)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("stamp mode %v, want 0600", fi.Mode().Perm())
	}
	again, err := Open(t.Context(), s.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	again.Close(context.Background())
	if fi2, err := os.Lstat(stamp); err != nil || fi2.Size() != fi.Size()+1 {
		t.Fatalf("after another open the stamp is %v (%v), want %d bytes", fi2, err, fi.Size()+1)
	}
}

func mustFingerprint(t *testing.T, s *Store) string {
	t.Helper()
	fp, err := s.SkillsFingerprint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func mustQuery(t *testing.T, s *Store) string {
	t.Helper()
	fp, err := s.queryFingerprint(context.WithoutCancel(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSkillsChangeNotAnnounced: when the stamp can be neither appended to nor
// removed, a change of installed skills is still committed, and its error
// says so (ErrNotAnnounced) for the caller to finish what follows it.
func TestSkillsChangeNotAnnounced(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Options{})
	// A stamp "inside" a regular file: every operation on it fails with
	// ENOTDIR, whoever runs the test (root included).
	blocker := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(blocker, nil, 0o600))
	s.stamp.path = filepath.Join(blocker, "buddy.db.skills")
	for _, change := range []struct {
		name string
		do   func() error
		rows int
	}{
		{"insert", func() error { return s.InsertSkill(ctx, testSkill("echo")) }, 1},
		{"replace", func() error { return s.ReplaceSkill(ctx, testSkill("echo")) }, 1},
		{"delete", func() error { return s.DeleteSkill(ctx, "echo") }, 0},
	} {
		err := change.do()
		if !errors.Is(err, ErrNotAnnounced) || !errors.Is(err, errs.ErrUnavailable) {
			t.Fatalf("%s: err = %v, want ErrNotAnnounced (unavailable)", change.name, err)
		}
		rows, err := s.ListSkills(ctx)
		if err != nil || len(rows) != change.rows {
			t.Fatalf("%s: %d rows (%v), want %d: the change is committed", change.name, len(rows), err, change.rows)
		}
	}
}
