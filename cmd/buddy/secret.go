package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/secrets"
)

const secretUsage = `usage: buddy secret set NAME      the value from the terminal (not echoed) or stdin, never an argument
       buddy secret list [--json]  names, when each was set and where it is used; never values
       buddy secret rm NAME`

// secret is `buddy secret set|list|rm`: the secret store of the data
// directory. Nothing buddy offers prints a value back.
func (a *app) secret(ctx context.Context, args []string) error {
	return a.subcommand(ctx, verbs{cmd: "secret", listed: "set, list, rm", help: secretUsage, run: map[string]func(context.Context, []string) error{
		"set": a.secretSet, "list": a.secretList, "rm": a.secretRemove, "remove": a.secretRemove,
	}}, args)
}

// openSecrets loads the configuration and opens the secret store of its
// data directory.
func (a *app) openSecrets(configPath string) (*config.Config, *secrets.Store, error) {
	cfg, err := a.loadConfig(configPath)
	if err != nil {
		return nil, nil, err
	}
	dir, err := cfg.DataDir()
	if err != nil {
		return nil, nil, err
	}
	st, err := secrets.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	return cfg, st, nil
}

func (a *app) secretSet(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("secret set", flag.ContinueOnError)
	var configPath string
	fs.StringVar(&configPath, "config", "", "configuration file (else $BUDDY_CONFIG, ~/.config/buddy/buddy.toml, or the embedded defaults)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		var he *helpError
		if errors.As(err, &he) {
			he.text = "usage: buddy secret set NAME (the value from the terminal, not echoed, or stdin)\n\n" + he.text
		}
		return err
	}
	switch {
	case len(pos) == 0:
		return errs.New(errs.ErrInvalidInput, "usage: buddy secret set NAME (the value is read from the terminal or stdin)")
	case len(pos) > 1:
		// Never echo it: it is probably the value.
		return errs.New(errs.ErrInvalidInput, "buddy secret set takes the name only: a value on the command line would be in your shell's history and in ps; "+
			"type it at the prompt, or pipe it: printf '%s' \"$TOKEN\" | buddy secret set NAME")
	}
	name := pos[0]
	if !secrets.ValidName(name) {
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("secret name %q must be %s", safe(name), secrets.NameRule))
	}
	cfg, st, err := a.openSecrets(configPath)
	if err != nil {
		return err
	}
	value, err := a.readSecretValue(ctx, name)
	if err != nil {
		return err
	}
	defer clear(value)
	if err := st.Set(ctx, name, value); err != nil {
		return err
	}
	used := usedBy(cfg)[name]
	if len(used) == 0 {
		fmt.Fprintf(a.stdout, "secret %s set; nothing uses it yet: grant it to a skill with credentials = [%q] in its [skills.NAME] section, name it in [provider] api_key_secret, or in a [channels.NAME] credential\n", name, name)
		return nil
	}
	fmt.Fprintf(a.stdout, "secret %s set (used by %s)\n", name, strings.Join(used, ", "))
	return nil
}

// readSecretValue reads a value: from the terminal with echo off when stdin
// is one, else all of stdin. One final newline (or CRLF) is not part of it.
func (a *app) readSecretValue(ctx context.Context, name string) ([]byte, error) {
	var value []byte
	if a.isTerminal() {
		fmt.Fprintf(a.stderr, "value of the secret %s (not shown; Enter ends it): ", name)
		f, isFile := a.stdin.(*os.File)
		var err error
		if isFile {
			value, err = readNoEcho(f)
		} else {
			value, err = readLine(a.stdin)
		}
		fmt.Fprintln(a.stderr)
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading the value from the terminal", err)
		}
	} else {
		data, err := io.ReadAll(io.LimitReader(a.stdin, secrets.MaxValueBytes+3))
		if err != nil {
			return nil, errs.Wrap(errs.ErrInvalidInput, "reading the value from stdin", err)
		}
		value = data
	}
	if ctx.Err() != nil {
		clear(value)
		return nil, ctx.Err()
	}
	switch {
	case bytes.HasSuffix(value, []byte("\r\n")):
		value = value[:len(value)-2]
	case bytes.HasSuffix(value, []byte("\n")):
		value = value[:len(value)-1]
	}
	if len(value) == 0 {
		return nil, errs.New(errs.ErrInvalidInput, "no value given: type it at the prompt, or pipe it on stdin")
	}
	return value, nil
}

// readLine reads up to a newline.
func readLine(r io.Reader) ([]byte, error) {
	line, err := bufio.NewReaderSize(r, 256).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return line, nil
}

// secretEntry is one line of buddy secret list.
type secretEntry struct {
	Name   string     `json:"name"`
	Set    bool       `json:"set"`
	SetAt  *time.Time `json:"set_at,omitempty"`
	UsedBy []string   `json:"used_by"`
}

func (a *app) secretList(ctx context.Context, args []string) error {
	var asJSON *bool
	_, configPath, err := parseCommand("secret list", args, 0, "[--json]", func(fs *flag.FlagSet) {
		asJSON = fs.Bool("json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	cfg, st, err := a.openSecrets(configPath)
	if err != nil {
		return err
	}
	stored, err := st.List(ctx)
	if err != nil {
		return err
	}
	used := usedBy(cfg)
	out := []secretEntry{}
	for _, e := range stored {
		at := e.SetAt
		out = append(out, secretEntry{Name: e.Name, Set: true, SetAt: &at, UsedBy: orNone(used[e.Name])})
	}
	for name, by := range used {
		if !slices.ContainsFunc(stored, func(e secrets.Entry) bool { return e.Name == name }) {
			out = append(out, secretEntry{Name: name, UsedBy: by})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if *asJSON {
		return writeJSON(a.stdout, map[string]any{"secrets": out})
	}
	if len(out) == 0 {
		fmt.Fprintln(a.stdout, "no secrets (buddy secret set NAME adds one)")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSET\tUSED BY")
	for _, e := range out {
		set := "not set: buddy secret set " + e.Name
		if e.Set {
			set = e.SetAt.Format(time.RFC3339)
		}
		by := strings.Join(e.UsedBy, ", ")
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(e.Name), set, safe(by))
	}
	return tw.Flush()
}

func orNone(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func (a *app) secretRemove(ctx context.Context, args []string) error {
	pos, configPath, err := parseCommand("secret rm", args, 1, "NAME", nil)
	if err != nil {
		return err
	}
	cfg, st, err := a.openSecrets(configPath)
	if err != nil {
		return err
	}
	if err := st.Remove(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "secret %s removed", pos[0])
	if by := usedBy(cfg)[pos[0]]; len(by) > 0 {
		fmt.Fprintf(a.stdout, "; %s can no longer use it", strings.Join(by, ", "))
	}
	fmt.Fprintln(a.stdout)
	return nil
}

// usedBy maps each secret buddy.toml names to what uses it: the skills
// granted it ("skills.NAME"), the provider ("provider") and the chat
// channels ("channels.NAME", their bot's token).
func usedBy(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	names := make([]string, 0, len(cfg.Skills))
	for n := range cfg.Skills {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, c := range cfg.Skills[n].Credentials {
			out[c] = append(out[c], "skills."+n)
		}
	}
	if k := cfg.Provider.APIKeySecret; k != "" {
		out[k] = append(out[k], "provider")
	}
	for _, n := range slices.Sorted(maps.Keys(cfg.Channels)) {
		c := cfg.Channels[n].Credential
		out[c] = append(out[c], "channels."+n)
	}
	return out
}
