package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/buddy-run/buddy/hostfns"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/skills"
	"github.com/buddy-run/buddy/internal/store"
	"github.com/buddy-run/buddy/runtime"
)

// env is what most commands need: the configuration, the runtime, and (when
// asked) the store and the registry.
type env struct {
	// cfg is the configuration the command started with; now is the one
	// in force (a reload replaces it: read it with config()).
	cfg      *config.Config
	now      atomic.Pointer[config.Config]
	defaults bool // no buddy.toml was found: the embedded defaults apply
	dataDir  string
	rt       *runtime.Runtime
	st       *store.Store
	// live is the registry of skills, replaced on a reload.
	live *skills.Live
	// md is the SKILL.md skills (nil when [instructions] is disabled or
	// the registry was not asked for).
	md *skillsMD
}

// openEnv loads the configuration and starts the runtime; withStore also
// opens the database, and withRegistry registers the skills.
func (a *app) openEnv(ctx context.Context, configFlag string, withStore, withRegistry bool) (_ *env, err error) {
	path, err := config.Find(configFlag)
	if err != nil {
		return nil, err
	}
	a.noteLocalConfig(path)
	e := &env{}
	defer func() {
		if err != nil {
			_ = e.Close(ctx)
		}
	}()
	if path == "" {
		e.defaults = true
		if e.cfg, err = embeddedDefaults(); err != nil {
			return nil, err
		}
	} else if e.cfg, err = config.Load(path); err != nil {
		return nil, err
	}
	if e.dataDir, err = e.cfg.DataDir(); err != nil {
		return nil, err
	}
	e.rt, err = runtime.New(ctx, runtime.Options{
		CacheDir:      filepath.Join(e.dataDir, "cache"),
		MaxConcurrent: e.cfg.Limits.MaxConcurrent,
		Prepared:      a.prepared(),
		Log:           guestLogger(a.stderr),
	})
	if err != nil {
		return nil, err
	}
	if withStore || withRegistry {
		if e.st, err = store.Open(ctx, e.cfg.Storage.Path, store.Options{}); err != nil {
			return nil, err
		}
	}
	e.now.Store(e.cfg)
	if withRegistry {
		reg, err := e.newRegistry(ctx, e.cfg)
		if err != nil {
			return nil, err
		}
		e.live = skills.NewLive(reg)
		e.md = openInstructions(ctx, e, a.stderr)
		if err := noteConfig(ctx, e.st, e.cfg.Path); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// newRegistry registers the skills cfg enables.
func (e *env) newRegistry(ctx context.Context, cfg *config.Config) (*skills.Registry, error) {
	return skills.New(ctx, skills.Options{
		Runtime: e.rt,
		Config:  cfg,
		Store:   e.st,
		Deps:    hostfns.Deps{KV: e.st, Memories: e.st},
	})
}

// config is the configuration in force.
func (e *env) config() *config.Config { return e.now.Load() }

// Close closes what the env opened (the registry, the runtime, the store,
// in that order) and returns what failed. A command that succeeded fails
// with it (closeEnv): a store that could not commit its queued writes
// must not exit 0.
func (e *env) Close(ctx context.Context) error {
	var err error
	if e.live != nil {
		err = errors.Join(err, e.live.Close(ctx))
	}
	if e.rt != nil {
		err = errors.Join(err, e.rt.Close(ctx))
	}
	if e.st != nil {
		err = errors.Join(err, e.st.Close(ctx))
	}
	return err
}

// closeEnv closes e and adds what failed to *err (deferred by commands with
// a named error result).
func closeEnv(ctx context.Context, e *env, err *error) {
	if cerr := e.Close(context.WithoutCancel(ctx)); cerr != nil {
		*err = errors.Join(*err, errs.Wrap(errs.ErrUnavailable, "closing", cerr))
	}
}

// embeddedDefaults is the configuration used when there is no buddy.toml: the
// built-ins read and write a workspace directory inside buddy's data
// directory, memory is on, and nothing reaches the network.
func embeddedDefaults() (*config.Config, error) {
	c := config.Default()
	dir, err := c.DataDir()
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(dir, "workspace")
	if err := osfile.PrivateDir(ws); err != nil {
		return nil, errs.Wrap(errs.ErrConfig, "workspace", err)
	}
	c.Skills["read_file"] = config.Skill{AllowedDirectories: []string{ws}}
	c.Skills["write_file"] = config.Skill{AllowedDirectories: []string{ws}}
	c.Skills[skills.MemorySection] = config.Skill{Memory: true}
	return c, nil
}

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

func guestLogger(w io.Writer) func(string, runtime.Level, string) {
	return func(skill string, level runtime.Level, msg string) {
		fmt.Fprintf(w, "[%s] %s: %s\n", skill, level, strings.TrimRight(msg, "\n"))
	}
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

// prepared is how many instances the runtime keeps ready per module: none
// for a one-call CLI command, the default for a server.
func (a *app) prepared() int {
	if a.longRunning {
		return 0
	}
	return -1
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
