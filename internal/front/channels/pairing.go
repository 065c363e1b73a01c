package channels

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// codeAlphabet is what a pairing code is made of: capital letters and
// digits without the ones a person confuses (0/O, 1/I/L).
const codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// CodeLength is a pairing code's length.
const CodeLength = 8

// NewCode returns a random pairing code.
func NewCode() string {
	var b strings.Builder
	n := big.NewInt(int64(len(codeAlphabet)))
	for range CodeLength {
		i, err := rand.Int(rand.Reader, n)
		if err != nil {
			panic(err) // crypto/rand does not fail on the systems buddy runs on
		}
		b.WriteByte(codeAlphabet[i.Int64()])
	}
	return b.String()
}

// NormalizeCode is a code as typed (any case, spaces or dashes) in its
// canonical form; ok is false for something that is not a code.
func NormalizeCode(s string) (string, bool) {
	s = strings.ToUpper(strings.NewReplacer(" ", "", "-", "", "\t", "").Replace(s))
	if len(s) != CodeLength {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(codeAlphabet, rune(s[i])) {
			return "", false
		}
	}
	return s, true
}

// pair answers a stranger's direct message under dm_policy "pairing": a
// one-time code, valid an hour, sent once; at most MaxPendingCodes wait
// per channel (more strangers get nothing). Nothing they wrote is kept.
func (c *Channel) pair(ctx context.Context, e Event) {
	now := c.clk.Now()
	var p store.Pairing
	var created bool
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		p, created, err = c.st.RequestPairing(ctx, store.Pairing{Channel: c.cfg.Name, User: e.Sender, Chat: e.Chat, Name: e.SenderName,
			Code: NewCode(), CreatedAt: now, ExpiresAt: now.Add(PairingCodeTTL)}, MaxPendingCodes)
		if err == nil || errors.Is(err, store.ErrTooManyPairings) {
			break
		}
	}
	switch {
	case errors.Is(err, store.ErrTooManyPairings):
		c.log.Warn("a stranger asked to pair, but codes are already pending: ignored", "sender", e.Sender, "pending", MaxPendingCodes)
		return
	case err != nil:
		c.log.Error("recording a pairing request", "err", err)
		return
	case !created:
		return // a code was sent already (or the user is paired: not a stranger)
	}
	c.log.Info("pairing code issued: approve it with `buddy pair approve CODE` or in the page",
		"code", p.Code, "sender", e.Sender, "name", e.SenderName, "expires", p.ExpiresAt.Format(time.RFC3339))
	c.notice(ctx, e.Chat, fmt.Sprintf("Hi! I'm buddy, a personal assistant, and I don't know you yet: I won't read your messages until my owner pairs you.\n\n"+
		"Your pairing code: %s\n\nMy owner approves it with `buddy pair approve %s` (or in buddy's page). It expires in an hour; write again after that for a new one.",
		p.Code, p.Code))
}

// PairingView is a pairing as `buddy pair list` and GET /api/pairing show it.
type PairingView struct {
	Channel   string     `json:"channel"`
	User      string     `json:"user"`
	Name      string     `json:"name"`
	Chat      string     `json:"chat,omitempty"`
	Code      string     `json:"code,omitempty"`
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	PairedAt  *time.Time `json:"paired_at,omitempty"`
}

func viewOf(p store.Pairing) PairingView {
	v := PairingView{Channel: p.Channel, User: p.User, Name: p.Name, Chat: p.Chat, Code: p.Code, Status: p.Status, CreatedAt: p.CreatedAt}
	if p.Status == store.PairingPending && !p.ExpiresAt.IsZero() {
		t := p.ExpiresAt
		v.ExpiresAt = &t
	}
	if p.Status == store.PairingPaired && !p.DecidedAt.IsZero() {
		t := p.DecidedAt
		v.PairedAt = &t
	}
	return v
}

// ListPairings returns a channel's ("" for all) pending codes and paired
// users.
func ListPairings(ctx context.Context, st PairingStore, channel string, now time.Time) (pending, paired []PairingView, err error) {
	list, err := st.Pairings(ctx, channel, now)
	if err != nil {
		return nil, nil, err
	}
	pending, paired = []PairingView{}, []PairingView{}
	for _, p := range list {
		if p.Status == store.PairingPending {
			pending = append(pending, viewOf(p))
		} else {
			paired = append(paired, viewOf(p))
		}
	}
	return pending, paired, nil
}

// ApprovePairing pairs the sender of a pending code and queues a message
// telling them (sent by buddy serve's channel, running or at its next
// start). A code that is not one is errs.ErrInvalidInput; unknown,
// errs.ErrNotFound; expired, errs.ErrTimeout.
func ApprovePairing(ctx context.Context, st PairingStore, code string, now time.Time) (PairingView, error) {
	norm, ok := NormalizeCode(code)
	if !ok {
		return PairingView{}, errs.New(errs.ErrInvalidInput, fmt.Sprintf("%q is not a pairing code (%d letters and digits)", clip(code, 40), CodeLength))
	}
	p, err := st.ApprovePairing(ctx, norm, now)
	if err != nil {
		return PairingView{}, err
	}
	if p.Chat != "" {
		b := encodeBody(body{Action: ActionMessage, Plain: true,
			Text: "You're paired: buddy now reads your messages here and answers them."})
		if _, err := st.EnqueueOutbox(ctx, store.OutboxItem{Channel: p.Channel, Chat: p.Chat, Kind: kindNotice, Body: b, Final: true}); err != nil {
			return viewOf(p), fmt.Errorf("paired, but telling them failed: %w", err)
		}
	}
	return viewOf(p), nil
}

// RevokePairing unpairs a user (by id), or refuses a pending code.
func RevokePairing(ctx context.Context, st PairingStore, channel, who string, now time.Time) (PairingView, error) {
	who = strings.TrimSpace(who)
	if who == "" {
		return PairingView{}, errs.New(errs.ErrInvalidInput, "name a paired user's id or a pending code")
	}
	if norm, ok := NormalizeCode(who); ok {
		if p, err := st.RevokePairing(ctx, channel, norm, now); err == nil {
			return viewOf(p), nil
		}
	}
	p, err := st.RevokePairing(ctx, channel, who, now)
	if err != nil {
		return PairingView{}, err
	}
	return viewOf(p), nil
}

// ApprovePairing is the package's ApprovePairing on the host's store, with
// the channel's sender woken at once.
func (h *Host) ApprovePairing(ctx context.Context, code string) (PairingView, error) {
	v, err := ApprovePairing(ctx, h.opts.Store, code, h.opts.Clock.Now())
	if c := h.chans[v.Channel]; c != nil {
		wake(c.wakeOutbox)
		c.log.Info("paired", "user", v.User, "name", v.Name)
	}
	return v, err
}

// RevokePairing is the package's RevokePairing on the host's store.
func (h *Host) RevokePairing(ctx context.Context, channel, who string) (PairingView, error) {
	v, err := RevokePairing(ctx, h.opts.Store, channel, who, h.opts.Clock.Now())
	if err == nil {
		h.log.Info("pairing revoked", "channel", v.Channel, "user", v.User)
	}
	return v, err
}
