package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// The channel adapter ABI, version 1 (docs/CHANNELS.md): what buddy sends
// an adapter's render and parse exports, and what it reads back. Everything
// is one JSON object each way.

// Adapter is a channel adapter plugin (skills.Adapter): each call runs in a
// fresh sandbox with no host function but the log.
type Adapter interface {
	Parse(ctx context.Context, input []byte) ([]byte, error)
	Render(ctx context.Context, input []byte) ([]byte, error)
}

// Render actions.
const (
	ActionInfo           = "info"
	ActionPoll           = "poll"
	ActionMessage        = "message"
	ActionApproval       = "approval"
	ActionAnswerCallback = "answer_callback"
	ActionTyping         = "typing"
	// ActionWebhook is parse's action for an update the platform delivered
	// to buddy (no request was rendered).
	ActionWebhook = "webhook"
)

// Event types an adapter's parse may return.
const (
	EventMessage       = "message"
	EventEditedMessage = "edited_message"
	EventCallback      = "callback"
	EventUnsupported   = "unsupported" // a kind of message buddy cannot read (a sticker, a voice note)
	EventOversize      = "oversize"    // an update over buddy's cap: acknowledged, its sender told
	EventIgnored       = "ignored"     // nothing for buddy (a bot's message, a channel post)
)

// Error kinds an adapter's parse may return.
const (
	KindRateLimited  = "rate_limited" // wait retry_after seconds
	KindConflict     = "conflict"     // another client polls this bot, or a webhook is set
	KindUnavailable  = "unavailable"  // try again later
	KindUnauthorized = "unauthorized" // the credential was refused
	KindNotModified  = "not_modified" // an edit that changed nothing: success
	KindBadMarkup    = "bad_markup"   // send it again as plain text
	KindGone         = "gone"         // the message to edit is gone: send a new one
	KindForbidden    = "forbidden"    // the chat refuses the bot (blocked, kicked)
	KindTooLong      = "too_long"
	KindTooLarge     = "too_large" // a response over buddy's cap: ask for fewer updates
	KindInvalid      = "invalid"
)

// Info is what an adapter says of its platform (render "info").
type Info struct {
	Name                string `json:"name"`
	MaxText             int    `json:"max_text"`
	TextUnit            string `json:"text_unit"` // "utf16", "bytes" or "runes"
	EditIntervalMS      int    `json:"edit_interval_ms"`
	GroupEditIntervalMS int    `json:"group_edit_interval_ms"`
	SendsPerSecond      int    `json:"sends_per_second"`
	MaxButtonData       int    `json:"max_button_data"`
}

// Button is an inline button: its label and the data a press sends back.
type Button struct {
	Text string `json:"text"`
	Data string `json:"data"`
}

// ApprovalView is an approval question as a chat shows it.
type ApprovalView struct {
	ID          string `json:"id"`
	Skill       string `json:"skill"`
	Permission  string `json:"permission"`
	Description string `json:"description"` // approval.Describe's text: targets first, values escaped
	Reason      string `json:"reason,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	Approve     string `json:"approve"` // the Approve button's data
	Deny        string `json:"deny"`
	Outcome     string `json:"outcome,omitempty"` // "" while open; approved | denied | expired | canceled
	By          string `json:"by,omitempty"`      // chat | page
}

// body is an outbox row's body: what a message should show. The render
// input is the body, plus its chat and message id.
type body struct {
	Action   string        `json:"action"` // message | approval
	Text     string        `json:"text,omitempty"`
	Plain    bool          `json:"plain,omitempty"`
	Buttons  [][]Button    `json:"buttons,omitempty"`
	ReplyTo  string        `json:"reply_to,omitempty"`
	Approval *ApprovalView `json:"approval,omitempty"`
}

// renderInput is render's input.
type renderInput struct {
	body
	Chat       string `json:"chat,omitempty"`
	MessageID  string `json:"message_id,omitempty"`
	Cursor     string `json:"cursor,omitempty"`
	Timeout    int    `json:"timeout,omitempty"`
	Limit      int    `json:"limit,omitempty"`
	CallbackID string `json:"callback_id,omitempty"`
}

// Request is an HTTP request an adapter rendered, for buddy to make
// against the channel's api_base.
type Request struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

type renderOutput struct {
	Request *Request `json:"request"`
	Info    *Info    `json:"info"`
}

// parseInput is parse's input: the response to a rendered request.
type parseInput struct {
	Action    string            `json:"action"`
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers,omitempty"`
	Body      string            `json:"body"`
	Truncated bool              `json:"truncated,omitempty"`
	Limit     int               `json:"limit,omitempty"`
}

// Event is one update as an adapter parsed it.
type Event struct {
	UpdateID   string `json:"update_id"`
	Type       string `json:"type"`
	Chat       string `json:"chat,omitempty"`
	ChatType   string `json:"chat_type,omitempty"` // private | group
	ChatTitle  string `json:"chat_title,omitempty"`
	Sender     string `json:"sender,omitempty"`
	SenderName string `json:"sender_name,omitempty"`
	MessageID  string `json:"message_id,omitempty"`
	Text       string `json:"text,omitempty"`
	CallbackID string `json:"callback_id,omitempty"`
	Data       string `json:"data,omitempty"`
	Date       int64  `json:"date,omitempty"`
}

// Failure is an error an adapter read in a response.
type Failure struct {
	Kind       string `json:"kind"`
	Detail     string `json:"detail"`
	RetryAfter int    `json:"retry_after,omitempty"` // seconds
}

func (f *Failure) Error() string { return f.Kind + ": " + f.Detail }

type parseOutput struct {
	OK        bool              `json:"ok"`
	Events    []json.RawMessage `json:"events"`
	Cursor    string            `json:"cursor"`
	MessageID string            `json:"message_id"`
	Error     *Failure          `json:"error"`
}

// Bounds of what buddy takes from an adapter.
const (
	maxEvents       = 1000
	maxRequestBody  = 1 << 20
	maxRequestPath  = 1024
	maxHeaderValues = 8
)

// pathRE is what a rendered path may be: a path under api_base with at
// most one {credential}, no query, no "..".
var pathRE = regexp.MustCompile(`^/[A-Za-z0-9_.~!$&'()*+,;=:@%/{}-]*$`)

// allowedHeaders are the request headers an adapter may set.
var allowedHeaders = map[string]bool{"Content-Type": true, "Authorization": true, "Accept": true}

// credentialMark is where a rendered request puts the credential.
const credentialMark = "{credential}"

// check validates a rendered request: GET or POST, a path under api_base
// (the credential at most once, and only in the path or the Authorization
// header: never in the body, never in a query string the platform might
// echo into a chat).
func (r *Request) check() error {
	switch {
	case r == nil:
		return errs.New(errs.ErrInvalidInput, "the adapter rendered no request")
	case r.Method != http.MethodGet && r.Method != http.MethodPost:
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("the adapter rendered a %q request: GET or POST only", r.Method))
	case len(r.Path) > maxRequestPath || !pathRE.MatchString(r.Path) || strings.Contains(r.Path, "..") || strings.Contains(r.Path, "//"):
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("the adapter rendered the path %q: a path under api_base without query or ..", clip(r.Path, 100)))
	case strings.Count(r.Path, credentialMark) > 1 || strings.Count(strings.ReplaceAll(r.Path, credentialMark, ""), "{") > 0:
		return errs.New(errs.ErrInvalidInput, "the adapter's path names the credential more than once, or another placeholder")
	case len(r.Body) > maxRequestBody:
		return errs.New(errs.ErrInvalidInput, fmt.Sprintf("the adapter rendered a body of %d bytes", len(r.Body)))
	case len(r.Headers) > maxHeaderValues:
		return errs.New(errs.ErrInvalidInput, "the adapter rendered too many headers")
	}
	for k, v := range r.Headers {
		if !allowedHeaders[http.CanonicalHeaderKey(k)] {
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("the adapter may not set the header %q", clip(k, 64)))
		}
		if strings.ContainsAny(v, "\r\n") || len(v) > 1024 {
			return errs.New(errs.ErrInvalidInput, fmt.Sprintf("header %q: bad value", k))
		}
		if strings.Contains(v, credentialMark) && http.CanonicalHeaderKey(k) != "Authorization" {
			return errs.New(errs.ErrInvalidInput, "the credential may go in the Authorization header only")
		}
	}
	return nil
}

// render calls the adapter's render with in and reads its answer.
func render(ctx context.Context, a Adapter, in renderInput) (renderOutput, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return renderOutput{}, errs.Wrap(errs.ErrInternal, "encoding render's input", err)
	}
	raw, err := a.Render(ctx, b)
	if err != nil {
		return renderOutput{}, err
	}
	var out renderOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		return renderOutput{}, errs.Wrap(errs.ErrInvalidInput, "render's output is not the JSON object of the ABI", err)
	}
	if in.Action != ActionInfo {
		if err := out.Request.check(); err != nil {
			return renderOutput{}, err
		}
	}
	return out, nil
}

// parse calls the adapter's parse with in and reads its answer.
func parse(ctx context.Context, a Adapter, in parseInput) (parseOutput, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return parseOutput{}, errs.Wrap(errs.ErrInternal, "encoding parse's input", err)
	}
	raw, err := a.Parse(ctx, b)
	if err != nil {
		return parseOutput{}, err
	}
	var out parseOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		return parseOutput{}, errs.Wrap(errs.ErrInvalidInput, "parse's output is not the JSON object of the ABI", err)
	}
	if len(out.Events) > maxEvents {
		return parseOutput{}, errs.New(errs.ErrInvalidInput, fmt.Sprintf("parse returned %d events, over %d", len(out.Events), maxEvents))
	}
	if !out.OK && out.Error == nil {
		out.Error = &Failure{Kind: KindInvalid, Detail: "parse said not ok without an error"}
	}
	return out, nil
}

// clip caps s for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
