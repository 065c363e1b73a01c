package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/front/chat"
)

// chat is `buddy chat [--url URL] [--conversation ID]`: a terminal client
// for a running buddy serve (docs/PROTOCOL.md). A line typed is sent to the
// model; its answer streams as it comes, tool calls and results are shown,
// approval requests are answered with y/n. Ctrl-C cancels the running turn
// (at the prompt, it exits); Ctrl-D exits.
func (a *app) chat(ctx context.Context, args []string) error {
	var urlFlag, convFlag *string
	_, configPath, err := parseCommand("chat", args, 0, "[--url URL] [--conversation ID]", func(fs *flag.FlagSet) {
		urlFlag = fs.String("url", "", "the server's address (default: http:// + [server] listen)")
		convFlag = fs.String("conversation", "", "continue this conversation (its id, c_…)")
	})
	if err != nil {
		return err
	}
	cfg, err := a.loadConfig(configPath)
	if err != nil {
		return err
	}
	base := *urlFlag
	if base == "" {
		base = listenURL(cfg.Server.Listen)
	}
	tok, err := readToken(cfg.Server.TokenFile)
	if err != nil {
		return err
	}
	// Ctrl-C is ours while chat runs: it cancels a turn instead of ending
	// the process (main's context is canceled too, so chat does not use it
	// for its own lifetime).
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, os.Interrupt)
	defer signal.Stop(intr)
	return chat.Run(context.WithoutCancel(ctx), chat.Options{
		URL: base, Token: tok, Conversation: *convFlag,
		In: a.stdin, Out: a.stdout, Err: a.stderr,
		Interrupts: intr, Interactive: a.isTerminal(),
	})
}

// listenURL is the address a client on this machine reaches [server] listen
// at: an unspecified host (0.0.0.0, ::) is reached on loopback.
func listenURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// readToken reads the server's token without creating one: a token chat
// made up would match no running server.
func readToken(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", errs.New(errs.ErrConfig, fmt.Sprintf("no token file at %s: start buddy serve with this configuration first (buddy token prints the token)", path))
	}
	return loadToken(path)
}
