package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/store"
)

// Status is a channel as GET /api/channels shows it.
type Status struct {
	Name string `json:"name"`
	// State is starting, polling, backing_off (an error: waiting before
	// the next try) or stopped.
	State string `json:"state"`
	// LastSuccess is the end of the last exchange the platform answered
	// (a long poll ends at least every poll_timeout when all is well).
	LastSuccess *time.Time `json:"last_success"`
	// LagMS is how far behind the channel may be: the age of the oldest
	// update received and not yet handled, or how long the platform has
	// not answered beyond one long poll, whichever is more; 0 when all is
	// well. Lag is the same as text ("1.5s").
	LagMS int64  `json:"lag_ms"`
	Lag   string `json:"lag"`
	// Error is the last error since the last success ("" when none), with
	// the credential scrubbed; ErrorAt when it happened.
	Error   string     `json:"error"`
	ErrorAt *time.Time `json:"error_at,omitempty"`
	// Restarts counts the polls the watchdog cut and restarted.
	Restarts int `json:"restarts"`
	// Inbox is how many updates wait to be handled; Outbox how many
	// messages wait to be sent (or brought up to date).
	Inbox    int    `json:"inbox"`
	Outbox   int    `json:"outbox"`
	DMPolicy string `json:"dm_policy"`
	// Paired is how many users are paired; PendingPairings how many codes
	// wait for the owner.
	Paired          int `json:"paired"`
	PendingPairings int `json:"pending_pairings"`
}

// Status is the channel's status now.
func (c *Channel) Status(ctx context.Context) Status {
	now := c.clk.Now()
	c.mu.Lock()
	st := c.status
	c.mu.Unlock()
	s := Status{Name: c.cfg.Name, State: st.state, Error: st.lastError, Restarts: st.restarts, DMPolicy: c.cfg.DMPolicy}
	if !st.lastSuccess.IsZero() {
		t := st.lastSuccess.UTC()
		s.LastSuccess = &t
	}
	if st.lastError != "" && !st.errorAt.IsZero() {
		t := st.errorAt.UTC()
		s.ErrorAt = &t
	}
	var lag time.Duration
	if !st.lastSuccess.IsZero() {
		lag = max(0, now.Sub(st.lastSuccess)-c.cfg.PollTimeout-watchdogGrace)
	} else if st.lastError != "" {
		lag = now.Sub(st.errorAt)
	}
	if n, oldest, err := c.st.InboxBacklog(ctx, c.cfg.Name); err == nil {
		s.Inbox = n
		if !oldest.IsZero() {
			lag = max(lag, now.Sub(oldest))
		}
	}
	if n, err := c.st.OutboxBacklog(ctx, c.cfg.Name); err == nil {
		s.Outbox = n
	}
	if list, err := c.st.Pairings(ctx, c.cfg.Name, now); err == nil {
		for _, p := range list {
			if p.Status == store.PairingPaired {
				s.Paired++
			} else {
				s.PendingPairings++
			}
		}
	}
	s.LagMS = lag.Milliseconds()
	s.Lag = lag.Round(time.Millisecond).String()
	return s
}

// Statuses are every channel's status, by name.
func (h *Host) Statuses(ctx context.Context) []Status {
	out := make([]Status, 0, len(h.names))
	for _, n := range h.names {
		out = append(out, h.chans[n].Status(ctx))
	}
	return out
}

// Handler serves the channels' routes of buddy serve's API, mounted by the
// server behind its token, Host and Origin checks (docs/PROTOCOL.md):
//
//	GET  /api/channels          {"channels":[Status…]}
//	GET  /api/pairing           {"pending":[…],"paired":[…]}
//	POST /api/pairing/approve   {"code":"ABCD2345"}
//	POST /api/pairing/revoke    {"channel":"telegram","user":"123456"} (or "code")
func (h *Host) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /api/channels", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"channels": h.Statuses(r.Context())})
	})
	m.HandleFunc("GET /api/pairing", func(w http.ResponseWriter, r *http.Request) {
		pending, paired, err := ListPairings(r.Context(), h.opts.Store, r.URL.Query().Get("channel"), h.opts.Clock.Now())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"pending": pending, "paired": paired})
	})
	m.HandleFunc("POST /api/pairing/approve", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Code string `json:"code"`
		}
		if err := decode(w, r, &in); err != nil {
			writeErr(w, err)
			return
		}
		v, err := h.ApprovePairing(r.Context(), in.Code)
		if err != nil && v.Status == "" {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	m.HandleFunc("POST /api/pairing/revoke", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Channel string `json:"channel"`
			User    string `json:"user"`
			Code    string `json:"code"`
		}
		if err := decode(w, r, &in); err != nil {
			writeErr(w, err)
			return
		}
		who := in.User
		if who == "" {
			who = in.Code
		}
		v, err := h.RevokePairing(r.Context(), in.Channel, who)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	return m
}

func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errs.New(errs.ErrInvalidInput, "body is not the JSON object expected: "+err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errs.New(errs.ErrInvalidInput, "body holds more than one JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeErr writes {"error":{"kind","detail"}} with the status of its kind
// (an expired code is 410, as an expired approval).
func writeErr(w http.ResponseWriter, err error) {
	k := errs.KindOf(err)
	status := http.StatusInternalServerError
	switch k {
	case errs.KindInvalidInput, errs.KindTooLarge:
		status = http.StatusBadRequest
	case errs.KindNotFound:
		status = http.StatusNotFound
	case errs.KindTimeout:
		status = http.StatusGone
	case errs.KindUnavailable, errs.KindConfig:
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"kind": string(k), "detail": strings.TrimPrefix(err.Error(), string(k)+": ")}})
}

// Notify sends text to the owner's chats of a channel ("" for every
// channel): the direct chats of its paired users and of the users of
// allow_from, verbatim (no model call), through the durable outbox. This is
// what a scheduler's Deliverer calls to reach the owner.
func (h *Host) Notify(ctx context.Context, channel, text string) error {
	if strings.TrimSpace(text) == "" {
		return errs.New(errs.ErrInvalidInput, "an empty notification")
	}
	names := h.names
	if channel != "" {
		if _, ok := h.chans[channel]; !ok {
			return errs.Wrap(errs.ErrNotFound, fmt.Sprintf("channel %q", channel), ErrUnknownChannel)
		}
		names = []string{channel}
	}
	sent := 0
	for _, n := range names {
		c := h.chans[n]
		for _, chat := range c.ownerChats(ctx) {
			if _, err := c.enqueue(ctx, chat, kindNotice, "", body{Action: ActionMessage, Text: text, Plain: true}, true); err != nil {
				return err
			}
			sent++
		}
	}
	if sent == 0 {
		return errs.Wrap(errs.ErrNotFound, "notifying the owner", ErrNoOwner)
	}
	return nil
}

// Send sends text to one chat of a channel, verbatim, through the outbox.
func (h *Host) Send(ctx context.Context, channel, chat, text string) error {
	c, ok := h.chans[channel]
	if !ok {
		return errs.Wrap(errs.ErrNotFound, fmt.Sprintf("channel %q", channel), ErrUnknownChannel)
	}
	_, err := c.enqueue(ctx, chat, kindNotice, "", body{Action: ActionMessage, Text: text, Plain: true}, true)
	return err
}

// ownerChats are the direct chats of the channel's owners.
func (c *Channel) ownerChats(ctx context.Context) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range c.cfg.AllowFrom {
		if id > 0 {
			s := fmt.Sprint(id)
			seen[s] = true
			out = append(out, s)
		}
	}
	if list, err := c.st.Pairings(ctx, c.cfg.Name, c.clk.Now()); err == nil {
		for _, p := range list {
			if p.Status == store.PairingPaired && p.Chat != "" && !seen[p.Chat] {
				seen[p.Chat] = true
				out = append(out, p.Chat)
			}
		}
	}
	return out
}
