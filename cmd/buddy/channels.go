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

// errNoSecretStore: no secret store is built in yet (the secret store's
// `buddy secret set` is its own piece of work).
var errNoSecretStore = errors.New("no secret store is available in this build of buddy")

// channelSecrets is where the channels' credentials come from: the secret
// store (`buddy secret set NAME`). Until it is wired here, none is, and
// buddy serve refuses to start a configured channel, saying so. The
// end-to-end tests build buddy with -tags buddytestsecrets, which reads
// $BUDDY_TEST_SECRET_<NAME> instead (secrets_testenv.go): never a release.
var channelSecrets = func(*env) channels.Secrets { return noSecrets{} }

// channelRedactor is the secret store's redaction hook for what the
// channels log and show (nil: each channel scrubs its own credential only).
var channelRedactor = func(*env) func(string) string { return nil }

type noSecrets struct{}

func (noSecrets) Secret(context.Context, string) ([]byte, error) { return nil, errNoSecretStore }

// openChannels builds the host of the [channels.*] sections: each channel's
// credential read (a channel whose credential cannot be read stops buddy
// serve from starting: a config error naming it) and its built-in adapter
// loaded. With no section it runs nothing, and its routes list no channel.
func (e *env) openChannels(ctx context.Context, log *slog.Logger) (*channels.Host, error) {
	h := channels.New(channels.Options{Store: e.st, Logger: log, Redact: channelRedactor(e)})
	if len(e.cfg.Channels) == 0 {
		return h, nil
	}
	sec := channelSecrets(e)
	for _, name := range slices.Sorted(maps.Keys(e.cfg.Channels)) {
		c := e.cfg.Channels[name]
		tok, err := sec.Secret(ctx, c.Credential)
		if err == nil && len(tok) == 0 {
			err = errors.New("the secret is empty")
		}
		if err != nil {
			return nil, errs.Wrap(errs.ErrConfig, fmt.Sprintf(
				"channels.%s: its credential %q cannot be read (set it with `buddy secret set %s`), so the channel cannot start",
				name, c.Credential, c.Credential), fmt.Errorf("%w: %w", channels.ErrNoCredential, err))
		}
		ad, err := skills.LoadBuiltinAdapter(ctx, e.rt, name)
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
