package main

import (
	"context"
	"fmt"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// verbs is a command made of subcommands (buddy skill, audit, pair,
// schedule, secret): their functions by name, and how the command explains
// itself when none or an unknown one is given.
type verbs struct {
	cmd    string // "skill"
	listed string // the subcommands named in errors: "list, info, run"
	// help is the command's own usage, printed by `help` and appended to
	// the error of a missing subcommand; "" = buddy's usage, on `help` only.
	help string
	run  map[string]func(context.Context, []string) error
}

// subcommand runs the subcommand args[0] names with the arguments after it.
func (a *app) subcommand(ctx context.Context, v verbs, args []string) error {
	if len(args) == 0 {
		msg := "buddy " + v.cmd + " needs a subcommand: " + v.listed
		if v.help != "" {
			msg += "\n" + v.help
		}
		return errs.New(errs.ErrInvalidInput, msg)
	}
	if f, ok := v.run[args[0]]; ok {
		return f(ctx, args[1:])
	}
	switch args[0] {
	case "help", "-h", "--help":
		if v.help != "" {
			fmt.Fprintln(a.stdout, v.help)
		} else {
			fmt.Fprint(a.stdout, usage)
		}
		return errHelp
	}
	return errs.New(errs.ErrInvalidInput, fmt.Sprintf("unknown %s subcommand %q (%s)", v.cmd, args[0], v.listed))
}
