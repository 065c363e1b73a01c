package server

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// The oracles below read headers with net/url and net, not with the
// server's parser, so that a bug in one is not repeated in the check.

// hostSeeds are Host headers from TestHostHeader, served or not.
var hostSeeds = []string{
	"127.0.0.1:7700", "127.0.0.1", "localhost:7700", "localhost", "LOCALHOST:7700", "[::1]:7700", "[::1]",
	"[0:0:0:0:0:0:0:1]:7700", "127.1.2.3:7700", "app.localhost:7700", "buddy.lan:7700", "buddy.lan", "[fd00::1]:7700",
	"localhost:x", "localhost:", "localhost:0", "localhost:65536", "localhost:99999", "localhost:07700", "localhost:+80",
	"localhost:-80", "localhost:0x50", "localhost:80:80", "[::1]:", "localhost.", "localhost.:7700", "127.0.0.1.:7700",
	".localhost", "a..localhost", "::1", "::1:7700", "[::1%25eth0]:7700", "[::1%eth0]:7700", "[127.0.0.1]:7700",
	"[::1", "[::1]x", "[::ffff:127.0.0.1]:7700", "127.000.000.001", "127.1", "2130706433", "0x7f000001", "local_host",
	"user@localhost", "localhost/x", "localhost :80", "bücher.example", "xn--bcher-kva.example", "evil.example",
	"localhost.evil.example", "127.0.0.1.evil.example", "buddy.lan.evil.example", "0.0.0.0", "", " ", "[]", "[]:80",
	"localhost\x00", "ｌｏｃａｌｈｏｓｔ", "\u212a.localhost", "buddy.lan:7700\r\nX: y",
}

// servedByOracle is what the Host check may accept for a server whose
// allowed_hosts are buddy.lan and fd00::1, decided without its parser.
func servedByOracle(host string) (ok bool, why string) {
	u, err := url.Parse("http://" + host + "/")
	if err != nil || u.Host != host || u.User != nil || u.Path != "/" {
		return false, "not an authority net/url reads the same way"
	}
	for i := 0; i < len(host); i++ {
		if host[i] <= ' ' || host[i] >= 0x7f {
			return false, "a control, space or non-ASCII byte"
		}
	}
	name, port := u.Hostname(), u.Port()
	if strings.HasSuffix(host, ":") {
		return false, "an empty port"
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return false, "a port that is not 1-65535 in plain decimal"
		}
	}
	name = strings.ToLower(name)
	if strings.HasSuffix(name, ".") {
		return false, "a trailing dot"
	}
	bracketed := strings.HasPrefix(host, "[")
	if ip := net.ParseIP(name); ip != nil {
		if bracketed != strings.Contains(name, ":") {
			return false, "an IPv6 address without brackets, or IPv4 in brackets"
		}
		if !bracketed {
			return ip.To4() != nil && ip.To4()[0] == 127, "an IPv4 address outside 127/8"
		}
		return ip.Equal(net.IPv6loopback) || ip.Equal(net.ParseIP("fd00::1")), "an IPv6 address neither ::1 nor allowed"
	}
	if bracketed {
		return false, "brackets around something that is not an IP address"
	}
	if name == "localhost" || name == "buddy.lan" {
		return true, ""
	}
	if sub, ok := strings.CutSuffix(name, ".localhost"); ok && sub != "" && !strings.Contains("."+sub+".", "..") {
		return true, ""
	}
	return false, "a name neither loopback nor allowed"
}

// FuzzHostHeader: the Host check never serves a Host whose host is not
// localhost, a name under .localhost, 127/8, ::1 or an allowed host, nor
// one with a port that is not 1-65535 in plain decimal, nor one that net/url
// would read otherwise (userinfo, a path, a zone).
func FuzzHostHeader(f *testing.F) {
	for _, h := range hostSeeds {
		f.Add(h)
	}
	s := newBareServer(f, Options{AllowedHosts: []string{"buddy.lan", "fd00::1"}})
	f.Fuzz(func(t *testing.T, host string) {
		r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/"}, RequestURI: "/", Host: host, Header: http.Header{}}
		if s.checkHost(r) != nil {
			return
		}
		if ok, why := servedByOracle(host); !ok {
			t.Fatalf("Host %q served: %s", host, why)
		}
	})
}

// originOracle is (scheme, lowercase host, port with the scheme's default
// written as none) as net/url reads a serialised origin, ok false if it is
// not one.
func originOracle(s string) (key string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return "", false
		}
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil ||
		u.Path != "" || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Host == "" || strings.HasSuffix(u.Host, ":") {
		return "", false
	}
	return authorityKey(u.Scheme, u.Hostname(), u.Port())
}

func authorityKey(scheme, host, port string) (string, bool) {
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "", false
		}
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	host = strings.ToLower(host)
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return scheme + "://[" + host + "]:" + port, true
}

// FuzzOriginCheck: the Origin check never lets through an Origin that is
// not, as net/url reads it, http(s)://host[:port] with nothing else and the
// same scheme, host and port as the request's own origin or an allowed one;
// nor null, nor an empty one.
func FuzzOriginCheck(f *testing.F) {
	for _, o := range []string{
		"http://127.0.0.1:7700", "HTTP://127.0.0.1:7700", "http://127.0.0.1:80", "http://127.0.0.1", "https://127.0.0.1:7700",
		"http://localhost:5173", "https://chat.example.com", "https://chat.example.com:443", "null", "", "http://evil.example",
		"http://127.0.0.1:7700/", "http://127.0.0.1:7700?x", "http://127.0.0.1:7700#x", "http://u@127.0.0.1:7700",
		"http://127.0.0.1.:7700", "http://127.0.0.1:07700", "http://127.0.0.1:+7700", "http://127.0.0.1:", "http://[::1]:7700",
		"http://[::1%25eth0]:7700", "http://bücher.example", "127.0.0.1:7700", "//127.0.0.1:7700", "ws://127.0.0.1:7700",
		"http://127.0.0.1:7700, http://evil.example", "http://127.0.0.1:7700\\x", "http:\\\\127.0.0.1:7700",
	} {
		for _, h := range []string{"127.0.0.1:7700", "localhost:7700", "[::1]:7700", "127.0.0.1", "127.0.0.1:80", "localhost:x", ""} {
			f.Add(o, h, false)
		}
		f.Add(o, "127.0.0.1:7700", true)
	}
	s := newBareServer(f, Options{AllowedOrigins: []string{"http://localhost:5173", "https://chat.example.com"}})
	f.Fuzz(func(t *testing.T, o, host string, overTLS bool) {
		r := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/api/session"}, RequestURI: "/api/session", Host: host, Header: http.Header{"Origin": {o}}}
		scheme := "http"
		if overTLS {
			r.TLS, scheme = &tls.ConnectionState{}, "https"
		}
		if s.checkOrigin(r) != nil {
			return
		}
		got, ok := originOracle(o)
		if !ok || o == "null" {
			t.Fatalf("Origin %q (Host %q) let through: not a serialised http(s) origin", o, host)
		}
		var allowed []string
		for _, a := range []string{"http://localhost:5173", "https://chat.example.com"} {
			k, _ := originOracle(a)
			allowed = append(allowed, k)
		}
		if u, err := url.Parse(scheme + "://" + host); err == nil && u.User == nil && u.Path == "" {
			if k, ok := authorityKey(scheme, u.Hostname(), u.Port()); ok {
				allowed = append(allowed, k)
			}
		}
		for _, a := range allowed {
			if got == a {
				return
			}
		}
		t.Fatalf("Origin %q (Host %q, %s) let through: %s is neither the request's own origin nor an allowed one (%v)", o, host, scheme, got, allowed)
	})
}

// FuzzUpgradeClassification: whatever header lines a request carries, if
// gorilla would take it for a WebSocket handshake the server counts it as
// state-changing, so the Origin check runs.
func FuzzUpgradeClassification(f *testing.F) {
	for _, h := range []string{
		"Upgrade: websocket\r\nConnection: Upgrade", "Upgrade: h2c, websocket\r\nConnection: Upgrade",
		"Upgrade: WebSocket\r\nConnection: keep-alive, Upgrade", "Upgrade: h2c\r\nUpgrade: websocket\r\nConnection: Upgrade",
		"upgrade:websocket\r\nconnection:upgrade", "Upgrade: websocket\r\nConnection: keep-alive\r\nConnection: Upgrade",
		"Upgrade: h2c ,\twebsocket\r\nConnection:\tUpgrade ", "Upgrade: websocket\r\n Connection: Upgrade",
		"Sec-WebSocket-Key: x", "Connection: Upgrade", "",
	} {
		for _, m := range []string{"GET", "HEAD", "OPTIONS", "POST"} {
			f.Add(m, h)
		}
	}
	f.Fuzz(func(t *testing.T, method, headers string) {
		head := method + " /api/ws HTTP/1.1\r\nHost: 127.0.0.1:7700\r\n" + headers + "\r\n\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil {
			return
		}
		if websocket.IsWebSocketUpgrade(r) && !stateChanging(r) {
			t.Fatalf("%s with %q: gorilla would upgrade it, the server skips the Origin check", r.Method, headers)
		}
	})
}
