package http

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/buddy-run/buddy/internal/errs"
)

// MaxURLBytes is the longest URL Check accepts.
const MaxURLBytes = 8192

// entry is one parsed allowlist entry.
type entry struct {
	raw      string
	name     string     // lowercase domain without "*." ("" for an IP entry)
	wildcard bool       // "*.name": subdomains of name, not name itself
	ip       netip.Addr // valid for an IP literal entry (canonical, unmapped)
	port     uint16     // 0 = any port
}

// wildcardOK are single-label names a wildcard may sit directly on: special-use
// names (RFC 2606, 6761, 6762, 8375), .internal, and names ICANN will not
// delegate because they are used privately; none of them is a public suffix.
var wildcardOK = map[string]bool{
	"test": true, "example": true, "invalid": true, "localhost": true,
	"local": true, "internal": true, "lan": true, "home": true, "corp": true,
}

// publicSuffixes are common multi-label public suffixes (ICANN second levels and
// big shared-hosting domains). A wildcard directly on one of them would allow
// every registrant beneath it. This is a guard against obvious mistakes, not the
// Public Suffix List: golang.org/x/net is not a dependency.
var publicSuffixes = map[string]bool{
	"co.uk": true, "org.uk": true, "ac.uk": true, "gov.uk": true, "me.uk": true, "net.uk": true,
	"ltd.uk": true, "plc.uk": true, "com.au": true, "net.au": true, "org.au": true, "edu.au": true,
	"gov.au": true, "co.nz": true, "org.nz": true, "net.nz": true, "co.jp": true, "ne.jp": true,
	"or.jp": true, "ac.jp": true, "go.jp": true, "com.br": true, "net.br": true, "org.br": true,
	"com.cn": true, "net.cn": true, "org.cn": true, "gov.cn": true, "com.mx": true, "co.in": true,
	"net.in": true, "org.in": true, "co.kr": true, "or.kr": true, "co.za": true, "org.za": true,
	"com.tr": true, "com.tw": true, "com.hk": true, "com.sg": true, "co.il": true, "com.ar": true,
	"co.id": true, "com.my": true, "com.ph": true, "com.vn": true, "com.ua": true, "com.pl": true,
	"com.es": true, "co.th": true, "com.co": true, "com.pe": true, "com.sa": true, "com.eg": true,
	"github.io": true, "gitlab.io": true, "herokuapp.com": true, "appspot.com": true,
	"blogspot.com": true, "netlify.app": true, "vercel.app": true, "pages.dev": true,
	"workers.dev": true, "web.app": true, "firebaseapp.com": true, "azurewebsites.net": true,
	"cloudfront.net": true, "amazonaws.com": true, "s3.amazonaws.com": true,
	"onrender.com": true, "fly.dev": true, "ngrok.io": true, "ngrok-free.app": true,
}

// parseEntry validates and normalises one Policy.Domains entry.
// CheckDomain reports whether s is an allowlist entry the fetcher accepts,
// with the reason when it is not; configuration validation calls it so that
// a bad entry is reported with its key path rather than when the skill loads.
func CheckDomain(s string) error {
	_, err := parseEntry(s)
	return err
}

func parseEntry(s string) (entry, error) {
	bad := func(why string, a ...any) (entry, error) {
		return entry{}, errs.New(errs.ErrConfig, fmt.Sprintf("network allowlist entry %q: %s", s, fmt.Sprintf(why, a...)))
	}
	if s == "" {
		return bad("empty")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 {
			return bad("non-ASCII; write the IDNA (xn--) form")
		} else if c <= ' ' || c == 0x7f {
			return bad("contains whitespace or a control character")
		}
	}
	// An IPv6 literal without a port ("::1") is taken whole; otherwise a final
	// ":port" is split off.
	if ip, err := netip.ParseAddr(strings.ToLower(s)); err == nil {
		return ipEntry(entry{raw: s}, ip, bad)
	}
	if strings.Contains(s, "://") || hasScheme(s) {
		return bad("has a scheme; write the host only, e.g. \"example.com\"")
	}
	if strings.ContainsAny(s, "/?#\\") {
		return bad("has a path, query or fragment; write the host only")
	}
	if strings.Contains(s, "@") {
		return bad("has userinfo")
	}
	e := entry{raw: s}
	host := strings.ToLower(s)
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return bad("unclosed '['")
		}
		rest := host[end+1:]
		host = host[1:end]
		if rest != "" {
			if rest[0] != ':' {
				return bad("junk after ']'")
			}
			p, ok := parsePort(rest[1:])
			if !ok {
				return bad("invalid port %q", rest[1:])
			}
			e.port = p
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() {
			return bad("brackets must hold an IPv6 address")
		}
		return ipEntry(e, ip, bad)
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		p, ok := parsePort(host[i+1:])
		if !ok {
			return bad("invalid port %q", host[i+1:])
		}
		e.port = p
		host = host[:i]
		if strings.Contains(host, ":") {
			return bad("an IPv6 address with a port must be bracketed, e.g. \"[::1]:8080\"")
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			return ipEntry(e, ip, bad)
		}
	}
	host = strings.TrimSuffix(host, ".")
	if strings.HasPrefix(host, "*.") {
		e.wildcard = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return bad(`a wildcard is allowed only as a whole leading "*." label`)
	}
	if why := domainProblem(host); why != "" {
		return bad("%s", why)
	}
	if endsInNumber(host) {
		if ip, err := parseIPv4(host); err == nil {
			return bad("not a canonical IPv4 address; write %q", ip.String())
		}
		return bad("the last label is numeric, which is neither a host name nor an IPv4 address")
	}
	if e.wildcard {
		if !strings.Contains(host, ".") && !wildcardOK[host] {
			return bad("a wildcard on a top-level domain allows the whole TLD; list hosts or a narrower wildcard")
		}
		if publicSuffixes[host] {
			return bad("%q is a public suffix; a wildcard on it allows every site beneath it", host)
		}
	}
	e.name = host
	return e, nil
}

func ipEntry(e entry, ip netip.Addr, bad func(string, ...any) (entry, error)) (entry, error) {
	if ip.Zone() != "" {
		return bad("an IPv6 zone is not allowed")
	}
	ip = ip.Unmap()
	if ip.IsUnspecified() {
		return bad("the unspecified address is not a destination")
	}
	e.ip = ip
	return e, nil
}

// hasScheme reports whether s starts like "scheme:" with a scheme other than a
// host name followed by a port (a port is all digits).
func hasScheme(s string) bool {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return false
	}
	rest := s[i+1:]
	if rest == "" {
		return false // "example.com:" is a bad port, reported as such
	}
	for j := 0; j < len(rest); j++ {
		if rest[j] < '0' || rest[j] > '9' {
			// "http:example.com" or "mailto:x" (an IPv6 literal was parsed before).
			scheme := strings.ToLower(s[:i])
			return scheme == "http" || scheme == "https" || !strings.ContainsAny(scheme, ".[")
		}
	}
	return false
}

func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint16(n), true
}

// domainProblem checks that a lowercase name (no trailing dot) is made of
// letters, digits, '-' and '_' in non-empty labels of at most 63 bytes, and
// returns what is wrong, or "".
func domainProblem(name string) string {
	if name == "" {
		return "empty host"
	}
	if len(name) > 253 {
		return "host longer than 253 bytes"
	}
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return "empty label"
			}
			label = 0
			continue
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c >= 0x80:
			return "non-ASCII host; use the IDNA (xn--) form"
		default:
			return fmt.Sprintf("invalid character %q in host", c)
		}
		label++
		if label > 63 {
			return "label longer than 63 bytes"
		}
	}
	if label == 0 {
		return "empty label"
	}
	return ""
}

// endsInNumber is the URL Standard's "ends in a number" test: a host whose last
// label is numeric is an IPv4 address (or invalid), whatever else it contains.
// host has had one trailing dot removed already.
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := parseIPv4Number(last)
	return ok
}

// parseIPv4Number parses one part of a URL Standard IPv4 address: decimal,
// octal with a leading 0, or hex with a leading 0x.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	if s == "" {
		return 0, true
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= uint64(base) {
			return 0, false
		}
		n = n*uint64(base) + d
		if n > 1<<32 {
			n = 1 << 32 // saturate: already too big for any part
		}
	}
	return n, true
}

// parseIPv4 is the URL Standard's IPv4 parser: one to four parts, each decimal,
// octal or hex, the last filling the remaining bytes, so that 2130706433,
// 0177.0.0.1, 0x7f.1 and 127.1 are all 127.0.0.1.
func parseIPv4(host string) (netip.Addr, error) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, fmt.Errorf("more than four parts")
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, fmt.Errorf("part %q is not a number", p)
		}
		nums[i] = n
	}
	last := len(nums) - 1
	for _, n := range nums[:last] {
		if n > 255 {
			return netip.Addr{}, fmt.Errorf("part %d is over 255", n)
		}
	}
	if nums[last] >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, fmt.Errorf("last part is out of range")
	}
	v := nums[last]
	for i, n := range nums[:last] {
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

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
	if why := domainProblem(host); why != "" {
		return "", netip.Addr{}, reason(errs.ErrInvalidInput, why)
	}
	if endsInNumber(host) {
		ip, err := parseIPv4(host)
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
		if port, ok = parsePort(p); !ok {
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
	if matched, _ := f.match(host, ip, effPort); !matched {
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
// port, and whether an exact entry names it (which lets its addresses be
// private).
func (f *Fetcher) match(host string, ip netip.Addr, port uint16) (matched, explicit bool) {
	for _, e := range f.entries {
		if e.port != 0 && e.port != port {
			continue
		}
		if ip.IsValid() {
			if e.ip.IsValid() && e.ip == ip {
				return true, true
			}
			continue
		}
		switch {
		case e.ip.IsValid():
		case !e.wildcard && e.name == host:
			return true, true
		case e.wildcard && len(host) > len(e.name)+1 && strings.HasSuffix(host, e.name) && host[len(host)-len(e.name)-1] == '.':
			matched = true
		}
	}
	return matched, false
}

// matchAnyPort reports whether a domain would match on some port, for a
// clearer error message.
func (f *Fetcher) matchAnyPort(host string) bool {
	for _, e := range f.entries {
		if e.port == 0 || e.ip.IsValid() {
			continue
		}
		if e.name == host && !e.wildcard || e.wildcard && strings.HasSuffix(host, "."+e.name) {
			return true
		}
	}
	return false
}

// listedIP reports whether ip is itself an allowlist entry (any port).
func (f *Fetcher) listedIP(ip netip.Addr) bool {
	ip = canonicalAddr(ip)
	for _, e := range f.entries {
		if e.ip.IsValid() && e.ip == ip {
			return true
		}
	}
	return false
}

// addrRefusal says why a host (explicit or not) may not connect to ip, or "".
// Explicit hosts may reach private addresses, but not cloud metadata
// endpoints unless the endpoint's address is itself listed.
func (f *Fetcher) addrRefusal(ip netip.Addr, explicit bool) string {
	if isMetadata(ip) && !f.listedIP(ip) {
		return fmt.Sprintf("address %s is a cloud metadata endpoint", canonicalAddr(ip))
	}
	if explicit {
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
