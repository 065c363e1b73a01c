//go:build unix

package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// TestOwnFilesOutOfReach: a directory granted to the file skills that holds
// buddy's data directory and its configuration file does not hand out
// anything buddy keeps there (the token, the database and its audit key,
// compiled code), nor let a skill plant a file there, by any path
// (a symlink to the data directory included); the configuration file is
// neither read nor replaced; the rest of the directory is granted as usual.
// A grant inside the data directory is refused.
func TestOwnFilesOutOfReach(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	cfg := write(t, filepath.Join(s.dir, "buddy.toml"), "[skills.read_file]\nallowed_directories = ["+q(s.dir)+"]\n"+
		"[skills.write_file]\nallowed_directories = ["+q(s.dir)+"]\napproval = \"trust\"\n")
	if err := os.Symlink("data/buddy", filepath.Join(s.dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if r := s.run(t, "skill", "list", "--config", cfg); r.code != 0 { // the database and its files exist
		t.Fatal(r)
	}
	token := write(t, filepath.Join(s.dataDir(), "token"), "t0ken-never-read\n")
	write(t, filepath.Join(s.dataDir(), "cache", "code"), "compiled")
	config, _ := os.ReadFile(cfg)
	data := strings.TrimPrefix(s.dataDir(), s.dir+"/")
	for _, c := range []struct{ path, says string }{
		{data + "/token", "buddy's own directories"},
		{data + "/buddy.db", "private files"}, // named: it may live elsewhere
		{data + "/buddy.db.audit-key", "private files"},
		{"alias/token", "buddy's own directories"},
		{filepath.Join(s.dir, "alias", "buddy.db"), "private files"},
		{"alias/cache/code", "buddy's own directories"},
		{"buddy.toml", "private files"},
	} {
		r := s.run(t, "skill", "run", "read_file", "--input", `{"path":`+q(c.path)+`}`, "--config", cfg)
		if d := r.fails(t, errs.KindForbidden); !strings.Contains(d, c.says) || strings.Contains(r.stdout+r.stderr, "t0ken-never-read") {
			t.Errorf("read_file %s: %s", c.path, r)
		}
	}
	for _, c := range []struct{ path, says string }{
		{data + "/token", "buddy's own directories"},
		{data + "/planted", "buddy's own directories"},
		{data + "/cache/wazero/planted", "buddy's own directories"},
		{"alias/planted", "buddy's own directories"},
		{"alias/new/planted", "buddy's own directories"},
		{"buddy.toml", "private files"},
		{"config/buddy/buddy.toml", "buddy's own directories"}, // the next start's configuration
	} {
		r := s.run(t, "skill", "run", "write_file", "--input", `{"path":`+q(c.path)+`,"content":"planted"}`, "--config", cfg)
		if d := r.fails(t, errs.KindForbidden); !strings.Contains(d, c.says) {
			t.Errorf("write_file %s: %s", c.path, r)
		}
	}
	for _, p := range []string{"planted", "cache/wazero/planted", "new"} {
		if _, err := os.Lstat(filepath.Join(s.dataDir(), p)); !os.IsNotExist(err) {
			t.Errorf("%s was created in the data directory (%v)", p, err)
		}
	}
	if got, _ := os.ReadFile(token); string(got) != "t0ken-never-read\n" {
		t.Errorf("the token was replaced: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(s.configHome, "buddy")); !os.IsNotExist(err) {
		t.Errorf("the configuration directory was created (%v)", err)
	}
	if got, _ := os.ReadFile(cfg); string(got) != string(config) {
		t.Errorf("the configuration was replaced: %q", got)
	}
	s.run(t, "skill", "run", "write_file", "--input", `{"path":"work/beside.txt","content":"ok"}`, "--config", cfg).ok(t)
	if out := s.run(t, "skill", "run", "read_file", "--input", `{"path":"work/beside.txt"}`, "--config", cfg).ok(t); !strings.Contains(out, "ok") {
		t.Errorf("read_file beside: %s", out)
	}

	inside := write(t, filepath.Join(s.dir, "inside.toml"), "[skills.read_file]\nallowed_directories = ["+q(filepath.Join(s.dataDir(), "cache"))+"]\n")
	r := s.run(t, "skill", "run", "read_file", "--input", `{"path":"x"}`, "--config", inside)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "inside buddy's own directories") {
		t.Errorf("a grant inside the data directory: %s", r)
	}
}
