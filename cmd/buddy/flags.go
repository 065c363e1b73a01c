package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
)

// noteLocalConfig says, on stderr, that a buddy.toml in the current directory
// is not the configuration in use: buddy reads it only when named (it grants
// capabilities, and the directory may not be the operator's).
func (a *app) noteLocalConfig(used string) {
	local := config.LocalFile()
	if local == "" {
		return
	}
	if used != "" {
		a1, err1 := os.Stat(used)
		a2, err2 := os.Stat(local)
		if err1 == nil && err2 == nil && os.SameFile(a1, a2) {
			return
		}
	}
	fmt.Fprintln(a.stderr, "note: ./buddy.toml is not read unless named: pass --config buddy.toml (docs/CONFIG.md)")
}

// flags parses args with positionals and flags in any order (Go's flag package
// stops at the first positional): `run read_file --input x` and
// `run --input x read_file` both work.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpError{text: flagsHelp(fs)}
			}
			return nil, errs.New(errs.ErrInvalidInput, err.Error())
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func wantArgs(cmd string, pos []string, n int, names string) error {
	if len(pos) != n {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("usage: buddy %s %s", cmd, names))
	}
	return nil
}

// parseCommand parses a subcommand's arguments: the flags add declares,
// --config, and exactly n positionals (usage names them for the error).
// -h, -help and --help answer the command's usage and flags (exit 0).
func parseCommand(cmd string, args []string, n int, usage string, add func(*flag.FlagSet)) (pos []string, configPath string, err error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.StringVar(&configPath, "config", "", "configuration file (else $BUDDY_CONFIG, ~/.config/buddy/buddy.toml, or the embedded defaults)")
	if add != nil {
		add(fs)
	}
	if pos, err = parseFlags(fs, args); err != nil {
		var he *helpError
		if errors.As(err, &he) {
			he.text = strings.TrimRight("usage: buddy "+cmd+" "+usage, " ") + "\n\n" + he.text
		}
		return nil, "", err
	}
	if err := wantArgs(cmd, pos, n, usage); err != nil {
		return nil, "", err
	}
	return pos, configPath, nil
}

// helpError is the answer to -h: the help text, printed on stdout, and exit 0.
type helpError struct{ text string }

func (e *helpError) Error() string        { return "help shown" }
func (e *helpError) Is(target error) bool { return target == errHelp }

// flagsHelp lists a command's flags and their defaults.
func flagsHelp(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("flags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}
