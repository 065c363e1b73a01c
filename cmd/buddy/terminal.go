package main

import (
	"io"
	"log"
	"log/slog"

	"github.com/buddy-run/buddy/internal/base/textsafe"
)

// Caps on untrusted text the CLI prints (textsafe marks what it cut).
const (
	maxFieldBytes = 1024 // one manifest field, grant list or listing cell
	maxErrorBytes = 8192 // the detail of "error: <kind>: <detail>"
	maxBlockBytes = 16 << 10
)

// safe escapes one line of text from a skill, a manifest, a model or
// upstream for the terminal, capped at maxFieldBytes.
func safe(s string) string { return textsafe.Terminal(s, maxFieldBytes) }

// routeStdLog sends what the standard library logs with the log package
// (net/http's "Unsolicited response received on idle HTTP channel", its
// HTTP/2 diagnostics, go-sdk's progress lines) through slog at debug level to
// w, shown only at level (never, at the default warn): they would otherwise
// write upstream bytes to buddy's stderr, in the middle of a prompt. slog's
// text handler quotes any value that holds a control character.
func routeStdLog(w io.Writer, level slog.Level) {
	slog.SetDefault(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})))
	slog.SetLogLoggerLevel(slog.LevelDebug)
	log.SetFlags(0)
}

// maxTerminalOutput caps a skill's output shown on a terminal; a pipe or a
// file gets all of it.
const maxTerminalOutput = 1 << 20

// terminalOutput is a skill's output as shown on a terminal: its lines and
// tabs kept, every other control or bidi character escaped, capped.
func terminalOutput(out []byte) []byte {
	return []byte(textsafe.Block(string(out), maxTerminalOutput))
}
