// Package domain handles the domain patterns of network allowlists, in skill
// manifests and in buddy.toml alike: "example.com" (that host), "*.example.com"
// (its subdomains, not the apex), an IP literal or "localhost", each with an
// optional ":port" (any port when absent). A skill manifest may declare "*":
// any domain the operator allows (the operator's list is then the limit);
// operators cannot grant "*".
//
//	p, err := domain.Normalize("API.GitHub.com.")        // "api.github.com"
//	domain.Intersect([]string{"*.github.com"},           // what the skill declares
//		[]string{"api.github.com", "example.com"})     // what the operator grants
//	// → ["api.github.com"]
package domain

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Pattern is a parsed, normalised allowlist entry.
type Pattern struct {
	Host     string // without "*." for wildcards; IPv6 without brackets
	Wildcard bool   // subdomains of Host only
	Port     int    // 0 = any
	IP       bool   // Host is an IP literal: canonical when it is a standard IPv4 or IPv6 address, as written for other numeric spellings ("0x7f.1"; fetchers normalise)
	Any      bool   // "*": every host and port (skill manifests only)
}

func (p Pattern) String() string {
	if p.Any {
		return "*"
	}
	h := p.Host
	if p.Wildcard {
		h = "*." + h
	}
	if p.Port == 0 {
		return h
	}
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(p.Port)
}

// Parse validates an allowlist entry.
func Parse(s string) (Pattern, error) {
	orig := s
	// Refuse non-ASCII before case folding: strings.ToLower maps some
	// non-ASCII runes to ASCII letters (U+212A KELVIN SIGN → "k").
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return Pattern{}, fmt.Errorf("%q: non-ASCII host name (use punycode, \"xn--...\")", orig)
		}
	}
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Pattern{}, fmt.Errorf("empty domain")
	}
	if s == "*" {
		return Pattern{Any: true}, nil
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/@?#\\ \t%") {
		return Pattern{}, fmt.Errorf("%q must be a bare host name (no scheme, path, userinfo or escapes)", orig)
	}
	host, port, bracketed := s, "", false
	switch {
	case strings.HasPrefix(s, "["):
		bracketed = true
		end := strings.Index(s, "]")
		if end < 0 {
			return Pattern{}, fmt.Errorf("%q: unterminated IPv6 literal", orig)
		}
		rest := s[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return Pattern{}, fmt.Errorf("%q: junk after the IPv6 literal", orig)
		}
		host, port = s[1:end], strings.TrimPrefix(rest, ":")
		if rest == ":" {
			return Pattern{}, fmt.Errorf("%q: empty port", orig)
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, port = s[:i], s[i+1:]
		if port == "" {
			return Pattern{}, fmt.Errorf("%q: empty port", orig)
		}
	}
	p := Pattern{}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' || port[0] == '+' {
			return Pattern{}, fmt.Errorf("%q: bad port %q", orig, port)
		}
		p.Port = n
	}
	if bracketed || strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return Pattern{}, fmt.Errorf("%q: bad IPv6 literal", orig)
		}
		p.Host, p.IP = a.String(), true
		return p, nil
	}
	host = strings.TrimSuffix(host, ".")
	if looksNumeric(host) {
		p.Host, p.IP = host, true
		if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
			p.Host = a.String()
		}
		return p, nil
	}
	labels := strings.Split(host, ".")
	if labels[0] == "*" {
		if len(labels) < 3 {
			return Pattern{}, fmt.Errorf("%q: a wildcard needs at least two labels after it (\"*.example.com\")", orig)
		}
		if looksNumeric(strings.Join(labels[1:], ".")) {
			return Pattern{}, fmt.Errorf("%q: a wildcard cannot cover an IP address", orig)
		}
		p.Wildcard = true
		labels = labels[1:]
	}
	for _, l := range labels {
		if l == "*" {
			return Pattern{}, fmt.Errorf("%q: a wildcard may only be the first label", orig)
		}
		if !labelRE.MatchString(l) {
			return Pattern{}, fmt.Errorf("%q: %q is not a valid host name label (use punycode for non-ASCII names)", orig, l)
		}
	}
	if looksNumeric(labels[len(labels)-1]) {
		// The URL Standard reads a host ending in a number as an IPv4
		// address, so no URL could ever reach this "name".
		return Pattern{}, fmt.Errorf("%q: the last label is numeric, which is neither a host name nor an IPv4 address", orig)
	}
	p.Host = strings.Join(labels, ".")
	if len(p.Host) > 253 {
		return Pattern{}, fmt.Errorf("%q: host name longer than 253 bytes", orig)
	}
	return p, nil
}

// looksNumeric: every label is a number in decimal, octal or 0x-hex: the host
// would be read as an IPv4 address by inet_aton-style parsers.
func looksNumeric(h string) bool {
	if h == "" || h[0] < '0' || h[0] > '9' {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" {
			return false
		}
		if strings.HasPrefix(l, "0x") {
			if strings.Trim(l[2:], "0123456789abcdef") != "" {
				return false
			}
			continue
		}
		if strings.Trim(l, "0123456789") != "" {
			return false
		}
	}
	return true
}

// Normalize returns the canonical spelling of an allowlist entry.
func Normalize(s string) (string, error) {
	p, err := Parse(s)
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// Within reports whether every host:port that a allows is also allowed by b.
func Within(a, b Pattern) bool {
	if b.Any {
		return true
	}
	if a.Any {
		return false
	}
	if b.Port != 0 && a.Port != b.Port {
		return false
	}
	if a.IP || b.IP {
		return a.IP && b.IP && !a.Wildcard && !b.Wildcard && a.Host == b.Host
	}
	switch {
	case !b.Wildcard:
		return !a.Wildcard && a.Host == b.Host
	case !a.Wildcard:
		return strings.HasSuffix(a.Host, "."+b.Host)
	default: // both wildcards: *.x.example.com within *.example.com
		return a.Host == b.Host || strings.HasSuffix(a.Host, "."+b.Host)
	}
}

// Intersect returns the patterns allowed by both lists: for each pair, the
// hosts both cover (the narrower host part, since two patterns' host sets are
// either nested or disjoint) on the ports both allow. The result is sorted and
// has no entry lying within another. Entries that do not parse are ignored
// (callers validate first).
func Intersect(declared, granted []string) []string {
	parse := func(list []string) []Pattern {
		var ps []Pattern
		for _, s := range list {
			if p, err := Parse(s); err == nil {
				ps = append(ps, p)
			}
		}
		return ps
	}
	ds, gs := parse(declared), parse(granted)
	var out []Pattern
	for _, d := range ds {
		for _, g := range gs {
			if m, ok := meet(d, g); ok {
				out = append(out, m)
			}
		}
	}
	// Drop entries strictly within others; equal ones collapse below.
	var keep []string
	for i, p := range out {
		covered := false
		for j, q := range out {
			if i != j && p != q && Within(p, q) {
				covered = true
				break
			}
		}
		if !covered {
			keep = append(keep, p.String())
		}
	}
	slices.Sort(keep)
	return slices.Compact(keep)
}

// meet is the intersection of two patterns, when they overlap.
func meet(a, b Pattern) (Pattern, bool) {
	port := a.Port
	switch {
	case a.Port == 0:
		port = b.Port
	case b.Port != 0 && a.Port != b.Port:
		return Pattern{}, false
	}
	ha, hb := a, b
	ha.Port, hb.Port = 0, 0
	var m Pattern
	switch {
	case Within(ha, hb):
		m = ha
	case Within(hb, ha):
		m = hb
	default:
		return Pattern{}, false
	}
	m.Port = port
	return m, true
}
