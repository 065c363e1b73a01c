// Package allow is buddy's one grammar of network allowlist entries: the
// operator's allowed_domains in buddy.toml, a skill manifest's
// capabilities.network, their intersection, and the fetcher (hostfns/http)
// all parse and match entries here, so that no two of them can disagree.
//
//	op, err := allow.Parse("intranet.corp", allow.Operator) // op.Local() == true
//	sk, err := allow.Parse("*.github.com", allow.Manifest)  // sk.Local() == false
//	granted := allow.Intersect(
//		[]string{"api.x.test"}, // what the skill declares (skill.toml)
//		[]string{"*.x.test"})   // what the operator grants (buddy.toml)
//	// → [api.x.test], public addresses only: Local() == false
//
// # Entries
//
//   - "example.com": that host exactly;
//   - "*.example.com": any host beneath example.com at any depth, not the apex;
//   - an IP literal ("127.0.0.1", "::1", "[::1]"): that address, however a URL
//     spells it;
//   - any of these with ":port", restricting the port (otherwise any port);
//   - "*": any host and port the operator allows; a manifest may declare it,
//     the operator may not grant it.
//
// Case and one trailing dot are normalised. Refused: a scheme, path, query,
// userinfo, whitespace, control or non-ASCII characters (write the xn-- form),
// empty or over-long labels, a wildcard anywhere but a whole leading label, an
// IPv4 address in any spelling but the canonical one (the URL Standard reads
// "127.1" and "0x7f.1" as 127.0.0.1; an entry must say it plainly), IPv6 zones,
// the unspecified address, a name whose last label is numeric, and a wildcard
// on a top-level domain or a well-known public suffix ("*.com", "*.co.uk",
// "*.github.io").
//
// # Special-use names
//
// A wildcard directly on one of the special-use or private-use names test,
// example, invalid, internal, local, lan, home and corp ("*.test",
// "*.internal") is accepted, from the operator and from a manifest alike, and
// means what every wildcard means: any name beneath it, reaching public
// addresses only. Names under these usually resolve to private addresses,
// which a wildcard never reaches: list such hosts exactly. "*.localhost" is
// refused everywhere: every name beneath localhost is loopback (RFC 6761), so
// the wildcard could never reach anything.
//
// # Private addresses and provenance
//
// Whether a fetch may reach a loopback, private, link-local or otherwise
// non-public address is a property of the entry that allowed the host,
// [Entry.Local], and only an entry the operator wrote exactly (a host name or
// an IP literal, with or without a port, parsed with [Operator]) has it. An
// operator's wildcard, anything a manifest declares, and any entry the
// intersection derives from the manifest's side (the manifest's "api.x.test"
// within the operator's "*.x.test") reach public addresses only. An operator
// who grants both "a.x.test" and "*.x.test" keeps the exact entry's meaning
// for a.x.test. Cloud metadata endpoints are the fetcher's business: it
// refuses them even for a local entry unless the endpoint's address itself is
// one.
package allow

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Source says who wrote an entry, which decides what it may mean.
type Source uint8

const (
	// Manifest is a skill's declaration (skill.toml capabilities.network):
	// "*" is allowed, and no entry is ever Local.
	Manifest Source = iota + 1
	// Operator is the operator's grant (buddy.toml allowed_domains): "*" is
	// refused, and an exact host or IP literal is Local.
	Operator
)

func (s Source) String() string {
	switch s {
	case Manifest:
		return "manifest"
	case Operator:
		return "operator"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Entry is one parsed, normalised allowlist entry. The zero Entry is invalid
// and allows nothing; entries come from Parse and Intersect only, so that
// Local cannot be claimed by anyone else.
type Entry struct {
	name     string     // lowercase host name without "*." ("" for IP and "*" entries)
	ip       netip.Addr // valid for an IP literal entry: canonical, unmapped, no zone
	wildcard bool       // "*.name": names beneath name, not name itself
	any      bool       // "*"
	port     uint16     // 0 = any port
	local    bool       // may reach non-public addresses: an exact operator entry
}

// IsValid reports whether e came from Parse or Intersect.
func (e Entry) IsValid() bool { return e.any || e.name != "" || e.ip.IsValid() }

// Host is the host part: a lowercase name (without "*." for a wildcard), the
// canonical IP address (IPv6 without brackets), or "*".
func (e Entry) Host() string {
	switch {
	case e.any:
		return "*"
	case e.ip.IsValid():
		return e.ip.String()
	}
	return e.name
}

// IP is the address of an IP literal entry, and the invalid Addr otherwise.
func (e Entry) IP() netip.Addr { return e.ip }

// Wildcard reports whether e is "*.name": the names beneath Host.
func (e Entry) Wildcard() bool { return e.wildcard }

// Any reports whether e is "*" (a manifest's "any host the operator allows").
func (e Entry) Any() bool { return e.any }

// Port is the only port e allows, or 0 for any port.
func (e Entry) Port() uint16 { return e.port }

// Local reports whether the hosts e allows may be reached at non-public
// addresses (loopback, private, link-local, ...): true only for an exact host
// or IP literal the operator wrote.
func (e Entry) Local() bool { return e.local }

// String is the canonical spelling, which Parse reads back to the same host,
// port and kind. It does not show Local.
func (e Entry) String() string {
	if e.any {
		return "*"
	}
	h := e.Host()
	if e.wildcard {
		h = "*." + h
	}
	if e.port == 0 {
		return h
	}
	if e.ip.Is6() {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(int(e.port))
}

// Strings returns the canonical spellings of list.
func Strings(list []Entry) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.String()
	}
	return out
}

// Allows reports whether e lets a client reach host on port. host is a
// normalised name (lowercase, no trailing dot, valid by NameProblem) when ip
// is invalid; otherwise ip, canonical and unmapped, is the host.
func (e Entry) Allows(host string, ip netip.Addr, port uint16) bool {
	switch {
	case !e.IsValid():
		return false
	case e.any:
		return true
	case e.port != 0 && e.port != port:
		return false
	case ip.IsValid():
		return e.ip.IsValid() && e.ip == ip
	case e.ip.IsValid():
		return false
	case !e.wildcard:
		return e.name == host
	}
	return len(host) > len(e.name)+1 && strings.HasSuffix(host, e.name) && host[len(host)-len(e.name)-1] == '.'
}

// Error is a refused entry.
type Error struct {
	Entry  string // as written
	Reason string
}

func (e *Error) Error() string {
	return quote(e.Entry) + ": " + e.Reason
}

// quote shows an entry, escaped and cut short: entries come from manifests.
func quote(s string) string {
	const max = 256
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// wildcardOK are the single-label names a wildcard may sit directly on:
// special-use names (RFC 2606, 6761, 6762), .internal, and names ICANN will
// not delegate because they are used privately. None is a public suffix.
var wildcardOK = map[string]bool{
	"test": true, "example": true, "invalid": true, "local": true,
	"internal": true, "lan": true, "home": true, "corp": true,
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

// Parse validates and normalises one entry written by src. Errors are
// *Error values naming the entry and the reason.
func Parse(s string, src Source) (Entry, error) {
	bad := func(why string, a ...any) (Entry, error) {
		return Entry{}, &Error{Entry: s, Reason: fmt.Sprintf(why, a...)}
	}
	if src != Manifest && src != Operator {
		return bad("unknown source %d", src)
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
	if s == "*" {
		if src == Operator {
			return bad(`would allow every host; an operator lists the hosts ("*.example.com" for subdomains)`)
		}
		return Entry{any: true}, nil
	}
	e, err := parse(s, bad)
	if err != nil {
		return Entry{}, err
	}
	e.local = src == Operator && !e.wildcard
	return e, nil
}

func parse(s string, bad func(string, ...any) (Entry, error)) (Entry, error) {
	lower := strings.ToLower(s)
	// An IPv6 literal without a port ("::1") is taken whole; otherwise a final
	// ":port" is split off.
	if ip, err := netip.ParseAddr(lower); err == nil {
		return ipEntry(Entry{}, ip, bad)
	}
	if strings.Contains(s, "://") || hasScheme(s) {
		return bad(`has a scheme; write the host only, e.g. "example.com"`)
	}
	if strings.ContainsAny(s, "/?#\\") {
		return bad("has a path, query or fragment; write the host only")
	}
	if strings.Contains(s, "@") {
		return bad("has userinfo")
	}
	var e Entry
	host := lower
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
			p, ok := ParsePort(rest[1:])
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
		p, ok := ParsePort(host[i+1:])
		if !ok {
			return bad("invalid port %q", host[i+1:])
		}
		e.port = p
		host = host[:i]
		if strings.Contains(host, ":") {
			return bad(`an IPv6 address with a port must be bracketed, e.g. "[::1]:8080"`)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			return ipEntry(e, ip, bad)
		}
	}
	host = strings.TrimSuffix(host, ".")
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is4() {
		return ipEntry(e, ip, bad) // "10.0.0.1." as a URL reads it
	}
	if strings.HasPrefix(host, "*.") {
		e.wildcard = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return bad(`a wildcard is allowed only as a whole leading "*." label`)
	}
	if why := NameProblem(host); why != "" {
		return bad("%s", why)
	}
	if EndsInNumber(host) {
		if e.wildcard {
			return bad("a wildcard cannot cover an IP address")
		}
		if ip, err := ParseIPv4(host); err == nil {
			return bad("not a canonical IPv4 address; write %q", ip.String())
		}
		return bad("the last label is numeric, which is neither a host name nor an IPv4 address")
	}
	if e.wildcard {
		switch {
		case host == "localhost" || strings.HasSuffix(host, ".localhost"):
			return bad("every name under localhost is loopback, which a wildcard never reaches; list the exact hosts")
		case !strings.Contains(host, ".") && !wildcardOK[host]:
			return bad("a wildcard on a top-level domain allows the whole TLD; list hosts or a narrower wildcard")
		case publicSuffixes[host]:
			return bad("%q is a public suffix; a wildcard on it allows every site beneath it", host)
		}
	}
	e.name = host
	return e, nil
}

func ipEntry(e Entry, ip netip.Addr, bad func(string, ...any) (Entry, error)) (Entry, error) {
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

// ParsePort parses a port of an entry or a URL: 1 to 5 decimal digits, 1 to
// 65535 (leading zeros are read as browsers read them).
func ParsePort(s string) (uint16, bool) {
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

// NameProblem checks that a lowercase name (no trailing dot) is made of
// letters, digits, '-' and '_' in non-empty labels of at most 63 bytes, at
// most 253 bytes in all, and returns what is wrong, or "".
func NameProblem(name string) string {
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

// EndsInNumber is the URL Standard's "ends in a number" test: a host whose
// last label is numeric is an IPv4 address (or invalid), whatever else it
// contains. host has had one trailing dot removed already.
func EndsInNumber(host string) bool {
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

// ParseIPv4 is the URL Standard's IPv4 parser: one to four parts, each
// decimal, octal or hex, the last filling the remaining bytes, so that
// 2130706433, 0177.0.0.1, 0x7f.1 and 127.1 are all 127.0.0.1.
func ParseIPv4(host string) (netip.Addr, error) {
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

// Within reports whether every host and port a allows is also allowed by b.
// It compares what the entries allow, not Local.
func Within(a, b Entry) bool {
	switch {
	case !a.IsValid() || !b.IsValid():
		return false
	case b.any:
		return true
	case a.any:
		return false
	case b.port != 0 && a.port != b.port:
		return false
	case a.ip.IsValid() || b.ip.IsValid():
		return a.ip == b.ip
	case !b.wildcard:
		return !a.wildcard && a.name == b.name
	case !a.wildcard:
		return strings.HasSuffix(a.name, "."+b.name)
	}
	// Both wildcards: *.x.example.com within *.example.com.
	return a.name == b.name || strings.HasSuffix(a.name, "."+b.name)
}

// sameHosts reports whether a and b allow the same hosts (ports aside).
func sameHosts(a, b Entry) bool {
	return a.any == b.any && a.wildcard == b.wildcard && a.name == b.name && a.ip == b.ip
}

// Intersect returns the entries a skill is granted: what both the declared
// entries (a manifest's, parsed as Manifest) and the granted ones (the
// operator's, parsed as Operator) allow. For each pair, the result has the
// hosts both cover (the narrower host part, since two entries' host sets are
// either nested or disjoint) on the ports both allow. It is Local exactly when
// its hosts are those of a Local granted entry: the operator wrote that host
// exactly. A host the declared side narrows a granted wildcard to is not
// Local, whatever its spelling.
//
// The result is sorted, has no duplicates, and no entry within another unless
// it is Local and the other is not. Entries that do not parse are ignored
// (callers validate first).
func Intersect(declared, granted []string) []Entry {
	ds, gs := parseAll(declared, Manifest), parseAll(granted, Operator)
	var out []Entry
	for _, d := range ds {
		for _, g := range gs {
			if m, ok := meet(d, g); ok {
				m.local = g.local && sameHosts(m, g)
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, compare)
	out = slices.Compact(out)
	keep := out[:0:0]
	for i, p := range out {
		covered := false
		for j, q := range out {
			if i != j && Within(p, q) && (!p.local || q.local) {
				covered = true
				break
			}
		}
		if !covered {
			keep = append(keep, p)
		}
	}
	return keep
}

// compare orders entries by spelling, a Local entry first.
func compare(a, b Entry) int {
	if c := strings.Compare(a.String(), b.String()); c != 0 {
		return c
	}
	switch {
	case a.local == b.local:
		return 0
	case a.local:
		return -1
	}
	return 1
}

func parseAll(list []string, src Source) []Entry {
	var out []Entry
	for _, s := range list {
		if e, err := Parse(s, src); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// meet is the intersection of the hosts and ports of two entries, when they
// overlap, with Local unset.
func meet(a, b Entry) (Entry, bool) {
	port := a.port
	switch {
	case a.port == 0:
		port = b.port
	case b.port != 0 && a.port != b.port:
		return Entry{}, false
	}
	ha, hb := a, b
	ha.port, hb.port, ha.local, hb.local = 0, 0, false, false
	var m Entry
	switch {
	case Within(ha, hb):
		m = ha
	case Within(hb, ha):
		m = hb
	default:
		return Entry{}, false
	}
	if m.any {
		// Both "*": a skill's own list never reaches a fetcher unintersected,
		// and the operator cannot grant "*"; nothing to allow.
		return Entry{}, false
	}
	m.port = port
	return m, true
}
