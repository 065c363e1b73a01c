package http

import (
	"net/netip"
)

// Address classification: which IP addresses a fetch may not reach unless the
// operator listed the host explicitly. The tables follow the IANA special-purpose
// address registries (RFC 6890 and its updates); anything not globally reachable
// is refused, and IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4,
// Teredo) are judged by the address they embed.

type rangeReason struct {
	prefix netip.Prefix
	reason string
}

func mustPrefixes(rs []struct{ p, why string }) []rangeReason {
	out := make([]rangeReason, len(rs))
	for i, r := range rs {
		out[i] = rangeReason{netip.MustParsePrefix(r.p), r.why}
	}
	return out
}

// specialV4 is checked in order; the first match names the reason.
var specialV4 = mustPrefixes([]struct{ p, why string }{
	{"0.0.0.0/32", "unspecified"},
	{"0.0.0.0/8", `in 0.0.0.0/8 ("this network")`},
	{"10.0.0.0/8", "private"},
	{"100.64.0.0/10", "in 100.64.0.0/10 (shared CGNAT space)"},
	{"127.0.0.0/8", "loopback"},
	{"169.254.0.0/16", "link-local"},
	{"172.16.0.0/12", "private"},
	{"192.0.0.0/24", "in 192.0.0.0/24 (IETF protocol assignments)"},
	{"192.0.2.0/24", "in a documentation range"},
	{"192.88.99.0/24", "in 192.88.99.0/24 (6to4 relay anycast)"},
	{"192.168.0.0/16", "private"},
	{"198.18.0.0/15", "in 198.18.0.0/15 (benchmarking)"},
	{"198.51.100.0/24", "in a documentation range"},
	{"203.0.113.0/24", "in a documentation range"},
	{"224.0.0.0/4", "multicast"},
	{"255.255.255.255/32", "the broadcast address"},
	{"240.0.0.0/4", "in 240.0.0.0/4 (reserved)"},
})

// specialV6 is checked in order after the IPv4-embedding forms.
var specialV6 = mustPrefixes([]struct{ p, why string }{
	{"::/128", "unspecified"},
	{"::1/128", "loopback"},
	{"::/96", "an IPv4-compatible address (deprecated)"},
	{"64:ff9b:1::/48", "in 64:ff9b:1::/48 (local-use NAT64)"},
	{"100::/64", "in 100::/64 (discard-only)"},
	{"2001:2::/48", "in 2001:2::/48 (benchmarking)"},
	{"2001:10::/28", "in 2001:10::/28 (ORCHID)"},
	{"2001:20::/28", "in 2001:20::/28 (ORCHIDv2)"},
	{"2001:db8::/32", "in a documentation range"},
	{"3fff::/20", "in a documentation range"},
	{"5f00::/16", "in 5f00::/16 (SRv6 SIDs)"},
	{"fc00::/7", "unique-local (private)"},
	{"fe80::/10", "link-local"},
	{"fec0::/10", "site-local (deprecated)"},
	{"ff00::/8", "multicast"},
})

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	global6   = netip.MustParsePrefix("2000::/3")
)

// metadataAddrs are cloud instance-metadata endpoints. They stay refused even
// for explicitly listed hosts, unless the address itself is an allowlist entry.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OCI, DigitalOcean, ...
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("169.254.170.23"):  true, // AWS EKS pod identity
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"):    true, // AWS EKS pod identity over IPv6
}

// embeddedV4 returns the IPv4 addresses an IPv6 address carries in a form that
// a translator or tunnel would deliver to: IPv4-mapped (handled by Unmap before
// this), SIIT, NAT64, 6to4 and Teredo (server and de-obfuscated client).
func embeddedV4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() || ip.Is4In6() {
		return nil
	}
	b := ip.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	switch {
	case nat64.Contains(ip), siit.Contains(ip):
		return []netip.Addr{v4(12)}
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(2)}
	case teredo.Contains(ip):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{v4(4), client}
	}
	return nil
}

// canonicalAddr strips the zone and unmaps IPv4-mapped IPv6 addresses, the form
// every comparison in this package uses.
func canonicalAddr(ip netip.Addr) netip.Addr {
	return ip.WithZone("").Unmap()
}

// specialReason says why ip is not a globally reachable unicast address (for
// "address X is <reason>"), or "" if it is one.
func specialReason(ip netip.Addr) string {
	ip = canonicalAddr(ip)
	if !ip.IsValid() {
		return "not a valid address"
	}
	if ip.Is4() {
		for _, r := range specialV4 {
			if r.prefix.Contains(ip) {
				return r.reason
			}
		}
		return ""
	}
	for _, v4 := range embeddedV4(ip) {
		if why := specialReason(v4); why != "" {
			return "an IPv6 form of " + v4.String() + ", which is " + why
		}
	}
	for _, r := range specialV6 {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	if !global6.Contains(ip) && !nat64.Contains(ip) && !siit.Contains(ip) {
		return "outside 2000::/3 (not global unicast)"
	}
	return ""
}

// isMetadata reports whether ip is a cloud metadata endpoint, directly or in an
// IPv6 form that embeds one.
func isMetadata(ip netip.Addr) bool {
	ip = canonicalAddr(ip)
	if metadataAddrs[ip] {
		return true
	}
	for _, v4 := range embeddedV4(ip) {
		if metadataAddrs[v4] {
			return true
		}
	}
	return false
}
