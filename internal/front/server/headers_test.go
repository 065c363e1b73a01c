package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/buddy-run/buddy/internal/front/server"
)

// raw sends a request written byte for byte on a new connection, since the
// Go client normalises or refuses many of the forms these tests need (a
// Host with userinfo, two Origin lines, an absolute-form target), and
// returns the status and the body (nil after a 101). head is the request
// line and the header lines, each ending in CRLF; the blank line is added.
func (s *stack) raw(t *testing.T, head string) (int, []byte) {
	t.Helper()
	conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", s.host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(frameWait)) // a bound, never reached
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(head, " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", head, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// lines joins header lines into a request head.
func lines(ls ...string) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	return b.String()
}

// wantRefused fails unless the answer is a 403 forbidden whose detail
// starts with prefix.
func wantRefused(t *testing.T, what string, status int, body []byte, prefix string) {
	t.Helper()
	if status != http.StatusForbidden {
		t.Errorf("%s: %d %.200s, want 403", what, status, body)
		return
	}
	kind, detail := apiError(t, body)
	if kind != "forbidden" || !strings.HasPrefix(detail, prefix) {
		t.Errorf("%s: %s %q, want forbidden %q…", what, kind, detail, prefix)
	}
}

const wsKey = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="

// TestUpgradeOriginChecked: every spelling of a request that asks to switch
// protocols gets the Origin check, whether or not gorilla would upgrade it;
// from the server's own origin (or none) it is upgraded exactly when gorilla's
// IsWebSocketUpgrade says it is a handshake.
func TestUpgradeOriginChecked(t *testing.T) {
	s := newStack(t, stackOpts{})
	forms := []struct {
		name     string
		lines    []string // the handshake's own headers; the Sec-WebSocket-Version and -Key are added unless bare
		bare     bool     // no Sec-WebSocket-* headers
		upgrades bool     // gorilla's IsWebSocketUpgrade (checked against it)
	}{
		{"the usual form", []string{"Upgrade: websocket", "Connection: Upgrade"}, false, true},
		{"Upgrade token list, websocket last", []string{"Upgrade: h2c, websocket", "Connection: Upgrade"}, false, true},
		{"Upgrade token list, websocket first", []string{"Upgrade: websocket, h2c", "Connection: Upgrade"}, false, true},
		{"Upgrade token list without spaces", []string{"Upgrade: h2c,websocket", "Connection: Upgrade"}, false, true},
		{"Upgrade token list with tabs and spaces", []string{"Upgrade: h2c \t,\t websocket ", "Connection: Upgrade"}, false, true},
		{"Upgrade mixed case", []string{"Upgrade: WebSocket", "Connection: Upgrade"}, false, true},
		{"Upgrade upper case", []string{"Upgrade: WEBSOCKET", "Connection: UPGRADE"}, false, true},
		{"Upgrade with no space after the colon", []string{"Upgrade:websocket", "Connection:Upgrade"}, false, true},
		{"header names in lower case", []string{"upgrade: websocket", "connection: upgrade"}, false, true},
		{"Upgrade repeated", []string{"Upgrade: h2c", "Upgrade: websocket", "Connection: Upgrade"}, false, true},
		{"Upgrade repeated, websocket first", []string{"Upgrade: websocket", "Upgrade: h2c", "Connection: Upgrade"}, false, true},
		{"Connection: keep-alive, Upgrade (Firefox)", []string{"Upgrade: websocket", "Connection: keep-alive, Upgrade"}, false, true},
		{"Connection repeated", []string{"Upgrade: websocket", "Connection: keep-alive", "Connection: Upgrade"}, false, true},
		{"Connection token list, upgrade first", []string{"Upgrade: websocket", "Connection: Upgrade, keep-alive"}, false, true},
		{"Upgrade with a version", []string{"Upgrade: websocket/13", "Connection: Upgrade"}, false, false},
		{"Upgrade h2c only", []string{"Upgrade: h2c", "Connection: Upgrade"}, false, false},
		{"Upgrade empty", []string{"Upgrade:", "Connection: Upgrade"}, false, false},
		{"Upgrade without Connection", []string{"Upgrade: websocket"}, false, false},
		{"Connection: Upgrade without Upgrade", []string{"Connection: Upgrade"}, false, false},
		{"Connection: keep-alive only", []string{"Upgrade: websocket", "Connection: keep-alive"}, false, false},
		{"a look-alike letter (long s)", []string{"Upgrade: webſocket", "Connection: Upgrade"}, false, false},
		{"Sec-WebSocket headers only", nil, false, false},
		{"Upgrade and Connection without Sec-WebSocket headers", []string{"Upgrade: websocket", "Connection: Upgrade"}, true, true},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			head := func(method, path, origin string) string {
				ls := []string{method + " " + path + " HTTP/1.1", "Host: " + s.host, "Authorization: Bearer " + testToken}
				ls = append(ls, f.lines...)
				if !f.bare {
					ls = append(ls, "Sec-WebSocket-Version: 13", wsKey)
				}
				if origin != "" {
					ls = append(ls, "Origin: "+origin)
				}
				return lines(ls...)
			}
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head("GET", "/api/ws", "") + "\r\n")))
			if err != nil {
				t.Fatal(err)
			}
			if got := websocket.IsWebSocketUpgrade(req); got != f.upgrades {
				t.Fatalf("gorilla's IsWebSocketUpgrade = %v, the table says %v", got, f.upgrades)
			}
			for _, origin := range []string{"http://evil.example", "null", "http://" + s.host + ".evil.example"} {
				status, body := s.raw(t, head("GET", "/api/ws", origin))
				wantRefused(t, "upgrade from "+origin, status, body, "origin not allowed")
				for _, method := range []string{"GET", "HEAD", "OPTIONS"} {
					status, body := s.raw(t, head(method, "/api/skills", origin))
					if method == "HEAD" {
						if status != http.StatusForbidden {
							t.Errorf("HEAD /api/skills from %s: %d, want 403", origin, status)
						}
						continue
					}
					wantRefused(t, method+" /api/skills from "+origin, status, body, "origin not allowed")
				}
			}
			want := http.StatusBadRequest
			if f.upgrades && !f.bare {
				want = http.StatusSwitchingProtocols
			}
			for _, origin := range []string{"", "http://" + s.host} {
				if status, body := s.raw(t, head("GET", "/api/ws", origin)); status != want {
					t.Errorf("upgrade with Origin %q: %d %.200s, want %d", origin, status, body, want)
				}
			}
		})
	}
}

// TestHostHeader: which Host headers (and request targets) are served, over
// raw TCP on every kind of route: the API, /healthz, the page, the upgrade.
// Served: loopback names and addresses in the forms browsers and clients
// send, and allowed_hosts. Refused with 403: anything else that reaches
// buddy. Some forms net/http itself answers with 400 before buddy sees the
// request; the table says which, so that a change there is noticed.
func TestHostHeader(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) { o.AllowedHosts = []string{"buddy.lan", "fd00::1"} }})
	_, p, _ := strings.Cut(s.host, ":")
	const (
		served   = http.StatusOK
		refused  = http.StatusForbidden
		netHTTP  = http.StatusBadRequest // net/http's own answer
		notServ  = "buddy answers only on loopback names and [server] allowed_hosts"
		port     = "the port must be a number"
		trailing = "trailing dot"
		numeric  = "ends in a number"
		ipv6     = "IPv6"
		colons   = "one ':'"
		bytes    = "a host is a name of ASCII letters"
		target   = "the request target must be a path"
	)
	host := func(v string) []string { return []string{"Host: " + v} }
	cases := []struct {
		name   string
		lines  []string // header lines besides the token
		target string   // prefixed to the path: "" for origin-form
		proto  string   // "" for HTTP/1.1
		want   int
		detail string // in the 403's detail
	}{
		{"127.0.0.1:PORT", host("127.0.0.1:" + p), "", "", served, ""},
		{"127.0.0.1", host("127.0.0.1"), "", "", served, ""},
		{"localhost:PORT", host("localhost:" + p), "", "", served, ""},
		{"localhost", host("localhost"), "", "", served, ""},
		{"upper case", host("LOCALHOST:" + p), "", "", served, ""},
		{"mixed case", host("LocalHost:" + p), "", "", served, ""},
		{"[::1]:PORT", host("[::1]:" + p), "", "", served, ""},
		{"[::1]", host("[::1]"), "", "", served, ""},
		{"::1 written long", host("[0:0:0:0:0:0:0:1]:" + p), "", "", served, ""},
		{"elsewhere in 127/8", host("127.1.2.3:" + p), "", "", served, ""},
		{"a name under .localhost", host("app.localhost:" + p), "", "", served, ""},
		{"a name under .localhost, upper case", host("APP.LOCALHOST:" + p), "", "", served, ""},
		{"allowed host", host("buddy.lan:" + p), "", "", served, ""},
		{"allowed host without a port", host("buddy.lan"), "", "", served, ""},
		{"allowed host, upper case", host("BUDDY.LAN:" + p), "", "", served, ""},
		{"allowed IPv6 host", host("[fd00::1]:" + p), "", "", served, ""},
		{"allowed IPv6 host written otherwise", host("[FD00:0::1]:" + p), "", "", served, ""},
		{"name of 253", host(strings.Repeat("a.", 122) + "localhost:" + p), "", "", served, ""},
		{"label of 63", host(strings.Repeat("a", 63) + ".localhost"), "", "", served, ""},
		{"port 1", host("localhost:1"), "", "", served, ""},
		{"port 65535", host("localhost:65535"), "", "", served, ""},
		{"spaces around the value (not part of it)", []string{"Host:   localhost:" + p + "  "}, "", "", served, ""},
		{"X-Forwarded-Host is ignored", []string{"Host: localhost:" + p, "X-Forwarded-Host: evil.example"}, "", "", served, ""},

		{"non-numeric port", host("localhost:x"), "", "", refused, port},
		{"empty port", host("localhost:"), "", "", refused, port},
		{"port 0", host("localhost:0"), "", "", refused, port},
		{"port 65536", host("localhost:65536"), "", "", refused, port},
		{"port 99999", host("localhost:99999"), "", "", refused, port},
		{"port of six digits", host("localhost:123456"), "", "", refused, port},
		{"port with a leading zero", host("localhost:0" + p), "", "", refused, port},
		{"port 00080", host("localhost:00080"), "", "", refused, port},
		{"port +80", host("localhost:+80"), "", "", refused, port},
		{"port -80", host("localhost:-80"), "", "", refused, port},
		{"port in hex", host("localhost:0x50"), "", "", refused, port},
		{"port with an exponent", host("localhost:1e3"), "", "", refused, port},
		{"two ports", host("localhost:80:80"), "", "", refused, colons},
		{"[::1] with an empty port", host("[::1]:"), "", "", refused, port},
		{"[::1] with a non-numeric port", host("[::1]:x"), "", "", refused, port},
		{"trailing dot", host("localhost."), "", "", refused, trailing},
		{"trailing dot and port", host("localhost.:" + p), "", "", refused, trailing},
		{"trailing dot after an address", host("127.0.0.1.:" + p), "", "", refused, trailing},
		{"leading dot", host(".localhost:" + p), "", "", refused, "empty label"},
		{"empty label", host("a..localhost:" + p), "", "", refused, "empty label"},
		{"label of 64", host(strings.Repeat("a", 64) + ".localhost"), "", "", refused, "longer than 63"},
		{"name of 254", host("b" + strings.Repeat("a.", 122) + "localhost"), "", "", refused, "longer than 253"},
		{"IPv6 without brackets", host("::1"), "", "", refused, colons},
		{"IPv6 without brackets, with a port", host("::1:" + p), "", "", refused, colons},
		{"IPv6 zone, escaped", host("[::1%25eth0]:" + p), "", "", refused, ipv6},
		{"IPv6 zone", host("[::1%eth0]:" + p), "", "", refused, ipv6},
		{"IPv4 in brackets", host("[127.0.0.1]:" + p), "", "", refused, ipv6},
		{"unclosed bracket", host("[::1:" + p), "", "", refused, ipv6},
		{"junk after the bracket", host("[::1]x"), "", "", refused, bytes},
		{"IPv4-mapped loopback", host("[::ffff:127.0.0.1]:" + p), "", "", refused, notServ},
		{"the unspecified IPv6 address", host("[::]:" + p), "", "", refused, notServ},
		{"IPv4 with leading zeros", host("127.000.000.001:" + p), "", "", refused, numeric},
		{"IPv4 short form", host("127.1:" + p), "", "", refused, numeric},
		{"IPv4 as one number", host("2130706433:" + p), "", "", refused, numeric},
		{"IPv4 in hex", host("0x7f000001:" + p), "", "", refused, numeric},
		{"underscore", host("local_host:" + p), "", "", refused, bytes},
		{"percent", host("localhost%00:" + p), "", "", refused, bytes},
		{"sub-delims", host("localhost!:" + p), "", "", refused, bytes},
		{"empty Host", host(""), "", "", refused, "empty"},
		{"no Host on HTTP/1.0", nil, "", "HTTP/1.0", refused, "empty"},
		{"another name", host("evil.example:" + p), "", "", refused, notServ},
		{"another name without a port", host("evil.example"), "", "", refused, notServ},
		{"localhost as a prefix", host("localhost.evil.example"), "", "", refused, notServ},
		{"an address as a prefix", host("127.0.0.1.evil.example:" + p), "", "", refused, notServ},
		{"an allowed host as a prefix", host("buddy.lan.evil.example"), "", "", refused, notServ},
		{"a LAN address", host("192.168.1.10:" + p), "", "", refused, notServ},
		{"0.0.0.0", host("0.0.0.0:" + p), "", "", refused, notServ},
		{"punycode", host("xn--bcher-kva.example"), "", "", refused, notServ},
		{"X-Forwarded-Host does not help", []string{"Host: evil.example", "X-Forwarded-Host: localhost:" + p}, "", "", refused, notServ},
		{"Forwarded does not help", []string{"Host: evil.example", "Forwarded: host=localhost:" + p}, "", "", refused, notServ},
		{"absolute-form, another host than the Host header", host("localhost:" + p), "http://evil.example", "", refused, target},
		{"absolute-form, loopback target, another Host header", host("evil.example"), "http://localhost:" + p, "", refused, target},
		{"absolute-form, the same host", host("localhost:" + p), "http://localhost:" + p, "", refused, target},
		{"absolute-form with userinfo", host("localhost:" + p), "http://user@localhost:" + p, "", refused, target},

		{"userinfo", host("user@localhost:" + p), "", "", netHTTP, ""},
		{"userinfo with a password", host("user:pw@localhost:" + p), "", "", netHTTP, ""},
		{"a path", host("localhost:" + p + "/x"), "", "", netHTTP, ""},
		{"a space before the port", host("localhost :" + p), "", "", netHTTP, ""},
		{"a space in the port", host("localhost: " + p), "", "", netHTTP, ""},
		{"IDN", host("bücher.example"), "", "", netHTTP, ""},
		{"Host repeated", []string{"Host: localhost:" + p, "Host: evil.example"}, "", "", netHTTP, ""},
		{"Host repeated, the same", []string{"Host: localhost:" + p, "Host: localhost:" + p}, "", "", netHTTP, ""},
		{"no Host on HTTP/1.1", nil, "", "", netHTTP, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proto := tc.proto
			if proto == "" {
				proto = "HTTP/1.1"
			}
			head := func(method, path string, more ...string) string {
				ls := append([]string{method + " " + tc.target + path + " " + proto, "Authorization: Bearer " + testToken}, tc.lines...)
				return lines(append(ls, more...)...)
			}
			check := func(what string, status, want int, body []byte) {
				t.Helper()
				switch {
				case status != want:
					t.Errorf("%s: %d %.200s, want %d", what, status, body, want)
				case want == refused:
					wantRefused(t, what, status, body, "host not allowed: ")
					if _, detail := apiError(t, body); !strings.Contains(detail, tc.detail) {
						t.Errorf("%s: detail %q, want it to say %q", what, detail, tc.detail)
					}
				}
			}
			for _, path := range []string{"/api/skills", "/healthz", "/"} {
				status, body := s.raw(t, head("GET", path))
				check("GET "+path, status, tc.want, body)
			}
			wantWS := tc.want
			if wantWS == served {
				wantWS = http.StatusSwitchingProtocols
				if tc.proto == "HTTP/1.0" {
					wantWS = http.StatusBadRequest
				}
			}
			status, body := s.raw(t, head("GET", "/api/ws", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", wsKey))
			check("upgrade", status, wantWS, body)
		})
	}
	// Without allowed_hosts, the same names are refused.
	plain := newStack(t, stackOpts{})
	for _, h := range []string{"buddy.lan", "[fd00::1]:" + p} {
		status, body := plain.raw(t, lines("GET /api/skills HTTP/1.1", "Host: "+h, "Authorization: Bearer "+testToken))
		wantRefused(t, h+" without allowed_hosts", status, body, "host not allowed: "+notServ)
	}
}

// TestOriginHeader: which Origin headers may drive buddy, on each kind of
// state-changing request over raw TCP (POST, DELETE, the upgrade) and on a
// real gorilla WebSocket dial. Allowed: none (not a browser), the server's
// own origin, allowed_origins, letters in any case and a default port
// written or not. Refused with 403: anything else, "null", an empty or a
// repeated header, and every form a browser does not send (a path, even
// "/", userinfo, a query, a trailing dot, a bad port, raw Unicode).
func TestOriginHeader(t *testing.T) {
	s := newStack(t, stackOpts{server: func(o *server.Options) {
		o.AllowedOrigins = []string{"http://localhost:5173", "https://chat.example.com:443"}
	}})
	_, p, _ := strings.Cut(s.host, ":")
	own := "http://" + s.host
	const (
		allowed = true
		refused = false
		other   = "another site may not drive buddy"
		form    = "an Origin is http:// or https://"
		port    = "the port must be a number"
	)
	cases := []struct {
		name    string
		host    string   // the Host header; "" for 127.0.0.1:PORT
		origins []string // the Origin header lines' values
		allowed bool
		detail  string // in a 403's detail
	}{
		{"no Origin", "", nil, allowed, ""},
		{"own origin", "", []string{own}, allowed, ""},
		{"own origin, upper-case scheme", "", []string{"HTTP://" + s.host}, allowed, ""},
		{"own origin on localhost", "localhost:" + p, []string{"http://localhost:" + p}, allowed, ""},
		{"own origin on localhost, upper case", "localhost:" + p, []string{"http://LOCALHOST:" + p}, allowed, ""},
		{"own origin on [::1]", "[::1]:" + p, []string{"http://[::1]:" + p}, allowed, ""},
		{"own origin, default port written in the Origin", "127.0.0.1", []string{"http://127.0.0.1:80"}, allowed, ""},
		{"own origin, default port written in the Host", "127.0.0.1:80", []string{"http://127.0.0.1"}, allowed, ""},
		{"allowed origin", "", []string{"http://localhost:5173"}, allowed, ""},
		{"allowed origin, upper case", "", []string{"HTTP://LOCALHOST:5173"}, allowed, ""},
		{"allowed origin, default port left out", "", []string{"https://chat.example.com"}, allowed, ""},
		{"allowed origin, default port written", "", []string{"https://chat.example.com:443"}, allowed, ""},

		{"another site", "", []string{"http://evil.example"}, refused, other},
		{"another site, upper case", "", []string{"HTTP://EVIL.EXAMPLE"}, refused, other},
		{"another site over https", "", []string{"https://evil.example"}, refused, other},
		{"another site named after this one", "", []string{"http://127.0.0.1.evil.example:" + p}, refused, other},
		{"another port", "", []string{"http://127.0.0.1:1"}, refused, other},
		{"no port (80)", "", []string{"http://127.0.0.1"}, refused, other},
		{"another scheme", "", []string{"https://" + s.host}, refused, other},
		{"another loopback name", "localhost:" + p, []string{own}, refused, other},
		{"near an allowed origin", "", []string{"http://localhost:5174"}, refused, other},
		{"allowed origin with another scheme", "", []string{"http://chat.example.com"}, refused, other},
		{"punycode", "", []string{"http://xn--bcher-kva.example"}, refused, other},
		{"X-Forwarded-Host does not make it own", "", []string{"http://evil.example", "X-Forwarded-Host"}, refused, other},
		{"null", "", []string{"null"}, refused, "Origin null"},
		{"NULL", "", []string{"NULL"}, refused, form},
		{"empty", "", []string{""}, refused, "empty"},
		{"repeated, the same", "", []string{own, own}, refused, "more than one"},
		{"repeated, own first", "", []string{own, "http://evil.example"}, refused, "more than one"},
		{"repeated, own last", "", []string{"http://evil.example", own}, refused, "more than one"},
		{"a list in one header", "", []string{own + ", http://evil.example"}, refused, ""},
		{"a path", "", []string{own + "/"}, refused, form},
		{"a longer path", "", []string{own + "/api"}, refused, form},
		{"a query", "", []string{own + "?x"}, refused, form},
		{"a fragment", "", []string{own + "#x"}, refused, form},
		{"userinfo", "", []string{"http://user@" + s.host}, refused, form},
		{"userinfo with a password", "", []string{"http://user:pw@" + s.host}, refused, form},
		{"a backslash", "", []string{own + "\\x"}, refused, form},
		{"no scheme", "", []string{s.host}, refused, form},
		{"scheme-relative", "", []string{"//" + s.host}, refused, form},
		{"ws scheme", "", []string{"ws://" + s.host}, refused, form},
		{"file", "", []string{"file://"}, refused, form},
		{"an extension", "", []string{"chrome-extension://abcdefghij"}, refused, form},
		{"no host", "", []string{"http://"}, refused, "missing or empty"},
		{"trailing dot", "", []string{"http://127.0.0.1.:" + p}, refused, "trailing dot"},
		{"trailing dot on an allowed origin", "", []string{"http://localhost.:5173"}, refused, "trailing dot"},
		{"port with a leading zero", "", []string{"http://127.0.0.1:0" + p}, refused, port},
		{"port with a sign", "", []string{"http://127.0.0.1:+" + p}, refused, port},
		{"non-numeric port", "", []string{"http://127.0.0.1:x"}, refused, port},
		{"empty port", "", []string{"http://127.0.0.1:"}, refused, port},
		{"port 65536", "", []string{"http://localhost:65536"}, refused, port},
		{"two ports", "", []string{own + ":" + p}, refused, "one ':'"},
		{"IPv6 zone", "[::1]:" + p, []string{"http://[::1%25eth0]:" + p}, refused, "IPv6"},
		{"IDN", "", []string{"http://bücher.example"}, refused, "a host is a name of ASCII letters"},
		{"a space", "", []string{"http:// 127.0.0.1:" + p}, refused, "a host is a name of ASCII letters"},
	}
	routes := []struct{ method, path, extra string }{
		{"POST", "/api/session", "Content-Length: 0"},
		{"DELETE", "/api/conversations/c_x", "Content-Length: 0"},
		{"GET", "/api/ws", "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" + wsKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.host
			if host == "" {
				host = s.host
			}
			var hdr []string
			for _, o := range tc.origins {
				if o == "X-Forwarded-Host" {
					hdr = append(hdr, "X-Forwarded-Host: evil.example")
					continue
				}
				hdr = append(hdr, "Origin: "+o)
			}
			for _, r := range routes {
				ls := append([]string{r.method + " " + r.path + " HTTP/1.1", "Host: " + host, "Authorization: Bearer " + testToken, r.extra}, hdr...)
				status, body := s.raw(t, lines(ls...))
				what := r.method + " " + r.path
				if !tc.allowed {
					wantRefused(t, what, status, body, "origin not allowed: ")
					if _, detail := apiError(t, body); !strings.Contains(detail, tc.detail) {
						t.Errorf("%s: detail %q, want it to say %q", what, detail, tc.detail)
					}
					continue
				}
				want := map[string]int{"POST": http.StatusNoContent, "DELETE": http.StatusNotFound, "GET": http.StatusSwitchingProtocols}[r.method]
				if status != want {
					t.Errorf("%s: %d %.200s, want %d (past the Origin check)", what, status, body, want)
				}
			}
			// A real WebSocket client, sending the same Origin lines.
			h := authHeader()
			h.Set("Host", host)
			for _, o := range tc.origins {
				if o == "X-Forwarded-Host" {
					h.Set("X-Forwarded-Host", "evil.example")
					continue
				}
				h.Add("Origin", o)
			}
			want := http.StatusForbidden
			if tc.allowed {
				want = http.StatusSwitchingProtocols
			}
			if st := s.dialStatus(t, "/api/ws", h); st != want {
				t.Errorf("gorilla dial: %d, want %d", st, want)
			}
		})
	}
}
