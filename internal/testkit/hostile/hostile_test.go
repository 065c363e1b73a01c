package hostile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/testkit/hostile"
)

// TestTablesAreWellFormed: enough rows, unique, each with kinds that exist.
func TestTablesAreWellFormed(t *testing.T) {
	if n := len(hostile.PathRows); n < 60 {
		t.Errorf("only %d path rows, want at least 60", n)
	}
	if n := len(hostile.URLRows); n < 40 {
		t.Errorf("only %d URL rows, want at least 40", n)
	}
	known := map[errs.Kind]bool{}
	for _, k := range errs.Kinds() {
		known[k] = true
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for _, r := range hostile.PathRows {
		if r.Name == "" || names[r.Name] {
			t.Errorf("path row %q: empty or duplicate name", r.Name)
		}
		if paths[r.Path] {
			t.Errorf("path row %q: duplicate path %q", r.Name, r.Path)
		}
		names[r.Name], paths[r.Path] = true, true
		if !known[r.Read] || !known[r.Write] || !known[r.SkillReadKind()] || !known[r.SkillWriteKind()] {
			t.Errorf("path row %q: unknown kind (read %q, write %q, skill %q, %q)", r.Name, r.Read, r.Write, r.SkillReadKind(), r.SkillWriteKind())
		}
	}
	urls := map[string]bool{}
	for _, r := range hostile.URLRows {
		if urls[r.URL] {
			t.Errorf("duplicate URL row %q", r.URL)
		}
		urls[r.URL] = true
		if !known[r.Fetch] || !known[r.SkillKind()] {
			t.Errorf("URL row %q: unknown kind (fetch %q, skill %q)", r.URL, r.Fetch, r.SkillKind())
		}
		if r.Fetch != errs.KindForbidden && r.Fetch != errs.KindInvalidInput {
			t.Errorf("URL row %q: the static check refuses with forbidden or invalid_input, not %s", r.URL, r.Fetch)
		}
	}
}

func TestPathRowIn(t *testing.T) {
	tests := []struct{ path, want string }{
		{"../x", "../x"},
		{hostile.Root + "/../x", "/b/data/../x"},
		{hostile.Base + "/data-evil/secret", "/b/data-evil/secret"},
		{hostile.Root + "x/secret", "/b/datax/secret"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := (hostile.PathRow{Path: tc.path}).In("/b/data"); got != tc.want {
			t.Errorf("In(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	if got := (hostile.PathRow{}).Content(); got != "wwwww" {
		t.Errorf("default Content = %q", got)
	}
}

// TestBuildTree: the tree has what the rows name, and the snapshot sees it.
func TestBuildTree(t *testing.T) {
	root := hostile.BuildTree(t, filepath.Join(t.TempDir(), "base"))
	if filepath.Base(root) != "data" {
		t.Fatalf("root = %s", root)
	}
	base := filepath.Dir(root)
	for _, p := range []string{"data/hello.txt", "data/big.bin", "data/fifo", "data/sock", "data/link_out_abs", "data/sub/upup",
		"data-evil/secret", "data2/x", "outside/secret.txt"} {
		if _, err := os.Lstat(filepath.Join(base, p)); err != nil {
			t.Errorf("tree lacks %s: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "big.bin")); err != nil || fi.Size() != hostile.MaxBytes+1 {
		t.Errorf("big.bin: %v, %v", fi, err)
	}
	// Every relative row starts with a name the tree has, or a name that is
	// meant to be missing.
	missing := map[string]bool{"..": true, ".": true, "": true, "a": true, "x": true, "new-big.bin": true}
	for _, r := range hostile.PathRows {
		p := r.In(root)
		if filepath.IsAbs(p) || strings.ContainsRune(p, 0) || len(p) > 100 {
			continue
		}
		first := strings.SplitN(p, "/", 2)[0]
		if missing[first] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, first)); err != nil && !(r.Device && !hostile.HasDevice(root)) {
			t.Errorf("row %q: the tree has no %s", r.Name, first)
		}
	}

	before := hostile.Snapshot(t, base)
	if before["data/hello.txt"] == "" || !strings.Contains(before["data/link_out_rel"], "-> ../outside/secret.txt") {
		t.Fatalf("snapshot misses entries: %v", before)
	}
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "outside", "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	after := hostile.Snapshot(t, base)
	d := hostile.Diff(before, after, nil)
	if len(d) != 2 || !strings.HasPrefix(d[0], "changed data/hello.txt") || d[1] != "created outside/new" {
		t.Errorf("Diff = %q", d)
	}
	if d := hostile.Diff(before, after, hostile.InRoot(root)); len(d) != 1 || d[0] != "created outside/new" {
		t.Errorf("Diff outside the root = %q", d)
	}
	if d := hostile.Diff(hostile.SnapshotExcept(t, base, hostile.InRoot(root)), hostile.Snapshot(t, base), hostile.InRoot(root)); len(d) != 0 {
		t.Errorf("SnapshotExcept differs from Snapshot outside the root: %q", d)
	}
}
