package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "allowed")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, outside, filepath.Join(dir, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string) {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "notes.txt"), "a\nb\nc\n")
	write(filepath.Join(dir, "bin"), "\xff\xfe")
	write(filepath.Join(outside, "secret"), "s")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/secret", filepath.Join(dir, "rel-escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(dir, "inside-link")); err != nil {
		t.Fatal(err)
	}
	canon, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open([]string{dir}, Options{MaxWriteBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	tests := []struct {
		name    string
		path    string
		write   bool
		data    string
		want    Target
		refused string
	}{
		{name: "read existing", path: "notes.txt",
			want: Target{Path: filepath.Join(canon, "notes.txt"), Dir: canon, Exists: true, Size: 6}},
		{name: "read absolute, cleaned", path: dir + "/sub/../notes.txt", refused: `".."`},
		{name: "read missing", path: "sub/none.txt", want: Target{Path: filepath.Join(canon, "sub/none.txt"), Dir: canon}},
		{name: "read directory", path: "sub/", refused: "is a directory"},
		{name: "read outside", path: filepath.Join(outside, "secret"), refused: "outside the allowed directories"},
		{name: "read through absolute symlink", path: "abs-link", refused: "outside the allowed directory"},
		{name: "read through escaping symlink", path: "rel-escape", refused: "outside the allowed directory"},
		{name: "read through inside symlink", path: "inside-link",
			want: Target{Path: filepath.Join(canon, "inside-link"), Dir: canon, Exists: true, Size: 6}},
		{name: "create", path: "sub/new.txt", write: true, data: "hello",
			want: Target{Path: filepath.Join(canon, "sub/new.txt"), Dir: canon, Write: true, Create: true, Bytes: 5}},
		{name: "create with parents", path: "x/y/z.txt", write: true, data: "",
			want: Target{Path: filepath.Join(canon, "x/y/z.txt"), Dir: canon, Write: true, Create: true}},
		{name: "overwrite text with diff", path: "notes.txt", write: true, data: "a\nc\nd\ne\n",
			want: Target{Path: filepath.Join(canon, "notes.txt"), Dir: canon, Write: true, Exists: true, Size: 6, Bytes: 8,
				Diffed: true, Added: 2, Removed: 1}},
		{name: "overwrite binary: no diff", path: "bin", write: true, data: "text",
			want: Target{Path: filepath.Join(canon, "bin"), Dir: canon, Write: true, Exists: true, Size: 2, Bytes: 4}},
		{name: "write over a symlink", path: "inside-link", write: true, data: "x", refused: "symbolic link"},
		{name: "write a directory", path: "sub", write: true, data: "x", refused: "is a directory"},
		{name: "write outside", path: filepath.Join(outside, "x"), write: true, refused: "outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Inspect(t.Context(), tc.path, tc.write, []byte(tc.data))
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if tc.refused != "" {
				if !strings.Contains(got.Refused, tc.refused) {
					t.Fatalf("Refused = %q, want it to say %q", got.Refused, tc.refused)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("Inspect = %+v\nwant      %+v", got, tc.want)
			}
		})
	}
	// Nothing was created or changed.
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Errorf("Inspect created a directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "a\nb\nc\n" {
		t.Errorf("notes.txt = %q", b)
	}
}

func TestLineDiff(t *testing.T) {
	tests := []struct {
		old, new       string
		added, removed int
	}{
		{"", "", 0, 0},
		{"", "a\n", 1, 0},
		{"a\nb\n", "", 0, 2},
		{"a\na\nb", "a\nb\nb\n", 1, 1},
		{"same\n", "same", 0, 0},
	}
	for _, tc := range tests {
		a, r := lineDiff([]byte(tc.old), []byte(tc.new))
		if a != tc.added || r != tc.removed {
			t.Errorf("lineDiff(%q, %q) = +%d -%d, want +%d -%d", tc.old, tc.new, a, r, tc.added, tc.removed)
		}
	}
}
