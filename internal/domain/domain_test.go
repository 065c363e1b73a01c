package domain

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestNormalizeAccepts(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	// 63+1+63+1+63+1+61 = 253 bytes: the longest host name.
	name253 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61)
	tests := []struct {
		name, in, want string
		ip, wildcard   bool
		port           int
	}{
		{name: "plain", in: "example.com", want: "example.com"},
		{name: "upper case folded", in: "API.GitHub.COM", want: "api.github.com"},
		{name: "trailing dot dropped", in: "example.com.", want: "example.com"},
		{name: "surrounding spaces trimmed", in: "  example.com\t", want: "example.com"},
		{name: "single label", in: "localhost", want: "localhost"},
		{name: "localhost with port", in: "LOCALHOST:8080", want: "localhost:8080", port: 8080},
		{name: "port", in: "example.com:8443", want: "example.com:8443", port: 8443},
		{name: "port 1", in: "example.com:1", want: "example.com:1", port: 1},
		{name: "port 65535", in: "example.com:65535", want: "example.com:65535", port: 65535},
		{name: "trailing dot and port", in: "example.com.:443", want: "example.com:443", port: 443},
		{name: "wildcard", in: "*.example.com", want: "*.example.com", wildcard: true},
		{name: "wildcard upper", in: "*.EXAMPLE.com.", want: "*.example.com", wildcard: true},
		{name: "wildcard deep", in: "*.a.b.example.com", want: "*.a.b.example.com", wildcard: true},
		{name: "wildcard port", in: "*.example.com:443", want: "*.example.com:443", wildcard: true, port: 443},
		{name: "hyphens inside", in: "my-host.ex-ample.com", want: "my-host.ex-ample.com"},
		{name: "digits", in: "123.example.com", want: "123.example.com"},
		{name: "digits then letters last", in: "example.123a", want: "example.123a"},
		{name: "hex-looking first label", in: "0x7f.example", want: "0x7f.example"},
		{name: "punycode", in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{name: "punycode upper", in: "XN--BCHER-KVA.example", want: "xn--bcher-kva.example"},
		{name: "63-byte label", in: label63 + ".com", want: label63 + ".com"},
		{name: "253-byte name", in: name253, want: name253},
		{name: "253-byte name and trailing dot", in: name253 + ".", want: name253},
		{name: "ipv4", in: "192.168.1.1", want: "192.168.1.1", ip: true},
		{name: "ipv4 port", in: "127.0.0.1:8080", want: "127.0.0.1:8080", ip: true, port: 8080},
		{name: "ipv4 trailing dot", in: "10.0.0.1.", want: "10.0.0.1", ip: true},
		{name: "hex and short spelling is an IP", in: "0x7f.1", want: "0x7f.1", ip: true},
		{name: "hex upper is an IP", in: "0X7F.0.0.1", want: "0x7f.0.0.1", ip: true},
		{name: "single number is an IP", in: "2130706433", want: "2130706433", ip: true},
		{name: "octal spelling is an IP", in: "0177.0.0.1", want: "0177.0.0.1", ip: true},
		{name: "ipv6 bare", in: "::1", want: "::1", ip: true},
		{name: "ipv6 brackets", in: "[::1]", want: "::1", ip: true},
		{name: "ipv6 brackets port", in: "[::1]:8080", want: "[::1]:8080", ip: true, port: 8080},
		{name: "ipv6 canonical", in: "[0:0:0:0:0:0:0:1]", want: "::1", ip: true},
		{name: "ipv6 upper", in: "2001:DB8::A", want: "2001:db8::a", ip: true},
		{name: "ipv6 long form port", in: "[2001:0db8:0000::0001]:443", want: "[2001:db8::1]:443", ip: true, port: 443},
		{name: "ipv4-mapped ipv6", in: "::ffff:127.0.0.1", want: "::ffff:127.0.0.1", ip: true},
		{name: "star alone (manifests only)", in: " * ", want: "*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if err != nil {
				t.Fatalf("Normalize(%q) = error %v, want %q", tt.in, err, tt.want)
			}
			if got != tt.want {
				t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			p, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.IP != tt.ip || p.Wildcard != tt.wildcard || p.Port != tt.port {
				t.Errorf("Parse(%q) = %+v, want IP=%v Wildcard=%v Port=%d", tt.in, p, tt.ip, tt.wildcard, tt.port)
			}
			// The canonical spelling is a fixed point.
			again, err := Normalize(got)
			if err != nil || again != got {
				t.Errorf("Normalize(%q) = %q, %v; not a fixed point", got, again, err)
			}
		})
	}
}

func TestNormalizeRefuses(t *testing.T) {
	label64 := strings.Repeat("a", 64)
	label63 := strings.Repeat("a", 63)
	name254 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 62)
	tests := []struct {
		name, in string
		msg      string // a part of the error message
	}{
		{"empty", "", "empty"},
		{"only spaces", "   ", "empty"},
		{"star with port", "*:443", "two labels"},
		{"star dot", "*.", "two labels"},
		{"star dot tld", "*.com", "two labels"},
		{"star dot tld trailing dot", "*.com.", "two labels"},
		{"double star", "**.example.com", "not a valid host name label"},
		{"star inside label", "*example.com", "not a valid host name label"},
		{"star in middle", "api.*.example.com", "only be the first label"},
		{"star last", "example.*", "only be the first label"},
		{"two stars", "*.*.example.com", "only be the first label"},
		{"star suffix in label", "api*.example.com", "not a valid host name label"},
		{"wildcard over ip", "*.1.2.3", "IP address"},
		{"wildcard over hex ip", "*.0x7f.0.1", "IP address"},
		{"wildcard ipv6", "*.::1", "IPv6"},
		{"name ending in a number", "example.123", "last label is numeric"},
		{"name ending in hex", "example.0x1f", "last label is numeric"},
		{"wildcard ending in a number", "*.example.42", "last label is numeric"},
		{"http scheme", "http://example.com", "bare host name"},
		{"https scheme", "https://example.com", "bare host name"},
		{"scheme-relative", "//example.com", "bare host name"},
		{"path", "example.com/path", "bare host name"},
		{"trailing slash", "example.com/", "bare host name"},
		{"query", "example.com?x=1", "bare host name"},
		{"fragment", "example.com#x", "bare host name"},
		{"userinfo", "user@example.com", "bare host name"},
		{"userinfo password", "user:pw@example.com", "bare host name"},
		{"backslash", `example.com\evil`, "bare host name"},
		{"inner space", "exa mple.com", "bare host name"},
		{"inner tab", "exa\tmple.com", "bare host name"},
		{"percent escape", "ex%61mple.com", "bare host name"},
		{"ipv6 zone", "[fe80::1%25eth0]", "bare host name"},
		{"newline", "example.com\nevil.com", "not a valid host name label"},
		{"nul", "example.com\x00", "not a valid host name label"},
		{"underscore", "my_host.example.com", "not a valid host name label"},
		{"leading underscore label", "_dmarc.example.com", "not a valid host name label"},
		{"leading hyphen", "-example.com", "not a valid host name label"},
		{"trailing hyphen", "example-.com", "not a valid host name label"},
		{"leading dot", ".example.com", "not a valid host name label"},
		{"empty label", "example..com", "not a valid host name label"},
		{"two trailing dots", "example.com..", "not a valid host name label"},
		{"only a dot", ".", "not a valid host name label"},
		{"64-byte label", label64 + ".com", "not a valid host name label"},
		{"254-byte name", name254, "longer than 253"},
		{"non-ASCII", "bücher.example", "non-ASCII"},
		{"non-ASCII upper", "BÜCHER.example", "non-ASCII"},
		{"kelvin sign folds to k", "\u212aey.example", "non-ASCII"},
		{"fullwidth dot", "example\uff0ecom", "non-ASCII"},
		{"no-break space", "\u00a0example.com", "non-ASCII"},
		{"invalid utf-8", "ex\xffample.com", "non-ASCII"},
		{"empty port", "example.com:", "empty port"},
		{"port 0", "example.com:0", "bad port"},
		{"port too big", "example.com:65536", "bad port"},
		{"port leading zero", "example.com:080", "bad port"},
		{"port plus sign", "example.com:+80", "bad port"},
		{"port minus", "example.com:-1", "bad port"},
		{"port not a number", "example.com:http", "bad port"},
		{"port only", ":80", "not a valid host name label"},
		{"two ports", "example.com:80:81", "IPv6"},
		{"ipv6 unterminated", "[::1", "unterminated"},
		{"ipv6 junk after", "[::1]x", "junk"},
		{"ipv6 junk after dot", "[::1].", "junk"},
		{"ipv6 empty port", "[::1]:", "empty port"},
		{"ipv6 bad port", "[::1]:99999", "bad port"},
		{"ipv6 bad", "1:2:3", "IPv6"},
		{"ipv6 triple colon", ":::", "IPv6"},
		{"ipv6 hex junk", "[gggg::1]", "IPv6"},
		{"empty brackets", "[]", "IPv6"},
		{"brackets around a name", "[example.com]", "IPv6"},
		{"brackets around ipv4", "[127.0.0.1]", "IPv6"},
		{"brackets around ipv4 port", "[127.0.0.1]:80", "IPv6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if err == nil {
				t.Fatalf("Normalize(%q) = %q, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Normalize(%q) error %q does not mention %q", tt.in, err, tt.msg)
			}
			if _, err := Parse(tt.in); err == nil {
				t.Errorf("Parse(%q) accepted what Normalize refused", tt.in)
			}
		})
	}
}

func mustParse(t testing.TB, s string) Pattern {
	t.Helper()
	p, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return p
}

func TestWithin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "example.org", false},
		{"example.com", "*.example.com", false}, // the apex is not a subdomain
		{"api.example.com", "*.example.com", true},
		{"a.b.example.com", "*.example.com", true},
		{"badexample.com", "*.example.com", false}, // suffix, but not at a label boundary
		{"example.com.evil", "*.example.com", false},
		{"*.example.com", "example.com", false},
		{"*.example.com", "api.example.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.a.example.com", "*.example.com", true},
		{"*.example.com", "*.a.example.com", false},
		{"*.badexample.com", "*.example.com", false},
		{"example.com:443", "example.com", true},
		{"example.com", "example.com:443", false},
		{"example.com:443", "example.com:443", true},
		{"example.com:443", "example.com:8443", false},
		{"api.example.com:443", "*.example.com", true},
		{"api.example.com", "*.example.com:443", false},
		{"*.a.example.com:443", "*.example.com:443", true},
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1:80", "127.0.0.1", true},
		{"127.0.0.1", "127.0.0.2", false},
		{"[::1]", "::1", true},
		{"[0::1]:80", "[::1]:80", true},
		{"::1", "::2", false},
		{"0x7f.1", "127.0.0.1", false}, // spellings are not equated here; fetchers refuse them
		{"localhost", "localhost", true},
		{"localhost:80", "localhost", true},
		{"localhost", "localhost:80", false},
		{"example.com", "*", true},
		{"*.example.com:443", "*", true},
		{"::1", "*", true},
		{"*", "*", true},
		{"*", "*.example.com", false},
		{"*", "example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+" in "+tt.b, func(t *testing.T) {
			if got := Within(mustParse(t, tt.a), mustParse(t, tt.b)); got != tt.want {
				t.Errorf("Within(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestIntersect(t *testing.T) {
	tests := []struct {
		name              string
		declared, granted []string
		want              []string
	}{
		{"wildcard declared, exact granted", []string{"*.github.com"}, []string{"api.github.com", "example.com"}, []string{"api.github.com"}},
		{"apex not in wildcard", []string{"example.com"}, []string{"*.example.com"}, nil},
		{"apex not in wildcard, other way", []string{"*.example.com"}, []string{"example.com"}, nil},
		{"narrower wildcard granted", []string{"*.example.com"}, []string{"*.a.example.com"}, []string{"*.a.example.com"}},
		{"narrower wildcard declared", []string{"*.a.example.com"}, []string{"*.example.com"}, []string{"*.a.example.com"}},
		{"port granted", []string{"example.com"}, []string{"example.com:8443"}, []string{"example.com:8443"}},
		{"port declared", []string{"example.com:8443"}, []string{"example.com"}, []string{"example.com:8443"}},
		{"ports differ", []string{"example.com:443"}, []string{"example.com:8443"}, nil},
		{"same port", []string{"example.com:443"}, []string{"example.com:443"}, []string{"example.com:443"}},
		{"wildcard port and exact host", []string{"*.example.com:443"}, []string{"api.example.com"}, []string{"api.example.com:443"}},
		{"exact port and wildcard host", []string{"api.example.com"}, []string{"*.example.com:443"}, []string{"api.example.com:443"}},
		{"wildcards with a port each side", []string{"*.example.com:8080"}, []string{"*.a.example.com"}, []string{"*.a.example.com:8080"}},
		{"equal lists", []string{"a.com", "b.com"}, []string{"b.com", "a.com"}, []string{"a.com", "b.com"}},
		{"disjoint", []string{"a.com"}, []string{"b.com"}, nil},
		{"empty declared", nil, []string{"example.com"}, nil},
		{"empty granted", []string{"example.com"}, nil, nil},
		{"both empty", nil, nil, nil},
		{"empty slices", []string{}, []string{}, nil},
		{"duplicates collapse", []string{"example.com", "EXAMPLE.com", "example.com."}, []string{"example.com", "example.com"}, []string{"example.com"}},
		{"subsumed declared entry dropped", []string{"*.github.com", "api.github.com"}, []string{"*.github.com"}, []string{"*.github.com"}},
		{"subsumed granted entry dropped", []string{"*.github.com"}, []string{"api.github.com", "*.github.com", "*.api.github.com"}, []string{"*.github.com"}},
		{"port entry subsumed by any-port", []string{"example.com", "example.com:443"}, []string{"example.com"}, []string{"example.com"}},
		{"several hosts sorted", []string{"*.example.com"}, []string{"z.example.com", "a.example.com", "m.example.com:80"}, []string{"a.example.com", "m.example.com:80", "z.example.com"}},
		{"ip exact", []string{"127.0.0.1"}, []string{"127.0.0.1:8080"}, []string{"127.0.0.1:8080"}},
		{"ipv6 spellings meet", []string{"[0:0::1]"}, []string{"::1"}, []string{"::1"}},
		{"ip is not a host name", []string{"*.example.com"}, []string{"127.0.0.1"}, nil},
		{"unparsable entries ignored", []string{"https://example.com", "example.com"}, []string{"example.com", "*"}, []string{"example.com"}},
		{"star declared takes the grants", []string{"*"}, []string{"b.com:443", "*.a.com"}, []string{"*.a.com", "b.com:443"}},
		{"star with other entries", []string{"*", "x.a.com"}, []string{"*.a.com"}, []string{"*.a.com"}},
		{"case and trailing dot", []string{"*.GitHub.com."}, []string{"API.github.COM"}, []string{"api.github.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Intersect(tt.declared, tt.granted)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Intersect(%q, %q) = %q, want %q", tt.declared, tt.granted, got, tt.want)
			}
			// Intersection is symmetric.
			if rev := Intersect(tt.granted, tt.declared); !slices.Equal(rev, got) {
				t.Errorf("Intersect is not symmetric: %q vs %q", got, rev)
			}
		})
	}
}

// allows reports whether any pattern in list lets a client reach host:port.
func allows(list []Pattern, host string, port int) bool {
	probe := Pattern{Host: host, Port: port, IP: looksNumeric(host) || strings.Contains(host, ":")}
	for _, p := range list {
		if Within(probe, p) {
			return true
		}
	}
	return false
}

func parseAll(list []string) []Pattern {
	var out []Pattern
	for _, s := range list {
		if p, err := Parse(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// probes returns host names and ports on both sides of every pattern's edges.
func probes(ps []Pattern) (hosts []string, ports []int) {
	ports = []int{1, 65535}
	for _, p := range ps {
		hosts = append(hosts, p.Host, "x."+p.Host, "x.y."+p.Host)
		if i := strings.IndexByte(p.Host, '.'); i > 0 && !p.IP {
			hosts = append(hosts, p.Host[i+1:])
		}
		if p.Port != 0 {
			ports = append(ports, p.Port)
			if p.Port < 65535 {
				ports = append(ports, p.Port+1)
			}
		}
	}
	return hosts, ports
}

// checkIntersect asserts the properties of Intersect's result: each entry is
// canonical, lies within a declared and a granted pattern, no entry lies within
// another, and a host:port is allowed by the result exactly when both lists
// allow it.
func checkIntersect(t *testing.T, declared, granted []string) {
	t.Helper()
	out := Intersect(declared, granted)
	ds, gs := parseAll(declared), parseAll(granted)
	var res []Pattern
	for _, s := range out {
		p, err := Parse(s)
		if err != nil {
			t.Fatalf("Intersect(%q, %q) gave %q, which does not parse: %v", declared, granted, s, err)
		}
		if p.String() != s {
			t.Fatalf("Intersect(%q, %q) gave %q, not canonical (%q)", declared, granted, s, p.String())
		}
		inD := slices.ContainsFunc(ds, func(d Pattern) bool { return Within(p, d) })
		inG := slices.ContainsFunc(gs, func(g Pattern) bool { return Within(p, g) })
		if !inD || !inG {
			t.Fatalf("Intersect(%q, %q) gave %q, within declared %v, within granted %v", declared, granted, s, inD, inG)
		}
		res = append(res, p)
	}
	if !slices.IsSorted(out) {
		t.Fatalf("Intersect(%q, %q) = %q, not sorted", declared, granted, out)
	}
	for i, p := range res {
		for j, q := range res {
			if i != j && Within(p, q) {
				t.Fatalf("Intersect(%q, %q) = %q: %q lies within %q", declared, granted, out, p, q)
			}
		}
	}
	hosts, ports := probes(append(append(slices.Clone(ds), gs...), res...))
	for _, h := range hosts {
		for _, port := range ports {
			want := allows(ds, h, port) && allows(gs, h, port)
			if got := allows(res, h, port); got != want {
				t.Fatalf("Intersect(%q, %q) = %q allows %s:%d = %v, want %v", declared, granted, out, h, port, got, want)
			}
		}
	}
}

func TestIntersectProperties(t *testing.T) {
	universe := []string{
		"example.com", "*.example.com", "a.example.com", "*.a.example.com", "b.a.example.com",
		"example.com:443", "*.example.com:443", "a.example.com:8080", "*.a.example.com:8080",
		"other.org", "127.0.0.1", "127.0.0.1:80", "::1", "*",
	}
	for i, a := range universe {
		for j, b := range universe {
			for _, c := range universe[j:] {
				t.Run(strconv.Itoa(i)+"_"+b+"_"+c, func(t *testing.T) {
					checkIntersect(t, []string{a}, []string{b, c})
					checkIntersect(t, []string{a, c}, []string{b})
				})
			}
		}
	}
}

func FuzzIntersect(f *testing.F) {
	seeds := [][2]string{
		{"*.github.com", "api.github.com,example.com"},
		{"example.com", "*.example.com"},
		{"*.example.com", "*.a.example.com"},
		{"example.com", "example.com:8443"},
		{"*.example.com:443", "api.example.com,*.a.example.com"},
		{"127.0.0.1,[::1]:80", "::1,0x7f.1"},
		{"", ""},
		{"*.a.b.c,x.a.b.c:1", "*.b.c,a.b.c"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, declared, granted string) {
		ds, gs := strings.Split(declared, ","), strings.Split(granted, ",")
		// The probe check is cubic in the number of entries: keep lists short.
		if len(ds) > 8 || len(gs) > 8 {
			t.Skip()
		}
		for _, s := range append(slices.Clone(ds), gs...) {
			p, err := Parse(s)
			if err != nil {
				continue
			}
			// Parse round-trips through its canonical spelling.
			q, err := Parse(p.String())
			if err != nil || q != p {
				t.Fatalf("Parse(%q) = %+v; Parse(%q) = %+v, %v", s, p, p.String(), q, err)
			}
		}
		checkIntersect(t, ds, gs)
	})
}
