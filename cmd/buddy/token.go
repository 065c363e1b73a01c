package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/osfile"
	"github.com/buddy-run/buddy/internal/config"
)

// tokenBytes is the token's entropy: 256 bits.
const tokenBytes = 32

// token prints the server's token, creating it if needed; --rotate replaces
// it (every browser session and client must sign in again).
func (a *app) token(ctx context.Context, args []string) error {
	var rotate *bool
	_, configPath, err := parseCommand("token", args, 0, "[--rotate]", func(fs *flag.FlagSet) {
		rotate = fs.Bool("rotate", false, "replace the token with a new one")
	})
	if err != nil {
		return err
	}
	cfg, err := a.loadConfig(configPath)
	if err != nil {
		return err
	}
	var tok string
	if *rotate {
		tok, err = writeToken(cfg.Server.TokenFile)
	} else {
		tok, err = loadToken(cfg.Server.TokenFile)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, tok)
	return nil
}

// loadConfig loads buddy.toml (or the embedded defaults) without starting
// anything.
func (a *app) loadConfig(configFlag string) (*config.Config, error) {
	path, err := config.Find(configFlag)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return embeddedDefaults()
	}
	return config.Load(path)
}

// loadToken reads the token file, creating it with a new token if absent.
func loadToken(path string) (string, error) {
	data, err := osfile.ReadBounded(path, 4096)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errs.ErrNotFound) {
		return writeToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("reading the token file: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", errs.Wrap(errs.ErrConfig, "token file "+path, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", errs.New(errs.ErrConfig, fmt.Sprintf("token file %s is readable by other users (mode %04o): run chmod 600 %s, then buddy token --rotate", path, info.Mode().Perm(), path))
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < 2*tokenBytes || strings.ContainsAny(tok, " \t\r\n") {
		return "", errs.New(errs.ErrConfig, fmt.Sprintf("token file %s does not hold a token of %d hex digits: run buddy token --rotate", path, 2*tokenBytes))
	}
	return tok, nil
}

// writeToken creates a new random token in path (mode 0600), atomically.
func writeToken(path string) (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", errs.Wrap(errs.ErrInternal, "generating a token", err)
	}
	tok := hex.EncodeToString(b[:])
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", errs.Wrap(errs.ErrConfig, "creating "+dir, err)
	}
	if err := osfile.WriteAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", errs.Wrap(errs.ErrConfig, "writing the token file "+path, err)
	}
	return tok, nil
}
