package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/buddy-run/buddy/internal/front/channels"
)

// pair is `buddy pair list|approve|revoke`: the chat channels' pairing
// codes and paired users (docs/CHANNELS.md, "Pairing"). It works on the
// database, with or without buddy serve running: a running channel sends
// the paired user their confirmation within seconds, a stopped one at its
// next start.
func (a *app) pair(ctx context.Context, args []string) error {
	return a.subcommand(ctx, verbs{cmd: "pair", listed: "list, approve, revoke", run: map[string]func(context.Context, []string) error{
		"list": a.pairList, "approve": a.pairApprove, "revoke": a.pairRevoke,
	}}, args)
}

func (a *app) pairList(ctx context.Context, args []string) (err error) {
	var asJSON bool
	var channel string
	_, configPath, err := parseCommand("pair list", args, 0, "[--channel NAME] [--json]", func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.StringVar(&channel, "channel", "", "only this channel's")
	})
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	pending, paired, err := channels.ListPairings(ctx, e.st, channel, time.Now())
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.stdout, map[string]any{"pending": pending, "paired": paired})
	}
	if len(pending)+len(paired) == 0 {
		fmt.Fprintln(a.stdout, "no pairing codes pending and nobody paired")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHANNEL\tUSER\tNAME\tCODE\tSINCE\tEXPIRES")
	for _, p := range pending {
		fmt.Fprintf(tw, "pending\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(p.Channel), safe(p.User), safe(orDash(p.Name)), p.Code,
			p.CreatedAt.Local().Format(time.DateTime), p.ExpiresAt.Local().Format(time.TimeOnly))
	}
	for _, p := range paired {
		since := p.CreatedAt
		if p.PairedAt != nil {
			since = *p.PairedAt
		}
		fmt.Fprintf(tw, "paired\t%s\t%s\t%s\t-\t%s\t-\n", safe(p.Channel), safe(p.User), safe(orDash(p.Name)), since.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func (a *app) pairApprove(ctx context.Context, args []string) (err error) {
	pos, configPath, err := parseCommand("pair approve", args, 1, "CODE", nil)
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	p, err := channels.ApprovePairing(ctx, e.st, pos[0], time.Now())
	if err != nil && p.Status == "" {
		return err
	}
	fmt.Fprintf(a.stdout, "paired %s (user %s) on %s: buddy now answers them\n", safe(orDash(p.Name)), safe(p.User), safe(p.Channel))
	return err
}

func (a *app) pairRevoke(ctx context.Context, args []string) (err error) {
	var channel string
	pos, configPath, err := parseCommand("pair revoke", args, 1, "[--channel NAME] USER_ID|CODE", func(fs *flag.FlagSet) {
		fs.StringVar(&channel, "channel", "", "the channel (needed when the user is paired on several)")
	})
	if err != nil {
		return err
	}
	e, err := a.openEnv(ctx, configPath, true, false)
	if err != nil {
		return err
	}
	defer closeEnv(ctx, e, &err)
	p, err := channels.RevokePairing(ctx, e.st, channel, pos[0], time.Now())
	if err != nil {
		return err
	}
	if p.Code != "" {
		fmt.Fprintf(a.stdout, "refused pairing code %s of %s (user %s) on %s\n", p.Code, safe(orDash(p.Name)), safe(p.User), safe(p.Channel))
		return nil
	}
	fmt.Fprintf(a.stdout, "unpaired %s (user %s) on %s: buddy no longer reads their messages\n", safe(orDash(p.Name)), safe(p.User), safe(p.Channel))
	return nil
}
