package allow

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	// 63+1+63+1+63+1+61 = 253 bytes: the longest host name.
	name253 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61)
	tests := []struct {
		name, in, want string
		ip, wildcard   bool
		port           uint16
	}{
		{name: "plain", in: "example.com", want: "example.com"},
		{name: "upper case folded", in: "API.GitHub.COM", want: "api.github.com"},
		{name: "trailing dot dropped", in: "example.com.", want: "example.com"},
		{name: "single label", in: "localhost", want: "localhost"},
		{name: "localhost with port", in: "LOCALHOST:8080", want: "localhost:8080", port: 8080},
		{name: "port", in: "example.com:8443", want: "example.com:8443", port: 8443},
		{name: "port 1", in: "example.com:1", want: "example.com:1", port: 1},
		{name: "port 65535", in: "example.com:65535", want: "example.com:65535", port: 65535},
		{name: "port with a leading zero, as URLs read it", in: "example.com:080", want: "example.com:80", port: 80},
		{name: "trailing dot and port", in: "example.com.:443", want: "example.com:443", port: 443},
		{name: "wildcard", in: "*.example.com", want: "*.example.com", wildcard: true},
		{name: "wildcard upper", in: "*.EXAMPLE.com.", want: "*.example.com", wildcard: true},
		{name: "wildcard deep", in: "*.a.b.example.com", want: "*.a.b.example.com", wildcard: true},
		{name: "wildcard port", in: "*.example.com:443", want: "*.example.com:443", wildcard: true, port: 443},
		{name: "wildcard on .test", in: "*.test", want: "*.test", wildcard: true},
		{name: "wildcard on .internal", in: "*.internal", want: "*.internal", wildcard: true},
		{name: "wildcard on .local", in: "*.local", want: "*.local", wildcard: true},
		{name: "wildcard on .example", in: "*.example", want: "*.example", wildcard: true},
		{name: "wildcard on home.arpa", in: "*.home.arpa", want: "*.home.arpa", wildcard: true},
		{name: "hyphens inside", in: "my-host.ex-ample.com", want: "my-host.ex-ample.com"},
		{name: "underscore (URLs allow it)", in: "my_host.example.com", want: "my_host.example.com"},
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
		{name: "ipv6 bare", in: "::1", want: "::1", ip: true},
		{name: "ipv6 brackets", in: "[::1]", want: "::1", ip: true},
		{name: "ipv6 brackets port", in: "[::1]:8080", want: "[::1]:8080", ip: true, port: 8080},
		{name: "ipv6 canonical", in: "[0:0:0:0:0:0:0:1]", want: "::1", ip: true},
		{name: "ipv6 upper", in: "2001:DB8::A", want: "2001:db8::a", ip: true},
		{name: "ipv6 long form port", in: "[2001:0db8:0000::0001]:443", want: "[2001:db8::1]:443", ip: true, port: 443},
		{name: "ipv4-mapped ipv6 is the ipv4 address", in: "::ffff:127.0.0.1", want: "127.0.0.1", ip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, src := range []Source{Manifest, Operator} {
				e, err := Parse(tt.in, src)
				if err != nil {
					t.Fatalf("Parse(%q, %s) = error %v, want %q", tt.in, src, err, tt.want)
				}
				if e.String() != tt.want {
					t.Errorf("Parse(%q, %s) = %q, want %q", tt.in, src, e, tt.want)
				}
				if e.IP().IsValid() != tt.ip || e.Wildcard() != tt.wildcard || e.Port() != tt.port || e.Any() {
					t.Errorf("Parse(%q) = %+v, want IP=%v Wildcard=%v Port=%d", tt.in, e, tt.ip, tt.wildcard, tt.port)
				}
				// Provenance: only an exact entry the operator wrote is Local.
				if want := src == Operator && !tt.wildcard; e.Local() != want {
					t.Errorf("Parse(%q, %s).Local() = %v, want %v", tt.in, src, e.Local(), want)
				}
				// The canonical spelling is a fixed point.
				again, err := Parse(e.String(), src)
				if err != nil || again != e {
					t.Errorf("Parse(%q) = %+v, %v; not a fixed point of %+v", e.String(), again, err, e)
				}
			}
		})
	}
}

func TestParseStar(t *testing.T) {
	e, err := Parse("*", Manifest)
	if err != nil || !e.Any() || e.Local() || e.String() != "*" {
		t.Fatalf(`Parse("*", Manifest) = %+v, %v`, e, err)
	}
	if _, err := Parse("*", Operator); err == nil || !strings.Contains(err.Error(), "every host") {
		t.Fatalf(`Parse("*", Operator) = %v, want a refusal`, err)
	}
	if _, err := Parse("example.com", 0); err == nil {
		t.Fatal("Parse with no source accepted")
	}
}

func TestParseRefuses(t *testing.T) {
	label64 := strings.Repeat("a", 64)
	label63 := strings.Repeat("a", 63)
	name254 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 62)
	tests := []struct {
		name, in string
		msg      string // a part of the error message
	}{
		{"empty", "", "empty"},
		{"only spaces", "   ", "whitespace"},
		{"surrounding spaces", " example.com", "whitespace"},
		{"star with port", "*:443", "leading"},
		{"star dot", "*.", "leading"},
		{"star dot tld", "*.com", "top-level"},
		{"star dot tld trailing dot", "*.com.", "top-level"},
		{"star dot unknown single label", "*.corpnet", "top-level"},
		{"public suffix", "*.co.uk", "public suffix"},
		{"shared hosting suffix", "*.GitHub.io", "public suffix"},
		{"wildcard on localhost", "*.localhost", "loopback"},
		{"wildcard under localhost", "*.app.localhost", "loopback"},
		{"double star", "**.example.com", "leading"},
		{"star inside label", "*example.com", "leading"},
		{"star in middle", "api.*.example.com", "leading"},
		{"star last", "example.*", "leading"},
		{"two stars", "*.*.example.com", "leading"},
		{"star suffix in label", "api*.example.com", "leading"},
		{"wildcard over ip", "*.1.2.3", "IP address"},
		{"wildcard over hex ip", "*.0x7f.0.1", "IP address"},
		{"wildcard ipv6", "*.::1", "bracketed"},
		{"name ending in a number", "example.123", "last label is numeric"},
		{"name ending in hex", "example.0x1f", "last label is numeric"},
		{"wildcard ending in a number", "*.example.42", "IP address"},
		{"http scheme", "http://example.com", "scheme"},
		{"https scheme", "https://example.com", "scheme"},
		{"scheme without slashes", "https:example.com", "scheme"},
		{"scheme-relative", "//example.com", "path"},
		{"path", "example.com/path", "path"},
		{"trailing slash", "example.com/", "path"},
		{"query", "example.com?x=1", "query"},
		{"fragment", "example.com#x", "fragment"},
		{"userinfo", "user@example.com", "userinfo"},
		{"userinfo password", "user:pw@example.com", "scheme"},
		{"backslash", `example.com\evil`, "path"},
		{"inner space", "exa mple.com", "whitespace"},
		{"inner tab", "exa\tmple.com", "whitespace"},
		{"percent escape", "ex%61mple.com", "invalid character"},
		{"ipv6 zone", "fe80::1%eth0", "zone"},
		{"ipv6 zone bracketed", "[fe80::1%25eth0]", "zone"},
		{"newline", "example.com\nevil.com", "control"},
		{"nul", "example.com\x00", "control"},
		{"del", "example.com\x7f", "control"},
		{"bang", "exa_mple!.com", "invalid character"},
		{"leading dot", ".example.com", "empty label"},
		{"empty label", "example..com", "empty label"},
		{"two trailing dots", "example.com..", "empty label"},
		{"only a dot", ".", "empty host"},
		{"64-byte label", label64 + ".com", "longer than 63"},
		{"254-byte name", name254, "longer than 253"},
		{"non-ASCII", "bücher.example", "non-ASCII"},
		{"non-ASCII upper", "BÜCHER.example", "non-ASCII"},
		{"kelvin sign folds to k", "\u212aey.example", "non-ASCII"},
		{"fullwidth dot", "example\uff0ecom", "non-ASCII"},
		{"no-break space", "\u00a0example.com", "non-ASCII"},
		{"invalid utf-8", "ex\xffample.com", "non-ASCII"},
		{"empty port", "example.com:", "invalid port"},
		{"port 0", "example.com:0", "invalid port"},
		{"port too big", "example.com:65536", "invalid port"},
		{"port plus sign", "example.com:+80", "invalid port"},
		{"port minus", "example.com:-1", "invalid port"},
		{"port not a number", "example.com:http", "invalid port"},
		{"port only", ":80", "empty host"},
		{"two ports", "example.com:80:81", "bracketed"},
		{"ipv6 unterminated", "[::1", "unclosed"},
		{"ipv6 junk after", "[::1]x", "junk"},
		{"ipv6 junk after dot", "[::1].", "junk"},
		{"ipv6 empty port", "[::1]:", "invalid port"},
		{"ipv6 bad port", "[::1]:99999", "invalid port"},
		{"ipv6 bad", "1:2:3", "scheme"},
		{"ipv6 triple colon", ":::", "invalid port"},
		{"ipv6 hex junk", "[gggg::1]", "IPv6"},
		{"empty brackets", "[]", "IPv6"},
		{"brackets around a name", "[example.com]", "IPv6"},
		{"brackets around ipv4", "[127.0.0.1]", "IPv6"},
		{"brackets around ipv4 port", "[127.0.0.1]:80", "IPv6"},
		{"unspecified v4", "0.0.0.0", "unspecified"},
		{"unspecified v6", "::", "unspecified"},
		{"octal ipv4", "0177.0.0.1", `write "127.0.0.1"`},
		{"decimal ipv4", "2130706433", `write "127.0.0.1"`},
		{"short ipv4", "127.1", `write "127.0.0.1"`},
		{"hex ipv4", "0x7f.0.0.1", `write "127.0.0.1"`},
		{"hex short ipv4", "0x7f.1", `write "127.0.0.1"`},
		{"malformed ipv4", "1.2.3.4.5", "numeric"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, src := range []Source{Manifest, Operator} {
				e, err := Parse(tt.in, src)
				if err == nil {
					t.Fatalf("Parse(%q, %s) = %q, want an error", tt.in, src, e)
				}
				if !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("Parse(%q, %s) error %q does not mention %q", tt.in, src, err, tt.msg)
				}
				var pe *Error
				if !errors.As(err, &pe) || pe.Entry != tt.in {
					t.Errorf("Parse(%q) error %#v is not an *Error naming the entry", tt.in, err)
				}
				if !strings.HasPrefix(err.Error(), strconv.Quote(tt.in)) {
					t.Errorf("error %q does not start with the quoted entry", err)
				}
			}
		})
	}
}

func TestErrorIsEscapedAndCapped(t *testing.T) {
	in := "\x1b[31m" + strings.Repeat("a", 10000)
	_, err := Parse(in, Manifest)
	if err == nil {
		t.Fatal("accepted")
	}
	if strings.ContainsRune(err.Error(), 0x1b) || len(err.Error()) > 400 {
		t.Errorf("error %q: raw escape or %d bytes", err, len(err.Error()))
	}
}

func TestParseIPv4(t *testing.T) {
	tests := []struct {
		in, want string // want "" = invalid
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7F000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"0x", "0.0.0.0"},
		{"00", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"256.0.0.1", ""},
		{"1.256.1", ""},
		{"1.65536", "1.1.0.0"},
		{"1.16777216", ""},
		{"1.2.65536", ""},
		{"1.2.3.4.5", ""},
		{"08.0.0.1", ""},
		{"0x1g.0.0.1", ""},
		{"1..1", ""},
		{"99999999999999999999999", ""},
	}
	for _, tc := range tests {
		got, err := ParseIPv4(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ParseIPv4(%q) = %s, want an error", tc.in, got)
		case tc.want != "" && (err != nil || got.String() != tc.want):
			t.Errorf("ParseIPv4(%q) = %s, %v, want %s", tc.in, got, err, tc.want)
		}
	}
}

func mustParse(t testing.TB, s string, src Source) Entry {
	t.Helper()
	e, err := Parse(s, src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return e
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
		{"::ffff:127.0.0.1", "127.0.0.1", true},
		{"localhost", "localhost", true},
		{"localhost:80", "localhost", true},
		{"localhost", "localhost:80", false},
		{"a.test", "*.test", true},
		{"example.com", "*", true},
		{"*.example.com:443", "*", true},
		{"::1", "*", true},
		{"*", "*", true},
		{"*", "*.example.com", false},
		{"*", "example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+" in "+tt.b, func(t *testing.T) {
			for _, src := range []Source{Manifest, Operator} {
				a, b := mustParse(t, tt.a, Manifest), mustParse(t, tt.b, Manifest)
				if tt.a != "*" {
					a = mustParse(t, tt.a, src)
				}
				if got := Within(a, b); got != tt.want {
					t.Errorf("Within(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
				}
			}
		})
	}
	if Within(Entry{}, mustParse(t, "*", Manifest)) || Within(mustParse(t, "a.test", Manifest), Entry{}) {
		t.Error("the zero Entry is within or contains something")
	}
}

func TestAllows(t *testing.T) {
	ip := netip.MustParseAddr
	tests := []struct {
		entry string
		host  string
		addr  netip.Addr
		port  uint16
		want  bool
	}{
		{"example.com", "example.com", netip.Addr{}, 80, true},
		{"example.com", "a.example.com", netip.Addr{}, 80, false},
		{"*.example.com", "a.example.com", netip.Addr{}, 80, true},
		{"*.example.com", "a.b.example.com", netip.Addr{}, 443, true},
		{"*.example.com", "example.com", netip.Addr{}, 80, false},
		{"*.example.com", "aexample.com", netip.Addr{}, 80, false},
		{"*.example.com", ".example.com", netip.Addr{}, 80, false}, // not a name beneath it
		{"example.com:8443", "example.com", netip.Addr{}, 443, false},
		{"example.com:8443", "example.com", netip.Addr{}, 8443, true},
		{"127.0.0.1", "127.0.0.1", ip("127.0.0.1"), 80, true},
		{"127.0.0.1", "127.0.0.2", ip("127.0.0.2"), 80, false},
		{"127.0.0.1", "127.0.0.1", netip.Addr{}, 80, false}, // a name spelled like an address is not one
		{"example.com", "example.com", ip("93.184.216.34"), 80, false},
		{"::1", "::1", ip("::1"), 80, true},
		{"*", "anything.example", netip.Addr{}, 1, true},
	}
	for _, tc := range tests {
		e := mustParse(t, tc.entry, Manifest)
		if got := e.Allows(tc.host, tc.addr, tc.port); got != tc.want {
			t.Errorf("%q.Allows(%q, %v, %d) = %v, want %v", tc.entry, tc.host, tc.addr, tc.port, got, tc.want)
		}
	}
	if (Entry{}).Allows("example.com", netip.Addr{}, 80) {
		t.Error("the zero Entry allows something")
	}
}

// spec renders entries for the tables: "host" for a public-only entry,
// "host!" for a Local one.
func spec(list []Entry) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.String()
		if e.Local() {
			out[i] += "!"
		}
	}
	return out
}

func TestIntersect(t *testing.T) {
	tests := []struct {
		name              string
		declared, granted []string
		want              []string // "!" = Local
	}{
		{"wildcard declared, exact granted", []string{"*.github.com"}, []string{"api.github.com", "example.com"}, []string{"api.github.com!"}},
		{"apex not in wildcard", []string{"example.com"}, []string{"*.example.com"}, nil},
		{"apex not in wildcard, other way", []string{"*.example.com"}, []string{"example.com"}, nil},
		{"narrower wildcard granted", []string{"*.example.com"}, []string{"*.a.example.com"}, []string{"*.a.example.com"}},
		{"narrower wildcard declared", []string{"*.a.example.com"}, []string{"*.example.com"}, []string{"*.a.example.com"}},
		{"port granted", []string{"example.com"}, []string{"example.com:8443"}, []string{"example.com:8443!"}},
		{"port declared", []string{"example.com:8443"}, []string{"example.com"}, []string{"example.com:8443!"}},
		{"ports differ", []string{"example.com:443"}, []string{"example.com:8443"}, nil},
		{"same port", []string{"example.com:443"}, []string{"example.com:443"}, []string{"example.com:443!"}},
		{"wildcard port and exact host", []string{"*.example.com:443"}, []string{"api.example.com"}, []string{"api.example.com:443!"}},
		{"exact port and wildcard host", []string{"api.example.com"}, []string{"*.example.com:443"}, []string{"api.example.com:443"}},
		{"wildcards with a port each side", []string{"*.example.com:8080"}, []string{"*.a.example.com"}, []string{"*.a.example.com:8080"}},
		{"equal lists", []string{"a.com", "b.com"}, []string{"b.com", "a.com"}, []string{"a.com!", "b.com!"}},
		{"disjoint", []string{"a.com"}, []string{"b.com"}, nil},
		{"empty declared", nil, []string{"example.com"}, nil},
		{"empty granted", []string{"example.com"}, nil, nil},
		{"both empty", nil, nil, nil},
		{"duplicates collapse", []string{"example.com", "EXAMPLE.com", "example.com."}, []string{"example.com", "example.com"}, []string{"example.com!"}},
		{"subsumed declared entry dropped", []string{"*.github.com", "api.github.com"}, []string{"*.github.com"}, []string{"*.github.com"}},
		{"granted exact kept beside a granted wildcard", []string{"*.github.com"}, []string{"api.github.com", "*.github.com", "*.api.github.com"}, []string{"*.github.com", "api.github.com!"}},
		{"port entry subsumed by any-port", []string{"example.com", "example.com:443"}, []string{"example.com"}, []string{"example.com!"}},
		{"several hosts sorted", []string{"*.example.com"}, []string{"z.example.com", "a.example.com", "m.example.com:80"}, []string{"a.example.com!", "m.example.com:80!", "z.example.com!"}},
		{"ip exact", []string{"127.0.0.1"}, []string{"127.0.0.1:8080"}, []string{"127.0.0.1:8080!"}},
		{"ipv6 spellings meet", []string{"[0:0::1]"}, []string{"::1"}, []string{"::1!"}},
		{"ip is not a host name", []string{"*.example.com"}, []string{"127.0.0.1"}, nil},
		{"unparsable entries ignored", []string{"https://example.com", "example.com"}, []string{"example.com", "*"}, []string{"example.com!"}},
		{"star declared takes the grants", []string{"*"}, []string{"b.com:443", "*.a.com"}, []string{"*.a.com", "b.com:443!"}},
		{"star with other entries", []string{"*", "x.a.com"}, []string{"*.a.com"}, []string{"*.a.com"}},
		{"case and trailing dot", []string{"*.GitHub.com."}, []string{"API.github.COM"}, []string{"api.github.com!"}},
		{"star granted is refused", []string{"example.com"}, []string{"*"}, nil},

		// Provenance: the issue-8 class.
		{"exact declared under an operator wildcard: public only", []string{"api.x.test"}, []string{"*.x.test"}, []string{"api.x.test"}},
		{"localhost declared under *.test: nothing", []string{"localhost"}, []string{"*.test"}, nil},
		{"exact declared under a special-use wildcard", []string{"db.internal"}, []string{"*.internal"}, []string{"db.internal"}},
		{"exact declared with port under a wildcard", []string{"api.x.test:8080"}, []string{"*.x.test"}, []string{"api.x.test:8080"}},
		{"exact and wildcard granted, exact declared: exact meaning kept", []string{"a.x.test"}, []string{"a.x.test", "*.x.test"}, []string{"a.x.test!"}},
		{"exact and wildcard granted, wildcard declared", []string{"*.x.test"}, []string{"a.x.test", "*.x.test"}, []string{"*.x.test", "a.x.test!"}},
		{"exact and wildcard granted, star declared", []string{"*"}, []string{"*.x.test", "a.x.test"}, []string{"*.x.test", "a.x.test!"}},
		{"exact with port and wildcard granted", []string{"*"}, []string{"a.x.test:8080", "*.x.test"}, []string{"*.x.test", "a.x.test:8080!"}},
		{"declared exact and other declared wildcard", []string{"a.x.test", "*.x.test"}, []string{"*.x.test"}, []string{"*.x.test"}},
		{"operator exact reached through a declared wildcard", []string{"*.x.test"}, []string{"a.x.test"}, []string{"a.x.test!"}},
		{"declared narrower port keeps the operator's exact host", []string{"a.x.test:443"}, []string{"a.x.test"}, []string{"a.x.test:443!"}},
		{"ip declared and granted", []string{"10.0.0.5"}, []string{"10.0.0.5"}, []string{"10.0.0.5!"}},
		{"ip declared, only a wildcard granted", []string{"10.0.0.5"}, []string{"*.x.test"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spec(Intersect(tt.declared, tt.granted))
			if len(got) == 0 {
				got = nil
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Intersect(%q, %q) = %q, want %q", tt.declared, tt.granted, got, tt.want)
			}
		})
	}
}

// probe is one host (name or IP) and port a client might ask for.
type probe struct {
	host string
	ip   netip.Addr
	port uint16
}

// probes returns hosts and ports on both sides of every entry's edges.
func probes(es []Entry) []probe {
	ports := []uint16{1, 80, 65535}
	var hosts []string
	for _, e := range es {
		if e.Any() {
			continue
		}
		h := e.Host()
		hosts = append(hosts, h, "x."+h, "x.y."+h)
		if i := strings.IndexByte(h, '.'); i > 0 && !e.IP().IsValid() {
			hosts = append(hosts, h[i+1:])
		}
		if e.Port() != 0 {
			ports = append(ports, e.Port())
			if e.Port() < 65535 {
				ports = append(ports, e.Port()+1)
			}
		}
	}
	var out []probe
	for _, h := range hosts {
		ip, _ := netip.ParseAddr(h)
		for _, p := range ports {
			out = append(out, probe{h, ip, p})
		}
	}
	return out
}

// reach is what a list lets a client do for one probe: allowed at all, and
// allowed at non-public addresses.
func reach(list []Entry, p probe) (allowed, local bool) {
	for _, e := range list {
		if e.Allows(p.host, p.ip, p.port) {
			allowed = true
			local = local || e.Local()
		}
	}
	return allowed, local
}

// checkIntersect asserts the properties of Intersect's result: each entry
// lies within a declared and a granted entry and spells itself canonically;
// the result is sorted, with no redundant entry; a probe is allowed by the
// result exactly when both lists allow it; and it is local exactly when the
// declared list allows it and the operator wrote an exact entry allowing it.
func checkIntersect(t *testing.T, declared, granted []string) {
	t.Helper()
	out := Intersect(declared, granted)
	ds, gs := parseAll(declared, Manifest), parseAll(granted, Operator)
	for _, e := range out {
		if !e.IsValid() || e.Any() {
			t.Fatalf("Intersect(%q, %q) gave %+v", declared, granted, e)
		}
		if again := mustParse(t, e.String(), Manifest); again.String() != e.String() {
			t.Fatalf("Intersect(%q, %q) gave %q, not canonical", declared, granted, e)
		}
		inD := slices.ContainsFunc(ds, func(d Entry) bool { return Within(e, d) })
		inG := slices.ContainsFunc(gs, func(g Entry) bool { return Within(e, g) && (!e.Local() || g.Local()) })
		if !inD || !inG {
			t.Fatalf("Intersect(%q, %q) gave %q, within declared %v, within granted %v", declared, granted, e, inD, inG)
		}
		if e.Local() && e.Wildcard() {
			t.Fatalf("Intersect(%q, %q) gave a Local wildcard %q", declared, granted, e)
		}
	}
	if !slices.IsSortedFunc(out, compare) {
		t.Fatalf("Intersect(%q, %q) = %q, not sorted", declared, granted, spec(out))
	}
	for i, p := range out {
		for j, q := range out {
			if i != j && Within(p, q) && (!p.Local() || q.Local()) {
				t.Fatalf("Intersect(%q, %q) = %q: %q is redundant beside %q", declared, granted, spec(out), p, q)
			}
		}
	}
	for _, p := range probes(slices.Concat(ds, gs, out)) {
		dAllowed, _ := reach(ds, p)
		gAllowed, gLocal := reach(gs, p)
		allowed, local := reach(out, p)
		if allowed != (dAllowed && gAllowed) {
			t.Fatalf("Intersect(%q, %q) = %q allows %+v = %v, want %v", declared, granted, spec(out), p, allowed, dAllowed && gAllowed)
		}
		if local != (dAllowed && gLocal) {
			t.Fatalf("Intersect(%q, %q) = %q: %+v local = %v, want %v", declared, granted, spec(out), p, local, dAllowed && gLocal)
		}
	}
}

func TestIntersectProperties(t *testing.T) {
	universe := []string{
		"example.com", "*.example.com", "a.example.com", "*.a.example.com", "b.a.example.com",
		"example.com:443", "*.example.com:443", "a.example.com:8080", "*.a.example.com:8080",
		"other.org", "127.0.0.1", "127.0.0.1:80", "::1", "*.test", "localhost", "*",
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

// FuzzParseEntry: whatever the input, Parse either refuses it with an *Error
// naming it, or returns a valid entry whose canonical spelling parses back to
// the same entry; only an exact operator entry is Local; and the result is
// consistent with Within and Allows.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{
		"example.com", "*.example.com", "API.Example.COM.:8443", "127.0.0.1", "[::1]:80", "::ffff:10.0.0.1",
		"*.test", "*.localhost", "*.co.uk", "*", "0x7f.1", "http://x", "a..b", "[fe80::1%25eth0]",
		"xn--bcher-kva.example", "*.a.b.c:65535", "10.0.0.1.", "user@host", "*.1.2.3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, src := range []Source{Manifest, Operator} {
			e, err := Parse(s, src)
			if err != nil {
				var pe *Error
				if !errors.As(err, &pe) || pe.Entry != s || pe.Reason == "" {
					t.Fatalf("Parse(%q) = %#v, want an *Error naming the entry", s, err)
				}
				continue
			}
			if !e.IsValid() {
				t.Fatalf("Parse(%q) = invalid entry %+v", s, e)
			}
			again, err := Parse(e.String(), src)
			if err != nil || again != e {
				t.Fatalf("Parse(%q) = %+v; Parse(%q) = %+v, %v", s, e, e.String(), again, err)
			}
			if e.Local() != (src == Operator && !e.Wildcard() && !e.Any()) {
				t.Fatalf("Parse(%q, %s) = %+v: Local %v", s, src, e, e.Local())
			}
			if e.Any() && src == Operator {
				t.Fatalf(`Parse(%q, Operator) accepted "*"`, s)
			}
			if !Within(e, e) {
				t.Fatalf("%q is not within itself", e)
			}
			if e.Wildcard() {
				if strings.Count(e.Host(), ".") == 0 && !wildcardOK[e.Host()] || publicSuffixes[e.Host()] {
					t.Fatalf("Parse(%q) accepted a wildcard on %q", s, e.Host())
				}
				if e.Allows(e.Host(), netip.Addr{}, e.Port()) {
					t.Fatalf("%q allows its own apex", e)
				}
				if !e.Allows("x."+e.Host(), netip.Addr{}, max(e.Port(), 1)) {
					t.Fatalf("%q does not allow x.%s", e, e.Host())
				}
			} else if !e.Any() && !e.Allows(e.Host(), e.IP(), max(e.Port(), 1)) {
				t.Fatalf("%q does not allow its own host", e)
			}
			if e.IP().IsValid() && (e.IP().Zone() != "" || e.IP().Is4In6() || e.IP().IsUnspecified()) {
				t.Fatalf("Parse(%q) = non-canonical address %v", s, e.IP())
			}
		}
	})
}

func FuzzIntersect(f *testing.F) {
	seeds := [][2]string{
		{"*.github.com", "api.github.com,example.com"},
		{"example.com", "*.example.com"},
		{"api.x.test", "*.x.test"},
		{"a.x.test", "a.x.test,*.x.test"},
		{"*.example.com", "*.a.example.com"},
		{"example.com", "example.com:8443"},
		{"*.example.com:443", "api.example.com,*.a.example.com"},
		{"127.0.0.1,[::1]:80", "::1,127.0.0.1:80"},
		{"", ""},
		{"*,*.a.b.c,x.a.b.c:1", "*.b.c,a.b.c"},
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
		checkIntersect(t, ds, gs)
	})
}
