// Package chat is `buddy chat`'s client: a terminal session with a running
// buddy serve over its WebSocket and HTTP API (docs/PROTOCOL.md). A line
// typed is sent to the model; its answer streams as it comes, tool calls and
// results are shown, approval requests are answered with y/n. Everything the
// server sends is escaped before it reaches the terminal.
//
//	err := chat.Run(ctx, chat.Options{URL: "http://127.0.0.1:7700", Token: tok,
//		In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Interrupts: intr, Interactive: true})
package chat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/approval"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/base/textsafe"
	"github.com/buddy-run/buddy/internal/catalog"
)

// Caps of what buddy chat prints from the server (model output, tool
// arguments and results are untrusted; textsafe escapes and marks what it
// cut).
const (
	chatMaxLine     = 64 << 10 // one line typed: longer ones are refused, not cut
	chatMaxDelta    = 64 << 10 // one streamed piece of the answer
	chatMaxMessage  = 1 << 20  // a whole message printed at once (no deltas came)
	chatMaxArgs     = 1024     // a tool call's arguments on one line
	chatMaxResult   = 300      // a tool result's preview
	chatMaxFrame    = 8 << 20  // one frame from the server
	chatDialTimeout = 10 * time.Second
)

// Options configure one chat session.
type Options struct {
	URL          string // http(s):// or ws(s):// address of buddy serve
	Token        string
	Conversation string // continue this conversation; "" starts one at the first message
	In           io.Reader
	Out, Err     io.Writer
	// Interrupts are Ctrl-C presses.
	Interrupts <-chan os.Signal
	// Interactive prints a prompt before each message.
	Interactive bool
}

// chatFrame is any server frame, decoded for display.
type chatFrame struct {
	Type           string          `json:"type"`
	ConversationID string          `json:"conversation_id"`
	ID             string          `json:"id"`
	CallID         string          `json:"call_id"`
	Skill          string          `json:"skill"`
	SkillName      string          `json:"skill_name"`
	Arguments      json.RawMessage `json:"arguments"`
	Text           string          `json:"text"`
	Role           string          `json:"role"`
	Reason         string          `json:"reason"`
	OK             bool            `json:"ok"`
	Approved       bool            `json:"approved"`
	Result         json.RawMessage `json:"result"`
	Error          *struct {
		Kind   string `json:"kind"`
		Detail string `json:"detail"`
	} `json:"error"`
	Kind            string    `json:"kind"`
	Detail          string    `json:"detail"`
	PermissionLevel string    `json:"permission_level"`
	ExpiresAt       time.Time `json:"expires_at"`
	ArgumentsHash   string    `json:"arguments_hash"`
	Touches         []string  `json:"touches"`
	DurationMS      float64   `json:"duration_ms"`
}

// chatSession is the state of a running chat. Only its run loop touches it
// and writes to the connection.
type chatSession struct {
	o       Options
	httpURL *url.URL
	ws      *websocket.Conn
	conv    string
	// inTurn is set from a send until its done frame (or its refusal).
	inTurn bool
	// turnStarted is set once a frame of the running turn arrived: an error
	// before it is the send being refused, and no done follows.
	turnStarted bool
	// streaming is set while deltas of one assistant message are printed.
	streaming bool
	// asking are the approval requests waiting for a y/n, oldest first; the
	// first one is on screen.
	asking []chatFrame
	// eof is set on Ctrl-D: chat exits once the running turn ends.
	eof bool
}

// Run connects and runs the session until Ctrl-D, Ctrl-C at the prompt,
// or the connection ending.
func Run(ctx context.Context, o Options) error {
	base, wsURL, err := chatURLs(o.URL)
	if err != nil {
		return err
	}
	header := http.Header{"Authorization": {"Bearer " + o.Token}}
	dialer := websocket.Dialer{HandshakeTimeout: chatDialTimeout, Proxy: nil}
	ws, resp, err := dialer.DialContext(ctx, wsURL, header)
	if err != nil {
		return dialError(base.String(), resp, err)
	}
	defer ws.Close()
	ws.SetReadLimit(chatMaxFrame)
	s := &chatSession{o: o, httpURL: base, ws: ws, conv: o.Conversation}

	// quit stops the readers when chat ends (stdin may still hold lines).
	quit := make(chan struct{})
	defer close(quit)
	frames := make(chan chatFrame, 64)
	readErr := make(chan error, 1)
	go func() {
		defer close(frames)
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				readErr <- err
				return
			}
			var f chatFrame
			if json.Unmarshal(data, &f) != nil {
				continue // not a frame of protocol 1: nothing to show
			}
			select {
			case frames <- f:
			case <-quit:
				return
			}
		}
	}()
	lines := make(chan string)
	lineErr := make(chan error, 1)
	go readLines(o.In, lines, lineErr, quit)

	fmt.Fprintf(o.Out, "buddy chat: connected to %s (Ctrl-C cancels a turn, Ctrl-D exits)\n", safe(base.String()))
	if s.conv != "" {
		if err := s.checkConversation(ctx); err != nil {
			return err
		}
		if err := s.write(map[string]any{"type": "subscribe", "conversation_id": s.conv}); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "continuing conversation %s\n", safe(s.conv))
	}
	s.prompt()
	for {
		// Lines are read at the prompt and to answer an approval; those
		// typed during a turn wait for it to end.
		var in <-chan string
		if !s.eof && (!s.inTurn || len(s.asking) > 0) {
			in = lines
		}
		if s.eof && !s.inTurn {
			return nil
		}
		select {
		case f, ok := <-frames:
			if !ok {
				err := <-readErr
				return s.closed(err)
			}
			if err := s.frame(f); err != nil {
				return err
			}
		case line, ok := <-in:
			if !ok {
				if err := <-lineErr; err != nil {
					return err
				}
				if err := s.endOfInput(); err != nil {
					return err
				}
				continue
			}
			if err := s.line(ctx, line); err != nil {
				return err
			}
		case <-o.Interrupts:
			if !s.inTurn {
				fmt.Fprintln(o.Out)
				return nil
			}
			if err := s.cancel(); err != nil {
				return err
			}
		}
	}
}

// chatURLs are the server's HTTP base and its WebSocket address.
func chatURLs(raw string) (*url.URL, string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, "", errs.New(errs.ErrInvalidInput, fmt.Sprintf("--url %q: want the server's address, like http://127.0.0.1:7700", raw))
	}
	base := &url.URL{Host: u.Host}
	switch u.Scheme {
	case "http", "ws":
		base.Scheme = "http"
	case "https", "wss":
		base.Scheme = "https"
	default:
		return nil, "", errs.New(errs.ErrInvalidInput, fmt.Sprintf("--url %q: the scheme must be http or https", raw))
	}
	ws := *base
	ws.Scheme = strings.Replace(base.Scheme, "http", "ws", 1)
	ws.Path = "/api/ws"
	return base, ws.String(), nil
}

// dialError says in plain words why the connection failed.
func dialError(base string, resp *http.Response, err error) error {
	if resp != nil {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		detail := serverErrorDetail(body)
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return errs.New(errs.ErrForbidden, fmt.Sprintf("%s refused the token (HTTP 401): is this the server of this configuration? buddy token prints its token", base))
		case http.StatusForbidden:
			return errs.New(errs.ErrForbidden, fmt.Sprintf("%s refused the connection (HTTP 403): %s", base, detail))
		case http.StatusServiceUnavailable:
			return errs.New(errs.ErrUnavailable, fmt.Sprintf("%s is busy (HTTP 503): %s", base, detail))
		}
		return errs.New(errs.ErrUnavailable, fmt.Sprintf("%s answered HTTP %d, not a buddy WebSocket: %s", base, resp.StatusCode, detail))
	}
	return errs.Wrap(errs.ErrUnavailable, fmt.Sprintf("cannot reach buddy serve at %s (is it running?)", base), err)
}

// serverErrorDetail is the detail of a {"error":{...}} body, or the body's
// start.
func serverErrorDetail(body []byte) string {
	var e struct {
		Error struct {
			Detail string `json:"detail"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Detail != "" {
		return e.Error.Detail
	}
	return string(bytes.TrimSpace(body))
}

// readLines sends stdin's lines (without their line ending) to lines, and
// closes it at the end of input; lineErr gets what ended it (nil for EOF).
func readLines(r io.Reader, lines chan<- string, lineErr chan<- error, quit <-chan struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), chatMaxLine)
	for sc.Scan() {
		select {
		case lines <- strings.TrimSuffix(sc.Text(), "\r"):
		case <-quit:
			return
		}
	}
	err := sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		err = errs.New(errs.ErrTooLarge, fmt.Sprintf("a line longer than %s bytes was typed", textsafe.Bytes(chatMaxLine)))
	}
	lineErr <- err
	close(lines)
}

func (s *chatSession) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errs.Wrap(errs.ErrInternal, "encoding a frame", err)
	}
	if err := s.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		return errs.Wrap(errs.ErrUnavailable, "sending to buddy serve", err)
	}
	return nil
}

func (s *chatSession) prompt() {
	if s.o.Interactive && !s.inTurn && !s.eof {
		fmt.Fprint(s.o.Out, "you> ")
	}
}

// line handles one line typed: the answer to the approval on screen, or a
// message.
func (s *chatSession) line(ctx context.Context, line string) error {
	if len(s.asking) > 0 {
		return s.answer(line)
	}
	text := strings.TrimSpace(line)
	if text == "" {
		s.prompt()
		return nil
	}
	if !s.o.Interactive {
		// A terminal echoes what is typed; a script's lines are shown so
		// that the transcript reads as a conversation.
		fmt.Fprintf(s.o.Out, "you> %s\n", textsafe.Terminal(text, chatMaxLine))
	}
	if s.conv == "" {
		id, err := s.newConversation(ctx, text)
		if err != nil {
			return err
		}
		s.conv = id
		fmt.Fprintf(s.o.Out, "conversation %s (buddy chat --conversation %s continues it)\n", safe(id), safe(id))
	}
	s.inTurn, s.turnStarted, s.streaming = true, false, false
	return s.write(map[string]any{"type": "send", "conversation_id": s.conv, "text": text})
}

// checkConversation makes sure the conversation to continue exists and is
// open, before anything is typed into it.
func (s *chatSession) checkConversation(ctx context.Context) error {
	status, data, err := s.api(ctx, http.MethodGet, "/api/conversations/"+url.PathEscape(s.conv), nil)
	if err != nil {
		return err
	}
	var body struct {
		Conversation struct {
			EndedAt string `json:"ended_at"`
		} `json:"conversation"`
	}
	switch {
	case status == http.StatusNotFound:
		return errs.New(errs.ErrNotFound, fmt.Sprintf("no conversation %s on this server (without --conversation, chat starts a new one)", safe(s.conv)))
	case status != http.StatusOK || json.Unmarshal(data, &body) != nil:
		return errs.New(errs.ErrUnavailable, fmt.Sprintf("looking up conversation %s: HTTP %d: %s", safe(s.conv), status, safe(serverErrorDetail(data))))
	case body.Conversation.EndedAt != "":
		return errs.New(errs.ErrNotFound, fmt.Sprintf("conversation %s has ended (without --conversation, chat starts a new one)", safe(s.conv)))
	}
	return nil
}

// api makes one authenticated request to the server's HTTP API.
func (s *chatSession) api(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, errs.Wrap(errs.ErrInternal, "encoding a request", err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.httpURL.JoinPath(path).String(), r)
	if err != nil {
		return 0, nil, errs.Wrap(errs.ErrInternal, "building a request", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.o.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: chatDialTimeout}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, errs.Wrap(errs.ErrUnavailable, fmt.Sprintf("%s %s", method, path), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, chatMaxFrame))
	if err != nil {
		return 0, nil, errs.Wrap(errs.ErrUnavailable, fmt.Sprintf("%s %s", method, path), err)
	}
	return resp.StatusCode, data, nil
}

// newConversation creates the conversation over HTTP, so that its id is
// known before the turn starts (a Ctrl-C can always name it).
func (s *chatSession) newConversation(ctx context.Context, title string) (string, error) {
	shown, _ := textsafe.Prefix(title, 80)
	status, data, err := s.api(ctx, http.MethodPost, "/api/conversations", map[string]string{"title": shown})
	if err != nil {
		return "", err
	}
	var out struct {
		ID string `json:"conversation_id"`
	}
	if status != http.StatusCreated || json.Unmarshal(data, &out) != nil || out.ID == "" {
		return "", errs.New(errs.ErrUnavailable, fmt.Sprintf("creating a conversation: HTTP %d: %s", status, safe(serverErrorDetail(data))))
	}
	return out.ID, nil
}

// endOfInput is Ctrl-D (or the end of a script): the approval on screen and
// any queued are denied, and chat exits once the running turn ends.
func (s *chatSession) endOfInput() error {
	if s.o.Interactive && !s.eof {
		fmt.Fprintln(s.o.Out) // end the prompt's line
	}
	s.eof = true
	for len(s.asking) > 0 {
		fmt.Fprintln(s.o.Out, "n (end of input)")
		if err := s.answer("n"); err != nil {
			return err
		}
	}
	return nil
}

// cancel is Ctrl-C during a turn.
func (s *chatSession) cancel() error {
	// The terminal has echoed ^C already.
	fmt.Fprintln(s.o.Out, "\ncanceling the turn…")
	return s.write(map[string]any{"type": "cancel", "conversation_id": s.conv})
}

// answer answers the approval on screen with a y/n line; anything else asks
// again.
func (s *chatSession) answer(line string) error {
	req := s.asking[0]
	var yes bool
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		yes = true
	case "n", "no", "":
	default:
		fmt.Fprint(s.o.Out, "answer y or n: ")
		return nil
	}
	s.asking = s.asking[1:]
	if err := s.write(map[string]any{
		"type": "approve", "approval_id": req.ID, "approved": yes, "arguments_hash": req.ArgumentsHash,
	}); err != nil {
		return err
	}
	s.ask()
	return nil
}

// ask shows the first approval request waiting.
func (s *chatSession) ask() {
	if len(s.asking) == 0 {
		return
	}
	f := s.asking[0]
	s.endStream()
	fmt.Fprintln(s.o.Out, "approval needed:", approval.Describe(approval.Request{
		Skill: f.SkillName, Permission: catalog.Permission(f.PermissionLevel), Arguments: f.Arguments,
	}, 0))
	for _, t := range f.Touches {
		fmt.Fprintf(s.o.Out, "  may touch: %s\n", safe(t))
	}
	if !f.ExpiresAt.IsZero() {
		fmt.Fprintf(s.o.Out, "  no answer within %s counts as a denial\n", time.Until(f.ExpiresAt).Round(time.Second))
	}
	fmt.Fprint(s.o.Out, "approve? [y/N] ")
}

// endStream ends a line of streamed text before something else is printed.
func (s *chatSession) endStream() {
	if s.streaming {
		fmt.Fprintln(s.o.Out)
		s.streaming = false
	}
}

// frame shows one server frame.
func (s *chatSession) frame(f chatFrame) error {
	if f.ConversationID != "" && f.ConversationID != s.conv {
		return nil // another conversation this connection once watched
	}
	out := s.o.Out
	switch f.Type {
	case "conversation":
	case "delta":
		s.turnStarted = true
		if !s.streaming {
			fmt.Fprint(out, "buddy> ")
			s.streaming = true
		}
		fmt.Fprint(out, textsafe.Block(f.Text, chatMaxDelta))
	case "message":
		s.turnStarted = true
		if s.streaming {
			s.endStream()
		} else if f.Text != "" {
			fmt.Fprintf(out, "buddy> %s\n", textsafe.Block(f.Text, chatMaxMessage))
		}
	case "tool_call":
		s.turnStarted = true
		s.endStream()
		args, _ := textsafe.Prefix(string(f.Arguments), chatMaxArgs)
		fmt.Fprintf(out, "  → %s %s\n", safe(f.Skill), args)
	case "approval_request":
		s.turnStarted = true
		s.asking = append(s.asking, f)
		if len(s.asking) == 1 {
			if s.eof {
				return s.endOfInput()
			}
			s.ask()
		}
	case "approval_resolved":
		for i, q := range s.asking {
			if q.ID != f.ID {
				continue
			}
			// Answered elsewhere (another client), expired or canceled.
			s.asking = append(s.asking[:i:i], s.asking[i+1:]...)
			fmt.Fprintf(out, "\n  (%s was %s: %s)\n", safe(q.SkillName), decision(f.Approved), safe(f.Reason))
			if i == 0 {
				s.ask()
			}
			return nil
		}
		fmt.Fprintf(out, "  %s (%s)\n", decision(f.Approved), safe(f.Reason))
	case "tool_result":
		s.endStream()
		if f.OK {
			res, rest := textsafe.Prefix(string(f.Result), chatMaxResult)
			if rest > 0 {
				res += "…"
			}
			fmt.Fprintf(out, "  ← %s ok (%.1f ms): %s\n", safe(f.Skill), f.DurationMS, res)
		} else if f.Error != nil {
			fmt.Fprintf(out, "  ← %s failed: %s: %s\n", safe(f.Skill), safe(f.Error.Kind), safe(f.Error.Detail))
		}
	case "error":
		s.endStream()
		fmt.Fprintf(s.o.Err, "error: %s: %s\n", safe(f.Kind), textsafe.Terminal(f.Detail, maxErrorBytes))
		if s.inTurn && !s.turnStarted && refusedSend(f.Kind) {
			// The send was refused: no turn runs, no done follows.
			s.inTurn = false
			s.prompt()
		}
	case "done":
		s.endStream()
		s.asking = nil
		switch f.Reason {
		case "final":
		case "max_iterations":
			fmt.Fprintln(out, "(stopped: the model used [provider] max_iterations rounds)")
		case "canceled":
			fmt.Fprintln(out, "(canceled)")
		default:
			fmt.Fprintf(out, "(the turn ended: %s)\n", safe(f.Reason))
		}
		s.inTurn = false
		s.prompt()
	}
	return nil
}

// refusedSend reports whether an error frame of this kind answers a send
// that never started a turn (docs/PROTOCOL.md: no provider, a turn already
// running, an unknown conversation, too many calls), rather than a turn that
// failed (kind unavailable and others: a done frame follows).
func refusedSend(kind string) bool {
	switch errs.Kind(kind) {
	case errs.KindConfig, errs.KindInvalidInput, errs.KindNotFound, errs.KindTooLarge:
		return true
	}
	return false
}

func decision(approved bool) string {
	if approved {
		return "approved"
	}
	return "denied"
}

// closed reports the end of the connection.
func (s *chatSession) closed(err error) error {
	s.endStream()
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case websocket.CloseGoingAway:
			return errs.New(errs.ErrUnavailable, "buddy serve is shutting down")
		case websocket.CloseMessageTooBig:
			return errs.New(errs.ErrTooLarge, "buddy serve closed the connection: a message was too big")
		}
		return errs.New(errs.ErrUnavailable, fmt.Sprintf("buddy serve closed the connection (code %d): %s", ce.Code, safe(ce.Text)))
	}
	return errs.Wrap(errs.ErrUnavailable, "the connection to buddy serve broke", err)
}

// maxFieldBytes caps one line of untrusted text (a skill name, an error).
const (
	maxFieldBytes = 1024    // one line of untrusted text
	maxErrorBytes = 8 << 10 // the detail of an error
)

// safe escapes one line of text from a skill, a model or the server for the
// terminal, capped at maxFieldBytes.
func safe(s string) string { return textsafe.Terminal(s, maxFieldBytes) }
