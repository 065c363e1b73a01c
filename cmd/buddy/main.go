// Command buddy is a personal AI assistant runtime in which every skill is a
// WebAssembly plugin whose only I/O is a capability-gated host function.
//
//	buddy skill list                                  # registered skills, their permission and grants
//	buddy skill run read_file --input '{"path":"notes.txt"}'
//	buddy skill run ./plugin.wasm --input '{}'        # a module file, with skill.toml beside it if any
//	buddy skill install ./plugin.wasm [--manifest skill.toml] [--upgrade] [--yes]
//	buddy skill info NAME | remove NAME
//	buddy skill add ./doc-coauthoring                 # a SKILL.md skill folder (instruction, template, composite)
//	buddy skill init NAME --lang tinygo|rust [--dir DIR]
//	buddy serve [--listen 127.0.0.1:7700]              # the WebSocket server; SIGHUP reloads buddy.toml
//	buddy token [--rotate]                            # the server's bearer token
//	buddy audit list [--conversation ID] [--json] | audit verify
//	buddy secret set NAME | list [--json] | rm NAME   # credentials for skills, the provider's key
//	buddy mcp                                         # the skills over MCP on stdio (docs/PROTOCOL.md#mcp)
//	buddy chat [--url URL] [--conversation ID]        # chat with a running buddy serve in the terminal
//	buddy pair list | approve CODE | revoke USER_ID   # who may talk to buddy in a chat channel (docs/CHANNELS.md)
//	buddy schedule add reminder --at +10m --text "call the plumber" | list [--json] | rm ID
//
// On failure buddy prints "error: <kind>: <detail>" on stderr and exits with
// the kind's code (README "Exit codes"); that contract is stable.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/textsafe"

	// Time zones without the host's files: [scheduler] timezone must load
	// the same everywhere.
	_ "time/tzdata"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	routeStdLog(os.Stderr, slog.LevelWarn)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app carries the standard streams of one invocation, so tests can run the
// CLI in process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// isTerminal reports whether stdin is a terminal a prompt can be answered on.
	isTerminal func() bool
	// longRunning is set by commands that serve many calls (buddy serve):
	// the runtime then keeps fresh instances ready ahead of demand.
	longRunning bool
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, isTerminal: stdinIsTerminal}
	err := a.dispatch(ctx, args)
	if err == nil {
		return 0
	}
	if errors.Is(err, errHelp) {
		var he *helpError
		if errors.As(err, &he) {
			fmt.Fprint(stdout, he.text)
		}
		return 0
	}
	kind := errs.KindOf(err)
	if ctx.Err() != nil && kind != errs.KindTimeout {
		kind = errs.KindCanceled
	}
	fmt.Fprintf(stderr, "error: %s: %s\n", kind, detail(err, kind))
	return errs.ExitCode(kind)
}

// detail is the message without a leading repetition of the kind, escaped
// and capped: it may carry a guest's, a manifest's or a server's text.
func detail(err error, kind errs.Kind) string {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if s := errs.Sentinel(kind); s != nil {
		msg = strings.TrimPrefix(msg, s.Error()+": ")
	}
	return textsafe.Terminal(msg, maxErrorBytes)
}

var errHelp = errors.New("help shown")

const usage = `buddy — a personal AI assistant whose every skill is a WebAssembly plugin

Usage:
  buddy skill list [--json]
  buddy skill info NAME [--json]
  buddy skill run NAME|FILE.wasm [--input JSON|@file|- | --input-raw TEXT|@file|-] [--manifest skill.toml] [--entrypoint F] [--yes] [--stats]
  buddy skill install FILE.wasm [--manifest skill.toml] [--upgrade] [--yes]
  buddy skill add DIR                 copy a SKILL.md skill folder in (validated)
  buddy skill remove NAME
  buddy skill init NAME --lang tinygo|rust [--dir DIR]
  buddy serve [--listen ADDR]         HTTP + WebSocket server (docs/PROTOCOL.md)
  buddy token [--rotate]              print (or replace) the server's token
  buddy audit list [--conversation ID] [--limit N] [--json]
  buddy audit verify                  check the audit log's chain and head (exit 14: tampered)
  buddy secret set NAME               store a secret: from the terminal (not echoed) or stdin, never an argument
  buddy secret list [--json]          the secrets' names, when set, which skills use them (never values)
  buddy secret rm NAME
  buddy mcp                           the skills over MCP on stdin/stdout, for MCP clients
  buddy mcp forget                    clear what MCP clients have read (their taint) and their SKILL.md bindings
  buddy chat [--url URL] [--conversation ID]
                                      chat with a running buddy serve (Ctrl-C cancels, Ctrl-D exits)
  buddy pair list [--channel NAME] [--json]
                                      chat channels: pairing codes waiting, paired users
  buddy pair approve CODE             pair the sender of a code (docs/CHANNELS.md)
  buddy pair revoke [--channel NAME] USER_ID|CODE
  buddy schedule add reminder --at TIME --text TEXT
  buddy schedule add check (--at TIME | --every DURATION | --cron EXPR) --prompt TEXT
                                      TIME: RFC 3339 or +DURATION; cron in [scheduler] timezone
  buddy schedule list [--json]        the jobs (reminders, checks, the heartbeat)
  buddy schedule rm ID
  buddy version

Every command takes --config FILE (else $BUDDY_CONFIG,
$XDG_CONFIG_HOME/buddy/buddy.toml, or the embedded defaults; ./buddy.toml
only when named).
On failure: "error: <kind>: <detail>" on stderr and the kind's exit code.
`

func (a *app) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return errs.New(errs.ErrInvalidInput, "no command given")
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(a.stdout, usage)
		return errHelp
	case "version", "--version":
		fmt.Fprintln(a.stdout, "buddy", version)
		return nil
	case "skill":
		return a.skill(ctx, args[1:])
	case "serve":
		return a.serve(ctx, args[1:])
	case "token":
		return a.token(ctx, args[1:])
	case "audit":
		return a.audit(ctx, args[1:])
	case "secret":
		return a.secret(ctx, args[1:])
	case "mcp":
		return a.mcpCommand(ctx, args[1:])
	case "chat":
		return a.chat(ctx, args[1:])
	case "pair":
		return a.pair(ctx, args[1:])
	case "schedule":
		return a.schedule(ctx, args[1:])
	}
	return errs.New(errs.ErrInvalidInput, fmt.Sprintf("unknown command %q (see buddy help)", args[0]))
}

func (a *app) skill(ctx context.Context, args []string) error {
	return a.subcommand(ctx, verbs{cmd: "skill", listed: "list, info, run, install, remove, init", run: map[string]func(context.Context, []string) error{
		"list": a.skillList, "info": a.skillInfo, "run": a.skillRun, "install": a.skillInstall,
		"add": a.skillAdd, "remove": a.skillRemove, "init": a.skillInit,
	}}, args)
}

// stdinIsTerminal asks the kernel whether stdin is a terminal (a character
// device such as /dev/null is not).
func stdinIsTerminal() bool { return isTerminal(os.Stdin.Fd()) }
