//go:build unix

package main_test

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// rawControl returns the first rune of s a terminal would obey rather than
// show (a control character other than \n, a bidi or other invisible format
// character, invalid UTF-8), or -1.
func rawControl(s string) rune {
	if !utf8.ValidString(s) {
		return utf8.RuneError
	}
	for _, r := range s {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || (unicode.Is(unicode.Cf, r) && r != 0x200c && r != 0x200d) {
			return r
		}
	}
	return -1
}

func noRaw(t *testing.T, r result) {
	t.Helper()
	for name, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		if c := rawControl(s); c != -1 {
			t.Errorf("%s holds a raw %U:\n%s", name, c, r)
		}
	}
}

// TestHostileManifestText: what a manifest says about itself reaches the
// terminal escaped, in install, info and list.
func TestHostileManifestText(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	// TOML escapes put the raw characters into the parsed strings.
	man := write(t, filepath.Join(s.dir, "skill.toml"), `[skill]
name = "hostile_info"
version = "1.0.0"
description = "Reads \u001b]0;pwned\u0007 notes\u001b[2J\rOK\u009b31m \u202Etxt.exe \u2066x\u2069\nforged line\u007f"
author = "Eve \u001b[8m\u200Binvisible"
permission = "read_only"
`)
	r := s.run(t, "skill", "install", testdata(t, "echo.wasm"), "--manifest", man)
	r.ok(t)
	noRaw(t, r)

	info := s.run(t, "skill", "info", "hostile_info")
	out := info.ok(t)
	noRaw(t, info)
	for _, want := range []string{
		`  Reads \x1b]0;pwned\x07 notes\x1b[2J\rOK\u009b31m \u202etxt.exe \u2066x\u2069\nforged line\x7f` + "\n",
		`author:       Eve \x1b[8m\u200binvisible` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("skill info lacks %q:\n%s", want, out)
		}
	}
	list := s.run(t, "skill", "list")
	noRaw(t, list)
	if list.code != 0 || !strings.Contains(list.stdout, "hostile_info") {
		t.Errorf("skill list:\n%s", list.stdout)
	}
}

// TestHostileGuestText: a guest's log lines and error message are escaped,
// and an 8 MiB error message is not printed whole.
func TestHostileGuestText(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	mod := testdata(t, "hostile_text.wasm")
	for _, name := range []string{"hostile_text", "hostile_big"} {
		entry := map[string]string{"hostile_text": "run", "hostile_big": "big"}[name]
		man := write(t, filepath.Join(s.dir, name+".toml"), manifest(name, "1.0.0", "read_only",
			"entrypoint = "+q(entry), "[resources]\nmemory_mb = 64\n"))
		s.run(t, "skill", "install", mod, "--manifest", man).ok(t)
	}
	const escaped = `\x1b]0;pwned\x07\x1b[2J\rforged\n[other] info: ok \u009b31m \u202etxt.exe \u2066 \xff\xfe\x7f\x00 end`

	res := s.runAll(t, []job{
		{args: []string{"skill", "run", "hostile_text"}},
		{args: []string{"skill", "run", "hostile_big"}},
	})
	r := res[0]
	noRaw(t, r)
	if r.code != errs.ExitCode(errs.KindSkill) || r.stdout != "" {
		t.Fatalf("want a skill_error:\n%s", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	want := []string{
		"[hostile_text] info: " + escaped,
		"[hostile_text] error: " + escaped,
		"error: skill_error: " + escaped,
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), r)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("stderr line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}

	big := res[1]
	noRaw(t, big)
	d := big.fails(t, errs.KindSkill)
	if !strings.HasPrefix(d, `\x1b[2J\x1b[2J`) || !strings.HasSuffix(d, " more bytes]") || len(big.stderr) > 16<<10 {
		t.Errorf("an 8 MiB error printed as %d bytes: %q…", len(big.stderr), clip(big.stderr))
	}
}
