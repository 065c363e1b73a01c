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
