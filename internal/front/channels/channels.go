// Package channels is buddy serve's chat channels: a front end that lets the
// owner talk to buddy from a chat app (Telegram first), with pairing, the
// approval questions as buttons, and no message lost or sent twice
// (docs/CHANNELS.md).
//
// The host owns everything that can fail or leak: the connection (long
// polling), the timers, the watchdog, the durable inbox and outbox (in the
// store), and the credential. The platform's format is the adapter's: a
// plugin (skills.Adapter) that turns a platform response into events
// (parse) and a message, an approval question or a poll into the
// platform's request (render), in a fresh sandbox per call, with no host
// function but the log: it never sees the token and cannot open a
// connection.
//
//	h := channels.New(channels.Options{Store: st, Logger: log})
//	err := h.Add(ctx, channels.Config{Name: "telegram", APIBase: "https://api.telegram.org",
//		DMPolicy: "pairing", Credential: token, Adapter: adapter})
//	h.Attach(page, agent)     // buddy serve's page (approvals, turns) and the agent loop
//	go h.Run(ctx)             // poll, handle, send; until ctx ends
//	...
//	h.Close(ctx)
//
// Like the other front ends it holds only the gate (through the agent and
// the page): the approval gate is the one path to a skill.
package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/buddy-run/buddy/internal/agent"
	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/config"
	"github.com/buddy-run/buddy/internal/store"
)

// Sentinel errors.
var (
	// ErrNoCredential: a channel's credential could not be read (the
	// secret is not set in the secret store).
	ErrNoCredential = errors.New("the channel's credential cannot be read")
	// ErrNoOwner: a notification has no chat to go to (nobody is paired
	// or allowed).
	ErrNoOwner = errors.New("no owner's chat on this channel")
	// ErrUnknownChannel: no channel of that name runs.
	ErrUnknownChannel = errors.New("no such channel")
)

// Agent runs a conversation's turn (agent.Agent).
type Agent interface {
	Turn(ctx context.Context, conversation, text string, sink agent.Sink) agent.Outcome
}

// Page is what buddy serve's page lends the channels (server.ChannelHost):
// approval questions it shows too, answers given in a chat, and turns it
// watches.
type Page interface {
	// AskWatched asks on the page, as for any turn, and tells asked when the
	// question is out (its id and the hash of its arguments) and resolved
	// when it is decided (reason user, timeout or canceled).
	AskWatched(ctx context.Context, req approval.Request,
		asked func(id, hash string, expires time.Time), resolved func(approved bool, reason string)) (bool, error)
	// Answer answers an open question, as the page's approve frame does.
	Answer(ctx context.Context, conversation, id string, approved bool, hash string) error
	// WatchResolved calls resolved once the open question id is decided
	// (a scheduled turn's held call: AskHeld); false when none is open.
	WatchResolved(id string, resolved func(approved bool, reason string)) bool
	// RunTurn runs turn as the conversation's one turn (an error when one
	// already runs), with a sink that shows it on the page, and ends it
	// with the page's done frame.
	RunTurn(conversation, text string, turn func(ctx context.Context, page agent.Sink) agent.Outcome) (agent.Outcome, error)
}

// Store is what the channels keep in the database (*store.Store).
type Store interface {
	ChannelCursor(ctx context.Context, channel string) (string, error)
	ReceiveChannelUpdates(ctx context.Context, channel string, events []store.ChannelEvent, cursor string) ([]store.InboxItem, error)
	OpenInbox(ctx context.Context, channel string) ([]store.InboxItem, error)
	SetInboxState(ctx context.Context, seq int64, state, note string, forget bool) error
	InboxBacklog(ctx context.Context, channel string) (int, time.Time, error)
	PruneChannelInbox(ctx context.Context, channel string, before time.Time) (int, error)

	EnqueueOutbox(ctx context.Context, it store.OutboxItem) (int64, error)
	UpdateOutbox(ctx context.Context, id int64, body json.RawMessage, final bool) error
	PendingOutbox(ctx context.Context, channel string) ([]store.OutboxItem, error)
	OpenOutboxRefs(ctx context.Context, channel, kind string) ([]store.OutboxItem, error)
	NoteOutboxAttempt(ctx context.Context, id int64) error
	ConfirmOutbox(ctx context.Context, id int64, messageID string, body json.RawMessage) error
	FailOutbox(ctx context.Context, id int64, detail string, permanent bool) error
	OutboxBacklog(ctx context.Context, channel string) (int, error)

	ChannelChat(ctx context.Context, channel, chat string) (string, bool, error)
	SetChannelChat(ctx context.Context, channel, chat, conversation string) error
	ChatOfConversation(ctx context.Context, conversation string) (string, string, bool, error)
	CreateConversation(ctx context.Context, c store.Conversation) error
	GetConversation(ctx context.Context, id string) (store.Conversation, error)

	PairingStore
}

// PairingStore is what pairing needs of the store (the CLI's `buddy pair`
// uses it without a running channel).
type PairingStore interface {
	RequestPairing(ctx context.Context, p store.Pairing, maxPending int) (store.Pairing, bool, error)
	ApprovePairing(ctx context.Context, code string, at time.Time) (store.Pairing, error)
	RevokePairing(ctx context.Context, channel, who string, at time.Time) (store.Pairing, error)
	Pairings(ctx context.Context, channel string, at time.Time) ([]store.Pairing, error)
	Paired(ctx context.Context, channel, user string) (bool, error)
	EnqueueOutbox(ctx context.Context, it store.OutboxItem) (int64, error)
}

// Config is one channel.
type Config struct {
	// Name is the channel's name ([channels.NAME]), which the adapter
	// serves.
	Name    string
	APIBase string // the platform's API root
	// DMPolicy is config.DMPolicyPairing, DMPolicyAllowlist or DMPolicyOpen.
	DMPolicy string
	// AllowFrom are the platform's user ids always allowed (positive) and
	// the group chats allowed (negative, on Telegram).
	AllowFrom   []int64
	PollTimeout time.Duration
	// Credential is the bot's token; never logged, never given to the
	// adapter.
	Credential []byte
	Adapter    Adapter
}

// Options configure a Host.
type Options struct {
	Store Store
	// Clock is real time unless a test gives another.
	Clock Clock
	// HTTPClient makes the platform's requests; nil = a client of its own.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Redact, if set, scrubs secrets from what the channels log and show
	// (the secret store's hook); each channel also scrubs its own
	// credential.
	Redact func(string) string
	// MaxTurns is how many chats' turns run at once (default 4).
	MaxTurns int
	// SendRate overrides the adapter's sends per second; negative =
	// unlimited (tests).
	SendRate float64
	// EditInterval overrides the adapter's edit interval (tests).
	EditInterval time.Duration
	// MaxResponseBytes caps one platform response (default 8 MiB).
	MaxResponseBytes int64
	// PruneAfter is how long handled updates are kept (default 7 days).
	PruneAfter time.Duration
	// Rand, if set, replaces the back-off's jitter (tests): a number in [0, 1).
	Rand func() float64
}

// Defaults.
const (
	DefaultMaxTurns         = 4
	DefaultMaxResponseBytes = 8 << 20
	DefaultPruneAfter       = 7 * 24 * time.Hour
	// PairingCodeTTL is how long a pairing code is valid; MaxPendingCodes
	// how many may wait on one channel.
	PairingCodeTTL  = time.Hour
	MaxPendingCodes = 3
)

// Host runs the configured channels.
type Host struct {
	opts  Options
	log   *slog.Logger
	chans map[string]*Channel
	names []string

	mu     sync.Mutex
	page   Page
	agent  Agent
	ctx    context.Context // set by Run
	stop   context.CancelFunc
	closed bool
	wg     sync.WaitGroup
	turns  chan struct{}
}

// New returns a host with no channel.
func New(opts Options) *Host {
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = DefaultMaxTurns
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.PruneAfter <= 0 {
		opts.PruneAfter = DefaultPruneAfter
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   15 * time.Second,
			ResponseHeaderTimeout: 0, // a long poll answers late: the watchdog bounds it
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		}, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // the token is in the path: never follow a redirect
		}}
	}
	return &Host{opts: opts, log: opts.Logger, chans: map[string]*Channel{}, turns: make(chan struct{}, opts.MaxTurns)}
}

// Add configures a channel: its adapter says what its platform allows
// (render "info"). A channel without a credential is refused
// (ErrNoCredential, errs.ErrConfig).
func (h *Host) Add(ctx context.Context, cfg Config) error {
	if len(bytes.TrimSpace(cfg.Credential)) == 0 {
		return errs.Wrap(errs.ErrConfig, fmt.Sprintf("channels.%s", cfg.Name), ErrNoCredential)
	}
	if cfg.Adapter == nil {
		return errs.New(errs.ErrInternal, fmt.Sprintf("channel %s has no adapter", cfg.Name))
	}
	if _, dup := h.chans[cfg.Name]; dup {
		return errs.New(errs.ErrInternal, fmt.Sprintf("channel %s added twice", cfg.Name))
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = config.DefaultPollTimeout
	}
	if cfg.DMPolicy == "" {
		cfg.DMPolicy = config.DMPolicyPairing
	}
	cfg.Credential = bytes.TrimSpace(cfg.Credential)
	out, err := render(ctx, cfg.Adapter, renderInput{body: body{Action: ActionInfo}})
	if err != nil {
		return fmt.Errorf("channel %s: asking its adapter what the platform allows: %w", cfg.Name, err)
	}
	info := Info{MaxText: 4096, TextUnit: "utf16", EditIntervalMS: 1000, GroupEditIntervalMS: 3000, SendsPerSecond: 20, MaxButtonData: 64}
	if out.Info != nil {
		if out.Info.MaxText >= 64 {
			info.MaxText = out.Info.MaxText
		}
		if out.Info.TextUnit != "" {
			info.TextUnit = out.Info.TextUnit
		}
		if out.Info.EditIntervalMS > 0 {
			info.EditIntervalMS = out.Info.EditIntervalMS
		}
		if out.Info.GroupEditIntervalMS > 0 {
			info.GroupEditIntervalMS = out.Info.GroupEditIntervalMS
		}
		if out.Info.SendsPerSecond > 0 {
			info.SendsPerSecond = out.Info.SendsPerSecond
		}
		if out.Info.MaxButtonData > 0 {
			info.MaxButtonData = out.Info.MaxButtonData
		}
		info.Name = out.Info.Name
	}
	c := newChannel(h, cfg, info)
	h.chans[cfg.Name] = c
	h.names = append(h.names, cfg.Name)
	sort.Strings(h.names)
	return nil
}

// Attach gives the host buddy serve's page and the agent loop (nil without
// a provider: messages are answered that no model is configured). Call it
// before Run.
func (h *Host) Attach(page Page, a Agent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.page, h.agent = page, a
}

// Channel returns a running channel.
func (h *Host) Channel(name string) (*Channel, bool) {
	c, ok := h.chans[name]
	return c, ok
}

// Names are the channels, sorted.
func (h *Host) Names() []string { return append([]string(nil), h.names...) }

// Run runs every channel until ctx ends or Close: the poll loop (with its
// watchdog), the handling of the inbox (replayed first: what an earlier run
// stored and did not finish) and the outbox's sender.
func (h *Host) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.ctx, h.stop = ctx, cancel
	// Started under the lock: Close, once it holds it, waits for all of them.
	for _, name := range h.names {
		h.chans[name].start(ctx, &h.wg)
	}
	h.mu.Unlock()
	<-ctx.Done()
}

// Close stops the channels and waits for them (until ctx ends). What is in
// flight stays in the store: the next run sends and handles it.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	stop := h.stop
	h.closed = true
	h.mu.Unlock()
	if stop != nil {
		stop()
	}
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the channels to stop: %w", ctx.Err())
	}
}

// pageAndAgent returns what Attach gave.
func (h *Host) pageAndAgent() (Page, Agent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.page, h.agent
}

// redact scrubs the secrets from s (the host's hook).
func (h *Host) redact(s string) string {
	if h.opts.Redact != nil {
		return h.opts.Redact(s)
	}
	return s
}

// The store is what the channels keep their state in.
var _ Store = (*store.Store)(nil)
