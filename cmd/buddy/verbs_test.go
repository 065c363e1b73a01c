package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSubcommands: every command made of subcommands answers a missing or
// unknown one with invalid_input (exit 2) naming the command and its
// subcommands, and `help` with its usage and exit 0.
func TestSubcommands(t *testing.T) {
	for _, tc := range []struct {
		cmd, listed, help string
	}{
		{"skill", "list, info, run, install, remove, init", "buddy skill list"},
		{"audit", "list, verify", "buddy audit verify"},
		{"pair", "list, approve, revoke", "buddy pair approve"},
		{"schedule", "add, list, rm", "buddy schedule add"},
		{"secret", "set, list, rm", "buddy secret set NAME"},
	} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), []string{tc.cmd}, strings.NewReader(""), &out, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), "error: invalid_input: buddy "+tc.cmd+" needs a subcommand: "+tc.listed) {
			t.Errorf("buddy %s: exit %d, %q", tc.cmd, code, errOut.String())
		}
		out.Reset()
		errOut.Reset()
		if code := run(t.Context(), []string{tc.cmd, "frobnicate"}, strings.NewReader(""), &out, &errOut); code != 2 ||
			!strings.Contains(errOut.String(), `unknown `+tc.cmd+` subcommand "frobnicate" (`+tc.listed+`)`) {
			t.Errorf("buddy %s frobnicate: exit %d, %q", tc.cmd, code, errOut.String())
		}
		for _, h := range []string{"help", "-h", "--help"} {
			out.Reset()
			errOut.Reset()
			if code := run(t.Context(), []string{tc.cmd, h}, strings.NewReader(""), &out, &errOut); code != 0 ||
				!strings.Contains(out.String(), tc.help) || errOut.Len() != 0 {
				t.Errorf("buddy %s %s: exit %d, stdout %.80q, stderr %q", tc.cmd, h, code, out.String(), errOut.String())
			}
		}
	}
}
