//go:build unix

package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestLoadManifestFile: skill.toml is read only from a regular file under
// MaxManifestBytes, as UTF-8; anything else is refused without hanging.
func TestLoadManifestFile(t *testing.T) {
	const good = "[skill]\nname = \"echo\"\nversion = \"1.0.0\"\ndescription = \"Echo.\"\npermission = \"read_only\"\n"
	write := func(t *testing.T, text string) string {
		p := filepath.Join(t.TempDir(), "skill.toml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path func(t *testing.T) string
		kind errs.Kind // "" = loads
		want string
	}{
		{"regular file", func(t *testing.T) string { return write(t, good) }, "", ""},
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none.toml") }, errs.KindNotFound, "none.toml"},
		{"FIFO", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "skill.toml")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skip(err)
			}
			return p
		}, errs.KindInvalidInput, "is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", func(*testing.T) string { return "/dev/zero" }, errs.KindInvalidInput, "character device"},
		{"directory", func(t *testing.T) string { return t.TempDir() }, errs.KindInvalidInput, "is a directory"},
		{"over the cap", func(t *testing.T) string { return write(t, good+"#"+strings.Repeat(" ", MaxManifestBytes)) }, errs.KindTooLarge, "over the cap of 1 MiB"},
		{"not UTF-8", func(t *testing.T) string { return write(t, strings.Replace(good, "Echo.", "\xc3\x28cho.", 1)) }, errs.KindInvalidInput, "is not valid UTF-8 (invalid byte at offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path(t)
			type res struct {
				m   *Manifest
				err error
			}
			done := make(chan res, 1)
			go func() { m, err := LoadManifest(path); done <- res{m, err} }()
			var r res
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("LoadManifest is still blocked after 5s")
			}
			if tt.kind == "" {
				if r.err != nil || r.m.Name != "echo" {
					t.Fatalf("LoadManifest = %+v, %v", r.m, r.err)
				}
				return
			}
			if k := errs.KindOf(r.err); k != tt.kind || !strings.Contains(r.err.Error(), tt.want) {
				t.Fatalf("LoadManifest = %v (%s), want %s containing %q", r.err, k, tt.kind, tt.want)
			}
		})
	}
}
