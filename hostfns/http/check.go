package http

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// MaxURLBytes is the longest URL Check accepts.
const MaxURLBytes = 8192

// normalizeHost turns a URL host (u.Hostname(), brackets stripped) into a
// lowercase domain or a canonical IP. It reports whether the host was written
// in brackets. Errors are errs kinds with a reason.
func normalizeHost(hostname string, bracketed bool) (string, netip.Addr, error) {
	if bracketed {
		ip, err := netip.ParseAddr(hostname)
		if err != nil || !ip.Is6() {
			return "", netip.Addr{}, reason(errs.ErrInvalidInput, "brackets must hold an IPv6 address")
		}
		if ip.Zone() != "" {
			return "", netip.Addr{}, reason(errs.ErrForbidden, "IPv6 zone identifiers are not allowed")
		}
		ip = ip.Unmap()
		return ip.String(), ip, nil
	}
	host := strings.ToLower(hostname)
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return "", netip.Addr{}, reason(errs.ErrForbidden, "non-ASCII host; use the IDNA (xn--) form")
		}
	}
	host = strings.TrimSuffix(host, ".")
	if why := allow.NameProblem(host); why != "" {
		return "", netip.Addr{}, reason(errs.ErrInvalidInput, why)
	}
	if allow.EndsInNumber(host) {
		ip, err := allow.ParseIPv4(host)
		if err != nil {
			return "", netip.Addr{}, reason(errs.ErrInvalidInput, "malformed IPv4 address: "+err.Error())
		}
		return ip.String(), ip, nil
	}
	return host, netip.Addr{}, nil
}

// reason is a partial *Error: a kind and why, completed by the caller.
func reason(kind error, why string) *Error { return &Error{Kind: kind, Reason: why} }

// Check runs the static checks on rawURL: scheme http or https, no userinfo,
// a host that normalises to a domain or an IP literal (any IPv4 spelling is
// read as a browser would), and an allowlist match including the port. It
// returns the URL in canonical form (lowercase host without trailing dot, IP
// literals in canonical form, no fragment), which is what Get fetches.
// It does not resolve names: the addresses a name resolves to are checked when
// Get dials them.
//
// Errors are *Error values wrapping errs.ErrForbidden (a policy refusal) or
// errs.ErrInvalidInput (the URL cannot be parsed).
func (f *Fetcher) Check(rawURL string) (*url.URL, error) {
	fail := func(kind error, display, why string, host string, ip netip.Addr) (*url.URL, error) {
		return nil, &Error{Kind: kind, URL: display, Host: host, Addr: ip, Reason: why}
	}
	if len(rawURL) > MaxURLBytes {
		return fail(errs.ErrInvalidInput, quoteURL(rawURL), fmt.Sprintf("URL longer than %d bytes", MaxURLBytes), "", netip.Addr{})
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		why := "not a valid URL"
		if ue, ok := err.(*url.Error); ok {
			why += ": " + ue.Err.Error()
		}
		return fail(errs.ErrInvalidInput, quoteURL(rawURL), why, "", netip.Addr{})
	}
	display := displayURL(u)
	switch {
	case u.Scheme == "":
		return fail(errs.ErrForbidden, display, "no scheme; only absolute http and https URLs are allowed", "", netip.Addr{})
	case u.Scheme != "http" && u.Scheme != "https":
		return fail(errs.ErrForbidden, display, fmt.Sprintf("scheme %q is not allowed; only http and https", u.Scheme), "", netip.Addr{})
	case u.Opaque != "":
		return fail(errs.ErrForbidden, display, "opaque URLs are not allowed; write scheme://host/", "", netip.Addr{})
	case u.User != nil:
		return fail(errs.ErrForbidden, display, "userinfo (user:password@) is not allowed", "", netip.Addr{})
	case u.Host == "":
		return fail(errs.ErrInvalidInput, display, "no host", "", netip.Addr{})
	}
	var port uint16
	if p := u.Port(); p != "" {
		var ok bool
		if port, ok = allow.ParsePort(p); !ok {
			return fail(errs.ErrInvalidInput, display, fmt.Sprintf("invalid port %q", p), "", netip.Addr{})
		}
	}
	hostname := u.Hostname()
	host, ip, err := normalizeHost(hostname, strings.HasPrefix(u.Host, "["))
	if err != nil {
		e := err.(*Error)
		return fail(e.Kind, display, e.Reason, hostname, netip.Addr{})
	}
	effPort := port
	if effPort == 0 {
		effPort = defaultPort(u.Scheme)
	}
	matched, local := f.match(host, ip, effPort)
	if !matched {
		switch {
		case ip.IsValid() && specialReason(ip) != "":
			why := fmt.Sprintf("address %s is %s", ip, specialReason(ip))
			if isMetadata(ip) {
				why = fmt.Sprintf("address %s is a cloud metadata endpoint", ip)
			}
			return fail(errs.ErrForbidden, display, why, host, ip)
		case ip.IsValid():
			return fail(errs.ErrForbidden, display, fmt.Sprintf("IP literal %s is not in the allowlist", ip), host, ip)
		case f.matchAnyPort(host):
			return fail(errs.ErrForbidden, display, fmt.Sprintf("port %d of host %s is not in the allowlist", effPort, host), host, ip)
		default:
			return fail(errs.ErrForbidden, display, fmt.Sprintf("host %s is not in the allowlist", host), host, ip)
		}
	}
	// An IP literal allowed only by an entry that is not Local: refused now,
	// before any I/O, if the address is not public (the dialer would).
	if ip.IsValid() {
		if why := f.addrRefusal(ip, local); why != "" {
			return fail(errs.ErrForbidden, display, why, host, ip)
		}
	}

	// The canonical URL: what is checked is exactly what is fetched.
	out := *u
	out.Host = host
	if ip.Is6() {
		out.Host = "[" + host + "]"
	}
	if u.Port() != "" {
		out.Host += ":" + strconv.Itoa(int(port))
	}
	out.User = nil
	out.Fragment, out.RawFragment = "", ""
	return &out, nil
}

func defaultPort(scheme string) uint16 {
	if scheme == "https" {
		return 443
	}
	return 80
}

// match reports whether an entry allows host (a normalised domain or IP) on
// port, and whether one that does is Local: an exact entry the operator wrote,
// which lets the host's addresses be private. Entries the intersection derived
// from a skill's declaration, wildcards, and anything a manifest declared are
// never Local (package allow).
func (f *Fetcher) match(host string, ip netip.Addr, port uint16) (matched, local bool) {
	for _, e := range f.entries {
		if e.Allows(host, ip, port) {
			matched = true
			if e.Local() {
				return true, true
			}
		}
	}
	return matched, false
}

// matchAnyPort reports whether a domain would match on some port, for a
// clearer error message.
func (f *Fetcher) matchAnyPort(host string) bool {
	for _, e := range f.entries {
		if e.Port() != 0 && e.Allows(host, netip.Addr{}, e.Port()) {
			return true
		}
	}
	return false
}

// listedIP reports whether ip is itself a Local allowlist entry (any port).
func (f *Fetcher) listedIP(ip netip.Addr) bool {
	ip = canonicalAddr(ip)
	for _, e := range f.entries {
		if e.Local() && e.IP().IsValid() && e.IP() == ip {
			return true
		}
	}
	return false
}

// addrRefusal says why a host (allowed by a Local entry or not) may not
// connect to ip, or "". Hosts of a Local entry may reach private addresses,
// but not cloud metadata endpoints unless the endpoint's address is itself a
// Local entry.
func (f *Fetcher) addrRefusal(ip netip.Addr, local bool) string {
	if isMetadata(ip) && !f.listedIP(ip) {
		return fmt.Sprintf("address %s is a cloud metadata endpoint", canonicalAddr(ip))
	}
	if local {
		return ""
	}
	if why := specialReason(ip); why != "" {
		return fmt.Sprintf("address %s is %s", canonicalAddr(ip), why)
	}
	return ""
}

const maxDisplay = 256

// displayURL renders u for an error message: password redacted, cut short.
func displayURL(u *url.URL) string {
	s := u.Redacted()
	if len(s) > maxDisplay {
		s = s[:maxDisplay] + "..."
	}
	return s
}

// quoteURL renders an unparsed URL for an error message.
func quoteURL(s string) string {
	if len(s) > maxDisplay {
		return strconv.Quote(s[:maxDisplay]) + "..."
	}
	return strconv.Quote(s)
}
