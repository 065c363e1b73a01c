package channels

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Channel is one running channel.
type Channel struct {
	h    *Host
	cfg  Config
	info Info
	log  *slog.Logger
	st   Store
	clk  Clock

	wakeInbox  chan struct{}
	wakeOutbox chan struct{}
	limiter    *limiter

	mu     sync.Mutex
	status status
	// inflight are the inbox updates being handled (by seq), handled those
	// this run finished; chats the queues of the chats with updates to
	// handle, in order.
	inflight  map[int64]bool
	handled   map[int64]bool // handled by this run, until the inbox no longer lists them
	chats     map[string]*chatQueue
	questions map[string]*question // open approval questions posted here, by approval id
	// sendPause is when sending may go on after a 429.
	sendPause time.Time
}

// status is what GET /api/channels shows.
type status struct {
	state       string
	lastSuccess time.Time
	lastError   string
	errorAt     time.Time
	restarts    int
}

// Channel states.
const (
	StateStarting = "starting"
	StatePolling  = "polling"
	StateBackoff  = "backing_off" // an error: waiting before the next try
	StateStopped  = "stopped"
)

func newChannel(h *Host, cfg Config, info Info) *Channel {
	rate := float64(info.SendsPerSecond)
	if h.opts.SendRate != 0 {
		rate = h.opts.SendRate
	}
	return &Channel{
		h: h, cfg: cfg, info: info, st: h.opts.Store, clk: h.opts.Clock,
		log:        h.log.With("channel", cfg.Name),
		wakeInbox:  make(chan struct{}, 1),
		wakeOutbox: make(chan struct{}, 1),
		limiter:    newLimiter(h.opts.Clock, rate),
		status:     status{state: StateStarting},
		inflight:   map[int64]bool{},
		handled:    map[int64]bool{},
		chats:      map[string]*chatQueue{},
		questions:  map[string]*question{},
	}
}

// Name is the channel's name.
func (c *Channel) Name() string { return c.cfg.Name }

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// start runs the channel's loops.
func (c *Channel) start(ctx context.Context, wg *sync.WaitGroup) {
	c.recover(ctx)
	wg.Go(func() { c.pollLoop(ctx) })
	wg.Go(func() { c.inboxLoop(ctx) })
	wg.Go(func() { c.outboxLoop(ctx) })
}

// recover closes what an earlier run left open: an answer it was
// streaming (cut by the stop: said so, and finished) and approval
// questions it posted (expired at the server's start: said so). The inbox
// is replayed by inboxLoop.
func (c *Channel) recover(ctx context.Context) {
	for _, kind := range []string{kindAnswer, kindApproval} {
		rows, err := c.st.OpenOutboxRefs(ctx, c.cfg.Name, kind)
		if err != nil {
			c.log.Error("reading what the last run left open", "err", err)
			return
		}
		for _, r := range rows {
			b, err := decodeBody(r.Body)
			if err != nil {
				continue
			}
			switch kind {
			case kindAnswer:
				b.Text += "\n\n[cut short: buddy stopped while answering]"
				b.Plain = true
			case kindApproval:
				if b.Approval != nil {
					b.Approval.Outcome = "expired"
				}
			}
			if err := c.st.UpdateOutbox(ctx, r.ID, encodeBody(b), true); err != nil {
				c.log.Error("closing a message the last run left open", "id", r.ID, "err", err)
			}
		}
		if len(rows) > 0 {
			c.log.Info("closed messages the last run left open", "kind", kind, "count", len(rows))
		}
	}
}

// setState notes the poll loop's state.
func (c *Channel) setState(state string) {
	c.mu.Lock()
	c.status.state = state
	c.mu.Unlock()
}

// ok notes a successful exchange with the platform.
func (c *Channel) ok() {
	c.mu.Lock()
	c.status.lastSuccess = c.clk.Now()
	c.status.lastError = ""
	c.mu.Unlock()
}

// fail notes an error (redacted) and returns it as shown.
func (c *Channel) fail(err error) string {
	msg := c.scrub(err.Error())
	c.mu.Lock()
	c.status.lastError = msg
	c.status.errorAt = c.clk.Now()
	c.mu.Unlock()
	return msg
}

// scrub removes the credential (and, through the host's hook, every other
// secret) from s.
func (c *Channel) scrub(s string) string {
	if len(c.cfg.Credential) > 0 {
		s = strings.ReplaceAll(s, string(c.cfg.Credential), credentialMark)
	}
	return c.h.redact(s)
}

// response is a platform's answer, capped.
type response struct {
	status    int
	headers   map[string]string
	body      []byte
	truncated bool
}

// do makes a rendered request against api_base with the credential put in
// its place, reading at most MaxResponseBytes of the answer.
func (c *Channel) do(ctx context.Context, r *Request) (response, error) {
	tok := string(c.cfg.Credential)
	url := c.cfg.APIBase + strings.Replace(r.Path, credentialMark, tok, 1)
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, url, body)
	if err != nil {
		return response{}, errs.Wrap(errs.ErrInvalidInput, "building the request", errors.New(c.scrub(err.Error())))
	}
	for k, v := range r.Headers {
		req.Header.Set(k, strings.Replace(v, credentialMark, tok, 1))
	}
	req.Header.Set("User-Agent", "buddy")
	resp, err := c.h.opts.HTTPClient.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		return response{}, errs.Wrap(errs.ErrUnavailable, c.cfg.Name, errors.New(c.scrub(err.Error())))
	}
	defer resp.Body.Close()
	max := c.h.opts.MaxResponseBytes
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		return response{}, errs.Wrap(errs.ErrUnavailable, c.cfg.Name+": reading the answer", errors.New(c.scrub(err.Error())))
	}
	out := response{status: resp.StatusCode, headers: map[string]string{}}
	if int64(len(data)) > max {
		data, out.truncated = data[:max], true
	}
	// The adapter never sees the token, not even echoed back.
	out.body = bytes.ReplaceAll(data, []byte(tok), []byte(credentialMark))
	for _, k := range []string{"Retry-After", "Content-Type"} {
		if v := resp.Header.Get(k); v != "" {
			out.headers[k] = v
		}
	}
	return out, nil
}

// exchange renders a request, makes it and parses the answer.
func (c *Channel) exchange(ctx context.Context, in renderInput) (parseOutput, error) {
	out, err := render(ctx, c.cfg.Adapter, in)
	if err != nil {
		return parseOutput{}, err
	}
	resp, err := c.do(ctx, out.Request)
	if err != nil {
		return parseOutput{}, err
	}
	return parse(ctx, c.cfg.Adapter, parseInput{Action: in.Action, Status: resp.status, Headers: resp.headers,
		Body: string(resp.body), Truncated: resp.truncated, Limit: in.Limit})
}

// backoff is the wait before the n-th retry (n ≥ 1): 1 s doubling to a
// minute, with jitter (between half and all of it).
func (c *Channel) backoff(n int) time.Duration {
	d := time.Second << min(n-1, 6)
	d = min(d, time.Minute)
	j := rand.Float64
	if c.h.opts.Rand != nil {
		j = c.h.opts.Rand
	}
	return d/2 + time.Duration(j()*float64(d/2))
}

// limiter spaces the sends: at most rate a second, in bursts of rate.
type limiter struct {
	clk  Clock
	rate float64
	mu   sync.Mutex
	next time.Time
}

func newLimiter(clk Clock, rate float64) *limiter { return &limiter{clk: clk, rate: rate} }

// wait waits for the next send's slot.
func (l *limiter) wait(ctx context.Context) error {
	if l.rate <= 0 {
		return ctx.Err()
	}
	gap := time.Duration(float64(time.Second) / l.rate)
	l.mu.Lock()
	now := l.clk.Now()
	// A burst of rate sends may go at once after a quiet second.
	if l.next.Before(now.Add(-time.Second)) {
		l.next = now.Add(-time.Second)
	}
	l.next = l.next.Add(gap)
	wait := l.next.Sub(now)
	l.mu.Unlock()
	return sleep(ctx, l.clk, wait)
}

// chatType is a chat's kind.
func isGroup(e Event) bool { return e.ChatType != "" && e.ChatType != "private" }

// userFacing is a short message for a chat, with no detail from buddy's
// insides beyond its kind.
func userFacing(err error) string {
	k := errs.KindOf(err)
	return fmt.Sprintf("Sorry, that failed (%s).", k)
}
