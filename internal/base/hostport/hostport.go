// Package hostport parses the host names, ports and origins buddy's access
// decisions rest on, strictly and in one place: the server's Host and Origin
// checks, and buddy.toml's [server] allowed_hosts and allowed_origins. Each
// parser accepts the forms browsers and buddy's clients send and refuses the
// rest: a value that cannot be read one way only is a refusal, never a
// skipped check (docs/PROTOCOL.md, "Origin and Host").
//
//	a, err := hostport.Parse(r.Host)   // "localhost:7700", "[::1]:7700"
//	if a.Loopback() { ... }
//	o, err := hostport.ParseOrigin(r.Header.Get("Origin"))
package hostport

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// Authority is a parsed Host header, or the host and port of an Origin.
// It is comparable: two authorities are the same host and port iff ==.
type Authority struct {
	name string     // a DNS name in ASCII lowercase; "" when addr is set
	addr netip.Addr // an IP literal: IPv4 dotted quad, or IPv6 in brackets, no zone
	port string     // decimal 1-65535 without a leading zero; "" when absent
}

// Why a Host or an Origin's host and port do not parse, or the Host is not
// served. The server's 403 says which (after "host not allowed: " or
// "origin not allowed: ").
var (
	errHostEmpty    = errors.New("the host is missing or empty")
	errHostTooLong  = errors.New("the host name is longer than 253 characters")
	errHostBytes    = errors.New("a host is a name of ASCII letters, digits, '-' and '.', an IPv4 address, or an IPv6 address in brackets (no userinfo, path, zone or other characters)")
	errHostTrailing = errors.New("a host name with a trailing dot is not served (localhost. is not localhost)")
	errHostLabel    = errors.New("a host name has an empty label or one longer than 63 characters")
	errHostNumeric  = errors.New("a host name that ends in a number must be a dotted-quad IPv4 address")
	errHostIPv6     = errors.New("an address in brackets must be an IPv6 address without a zone")
	errHostColons   = errors.New("a host has one ':', before its port (an IPv6 address goes in brackets)")
	errPort         = errors.New("the port must be a number from 1 to 65535, without sign, spaces or leading zeros")

	errOriginNull = errors.New("Origin null (a sandboxed frame, a file: page, a redirect) may not drive buddy")
	errOriginForm = errors.New("an Origin is http:// or https:// and a host, with an optional port, nothing else")
)

// Parse parses host [":" port] as a Host header carries it
// (RFC 9110 §7.2), more strictly than RFC 3986 allows: no userinfo, no empty
// or non-decimal port, no IPv6 zone, no trailing dot, no non-ASCII (browsers
// send IDNs as punycode), no name whose last label looks like a number
// (WHATWG URL parsers read those as IPv4 in one of several notations).
// Letters are lowercased.
func Parse(s string) (Authority, error) {
	if s == "" {
		return Authority{}, errHostEmpty
	}
	if len(s) > 253+len("[]:65535") {
		return Authority{}, errHostTooLong
	}
	var a Authority
	host, port, hasPort := s, "", false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Authority{}, errHostIPv6
		}
		host = s[1:end]
		switch rest := s[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			port, hasPort = rest[1:], true
		default:
			return Authority{}, errHostBytes
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return Authority{}, errHostIPv6
		}
		a.addr = ip
	} else {
		var found bool
		if host, port, found = strings.Cut(s, ":"); found {
			if strings.Contains(port, ":") {
				return Authority{}, errHostColons
			}
			hasPort = true
		}
		if err := a.setHost(host); err != nil {
			return Authority{}, err
		}
	}
	if hasPort {
		if !validPort(port) {
			return Authority{}, errPort
		}
		a.port = port
	}
	return a, nil
}

// setHost sets a's name or addr from a host without brackets or port.
func (a *Authority) setHost(host string) error {
	if host == "" {
		return errHostEmpty
	}
	if len(host) > 253 {
		return errHostTooLong
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return errHostBytes
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
		a.addr = ip
		return nil
	}
	if strings.HasSuffix(host, ".") {
		return errHostTrailing
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errHostLabel
		}
	}
	if last := labels[len(labels)-1]; last[0] >= '0' && last[0] <= '9' {
		return errHostNumeric
	}
	a.name = asciiLower(host)
	return nil
}

// validPort reports whether p is 1-65535 in decimal without a leading zero.
func validPort(p string) bool {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// asciiLower lowercases A-Z only (strings.ToLower would also fold, say, the
// Kelvin sign into k).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Loopback reports whether a names this machine: localhost, a name under
// .localhost (RFC 6761), 127.0.0.0/8 or ::1. An IPv4-mapped ::ffff:127.x is
// not in the list (no browser or client of buddy's sends it).
func (a Authority) Loopback() bool {
	if a.name != "" {
		return a.name == "localhost" || strings.HasSuffix(a.name, ".localhost")
	}
	return a.addr.Is4() && a.addr.IsLoopback() || a.addr == netip.IPv6Loopback()
}

// SameHost reports whether a and b name the same host, ports aside.
func (a Authority) SameHost(b Authority) bool {
	return a.name == b.name && a.addr == b.addr
}

// ParseAllowedHost parses an entry of [server] allowed_hosts: a name or an
// IP address (IPv6 with or without brackets), no port.
func ParseAllowedHost(s string) (Authority, error) {
	if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" {
		return Authority{addr: ip}, nil
	}
	a, err := Parse(s)
	if err != nil {
		return Authority{}, err
	}
	if a.port != "" {
		return Authority{}, errors.New("an allowed host has no port")
	}
	return a, nil
}

// Origin is a parsed Origin header: scheme, host and port, with the
// scheme's default port written as none (as browsers serialise it).
type Origin struct {
	Scheme string // "http" or "https"
	Host   Authority
}

// ParseOrigin parses an Origin value as a browser serialises it (RFC 6454
// §6.2): scheme "://" host [":" port], no path (not even "/"), query,
// fragment or userinfo. "null" is errOriginNull.
func ParseOrigin(s string) (Origin, error) {
	if s == "null" {
		return Origin{}, errOriginNull
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || strings.ContainsAny(rest, "/?#@\\") {
		return Origin{}, errOriginForm
	}
	var o Origin
	switch asciiLower(scheme) {
	case "http":
		o.Scheme = "http"
	case "https":
		o.Scheme = "https"
	default:
		return Origin{}, errOriginForm
	}
	h, err := Parse(rest)
	if err != nil {
		return Origin{}, err
	}
	o.Host = h.WithScheme(o.Scheme)
	return o, nil
}

// WithScheme drops the port when it is scheme's default.
func (a Authority) WithScheme(scheme string) Authority {
	if scheme == "http" && a.port == "80" || scheme == "https" && a.port == "443" {
		a.port = ""
	}
	return a
}
