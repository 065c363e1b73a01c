package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/buddy-run/buddy/internal/base/hostport"
)

// SessionCookie is the cookie a browser gets from POST /api/session: an HMAC
// of the token, never the token itself; HttpOnly, SameSite=Strict.
const SessionCookie = "buddy_session"

// sessionValue derives the cookie value from the token. Rotating the token
// (buddy token --rotate) invalidates every cookie.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("buddy session cookie v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// equal compares secrets in constant time (over their hashes, so that the
// length of the expected value does not leak either).
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1 && want != ""
}

// authenticated reports whether r carries the token (Authorization: Bearer)
// or the session cookie.
func (s *Server) authenticated(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && equal(strings.TrimSpace(tok), s.opts.Token)
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return equal(c.Value, s.session)
	}
	return false
}

// checkHost checks the host a request came to, against DNS rebinding: the
// target must be a path (for an absolute URL net/http takes the host from the
// URL and drops the Host header, so the two could not be compared), and the
// Host must parse (parseAuthority) and name this machine (localhost, a name
// under .localhost, 127.0.0.0/8, [::1]) or one of allowed_hosts. The port is
// not compared: a page on another port is another origin, which the Origin
// check refuses.
func (s *Server) checkHost(r *http.Request) error {
	if r.URL.IsAbs() || r.URL.Host != "" || !strings.HasPrefix(r.RequestURI, "/") {
		return errTarget
	}
	a, err := hostport.Parse(r.Host)
	if err != nil {
		return err
	}
	if a.Loopback() {
		return nil
	}
	for _, h := range s.allowedHosts {
		if a.SameHost(h) {
			return nil
		}
	}
	return errHostNotServed
}

// checkOrigin checks a browser's Origin header: absent (not a browser) is
// fine; otherwise there must be exactly one, and it must parse (parseOrigin)
// and be the server's own origin (the scheme the request came over, the
// Host it came to) or one of allowed_origins, compared as scheme, host and
// port, letters in any case, a default port written or not. Two Origin
// headers, an empty one and "null" are refused.
func (s *Server) checkOrigin(r *http.Request) error {
	var values []string
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Origin") {
			values = append(values, vs...)
		}
	}
	switch {
	case len(values) == 0:
		return nil
	case len(values) > 1:
		return errOriginRepeated
	case values[0] == "":
		return errOriginEmpty
	}
	o, err := hostport.ParseOrigin(values[0])
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if own, err := hostport.Parse(r.Host); err == nil && o == (hostport.Origin{Scheme: scheme, Host: own.WithScheme(scheme)}) {
		return nil
	}
	for _, a := range s.allowedOrigins {
		if o == a {
			return nil
		}
	}
	return errOriginOther
}

// originAllowed is checkOrigin for gorilla's CheckOrigin hook.
func (s *Server) originAllowed(r *http.Request) bool { return s.checkOrigin(r) == nil }

// stateChanging reports whether r may change something: anything but GET,
// HEAD and OPTIONS, and every request that asks to switch protocols (a
// WebSocket's frames change things).
func stateChanging(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return asksUpgrade(r)
	}
	return true
}

// asksUpgrade reports whether r asks, in any form, to switch protocols: an
// Upgrade header with any value, a Connection header mentioning "upgrade",
// or any Sec-WebSocket-* header. It is deliberately wider than gorilla's
// IsWebSocketUpgrade (an "upgrade" token in some Connection header and a
// "websocket" token in some Upgrade header, in any case and spacing): a
// request gorilla would upgrade always counts (FuzzUpgradeClassification
// checks it), so the Origin check cannot be skipped by spelling the
// handshake differently. Comparing the whole Upgrade header to "websocket"
// was such a gap: "Upgrade: h2c, websocket" upgraded unchecked.
func asksUpgrade(r *http.Request) bool {
	for k, vs := range r.Header {
		switch {
		case strings.EqualFold(k, "Upgrade"):
			return true
		case strings.EqualFold(k, "Connection"):
			for _, v := range vs {
				if strings.Contains(strings.ToLower(v), "upgrade") {
					return true
				}
			}
		case len(k) >= len(secWebSocket) && strings.EqualFold(k[:len(secWebSocket)], secWebSocket):
			return true
		}
	}
	return false
}

const secWebSocket = "Sec-WebSocket-"

// Why a request's Host or Origin is refused beyond what hostport says of
// its form (the 403 says which, after "host not allowed: " or "origin not
// allowed: ").
var (
	errTarget         = errors.New("the request target must be a path, not an absolute URL: buddy is not a proxy")
	errHostNotServed  = errors.New("buddy answers only on loopback names and [server] allowed_hosts")
	errOriginRepeated = errors.New("more than one Origin header")
	errOriginEmpty    = errors.New("the Origin header is empty")
	errOriginOther    = errors.New("another site may not drive buddy")
)
