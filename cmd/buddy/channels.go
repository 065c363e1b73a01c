package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/catalog"
	"github.com/buddy-run/buddy/internal/front/channels"
	"github.com/buddy-run/buddy/internal/front/server"
	"github.com/buddy-run/buddy/internal/skills"
)

// openChannels builds the host of the [channels.*] sections: each channel's
// credential read from the secret store (a channel whose credential cannot
// be read stops buddy serve from starting: a config error naming it) and its
// built-in adapter loaded. What the channels log and show is redacted with
// every secret of the store. With no section it runs nothing, and its
// routes list no channel.
func (e *env) openChannels(ctx context.Context, log *slog.Logger) (*channels.Host, error) {
	h := channels.New(channels.Options{Store: e.st, Logger: log, Redact: e.secrets.Redact})
	if len(e.cfg.Channels) == 0 {
		return h, nil
	}
	for _, name := range slices.Sorted(maps.Keys(e.cfg.Channels)) {
		c := e.cfg.Channels[name]
		tok, err := e.secrets.Secret(ctx, c.Credential)
		switch {
		case errors.Is(err, errs.ErrNotFound), err == nil && len(tok) == 0:
			return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf(
				"channels.%s: its credential, the secret %q, is not in the secret store: set it with `buddy secret set %s` (the bot's token); the channel cannot start without it",
				name, c.Credential, c.Credential), channels.ErrNoCredential)
		case err != nil:
			// The store itself cannot be read: its own error and kind.
			return nil, fmt.Errorf("channels.%s: reading its credential %q: %w: %w", name, c.Credential, channels.ErrNoCredential, err)
		}
		var ad *skills.Adapter
		if c.Adapter != "" {
			ad, err = skills.LoadAdapterFile(ctx, e.rt, name, c.Adapter)
		} else {
			ad, err = skills.LoadBuiltinAdapter(ctx, e.rt, name)
		}
		if err != nil {
			return nil, err
		}
		err = h.Add(ctx, channels.Config{Name: name, APIBase: c.APIBase, DMPolicy: c.DMPolicy, AllowFrom: c.AllowFrom,
			PollTimeout: c.PollTimeout, Credential: tok, Adapter: ad})
		if err != nil {
			return nil, err
		}
		log.Info("channel configured", "channel", name, "api_base", c.APIBase, "dm_policy", c.DMPolicy,
			"allow_from", len(c.AllowFrom), "adapter_sha256", ad.SHA256()[:16])
	}
	return h, nil
}

// channelsHandler is server.Options.NewChannels: the channels get their own
// gate (env.newGate, asking on the page and in the chat) and agent loop,
// and the page's routes.
func (e *env) channelsHandler(h *channels.Host, newAgent func(catalog.Skills, agentVariant) *agent.Agent, log *slog.Logger) func(server.ChannelHost) http.Handler {
	return func(host server.ChannelHost) http.Handler {
		if len(h.Names()) > 0 {
			gate := e.newGate(approval.AskerFunc(h.Ask), log)
			var ag channels.Agent
			if a := newAgent(gate, agentVariant{}); a != nil {
				ag = a
			}
			h.Attach(host, ag)
		}
		return h.Handler()
	}
}
