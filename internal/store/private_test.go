//go:build unix

package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestOpenRefusesSharedPlaces: the database records which module each
// installed skill runs, so its directory and file must be the user's alone.
// Readable by others is allowed (0755, 0644); writable is not.
func TestOpenRefusesSharedPlaces(t *testing.T) {
	tests := []struct {
		name    string
		dirMode fs.FileMode // 0 = created by Open
		dbMode  fs.FileMode // 0 = created by Open
		other   bool        // the directory belongs to another user
		want    string      // "" = opens
	}{
		{name: "created"},
		{name: "0700 directory", dirMode: 0o700},
		{name: "0755 directory, 0644 file", dirMode: 0o755, dbMode: 0o644},
		{name: "0770 directory", dirMode: 0o770, want: "the database directory: %d is writable by group (mode 0770)"},
		{name: "1777 directory", dirMode: 0o777 | fs.ModeSticky, want: "(mode 1777)"},
		{name: "another user's directory", dirMode: 0o700, other: true, want: "%d is owned by uid 65534"},
		{name: "0666 file", dirMode: 0o700, dbMode: 0o666, want: "the database file: %f is writable by group and others (mode 0666)"},
		{name: "0620 file", dirMode: 0o700, dbMode: 0o620, want: "fix: chmod 600 %f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			path := filepath.Join(dir, "buddy.db")
			if tt.dirMode != 0 {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if tt.dbMode != 0 {
					if err := os.WriteFile(path, nil, 0o600); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(path, tt.dbMode); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chmod(dir, tt.dirMode); err != nil {
					t.Fatal(err)
				}
				if tt.other {
					if os.Geteuid() != 0 {
						t.Skip("only root can give a directory to another user")
					}
					if err := os.Chown(dir, 65534, 65534); err != nil {
						t.Fatal(err)
					}
				}
			}
			s, err := Open(t.Context(), path, Options{})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Open = %v", err)
				}
				s.Close(context.Background())
				return
			}
			if err == nil {
				s.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			want := strings.NewReplacer("%d", dir, "%f", path).Replace(tt.want)
			if errs.KindOf(err) != errs.KindConfig || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open = %v (%s), want a config error containing %q", err, errs.KindOf(err), want)
			}
		})
	}
}
