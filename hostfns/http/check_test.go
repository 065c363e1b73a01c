package http

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/testkit/hostile"
)

// hostilePolicy is the allowlist of the hostile-URL table and the fuzz target
// (hostile.URLPolicy, shared with the end-to-end tests of cmd/buddy).
var hostilePolicy = Policy{Domains: operator(hostile.URLPolicy...)}

// hostileURLs must all be refused by hostilePolicy, with the kind given: the
// rows of hostile.URLRows, which need no resolver.
var hostileURLs = func() []struct {
	url  string
	kind error
} {
	out := make([]struct {
		url  string
		kind error
	}, len(hostile.URLRows))
	for i, r := range hostile.URLRows {
		out[i].url, out[i].kind = r.URL, errs.Sentinel(r.Fetch)
	}
	return out
}()

// TestSharedTableAssumptions: the shared table's caps are this package's.
func TestSharedTableAssumptions(t *testing.T) {
	if hostile.MaxURLBytes != MaxURLBytes {
		t.Errorf("hostile.MaxURLBytes = %d, MaxURLBytes = %d", hostile.MaxURLBytes, MaxURLBytes)
	}
	for _, tc := range hostileURLs {
		if tc.kind == nil {
			t.Errorf("row %q: no sentinel for its kind", tc.url)
		}
	}
}

func TestCheckRefusesHostileURLs(t *testing.T) {
	f := newFetcher(t, hostilePolicy)
	if len(hostileURLs) < 40 {
		t.Fatalf("only %d hostile URLs", len(hostileURLs))
	}
	for _, tc := range hostileURLs {
		t.Run(tc.url, func(t *testing.T) {
			u, err := f.Check(tc.url)
			if err == nil {
				t.Fatalf("Check(%q) = %s, want refusal", tc.url, u)
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("Check(%q) = %v, want kind %v", tc.url, err, tc.kind)
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason == "" {
				t.Fatalf("Check(%q) = %#v, want an *Error with a reason", tc.url, err)
			}
			if len(err.Error()) > 2*maxDisplay+200 {
				t.Errorf("error message is %d bytes long", len(err.Error()))
			}
			// Get must refuse it the same way, before any I/O.
			if _, gerr := f.Get(t.Context(), tc.url); !errors.Is(gerr, tc.kind) {
				t.Errorf("Get(%q) = %v, want kind %v", tc.url, gerr, tc.kind)
			}
		})
	}
}

func TestCheckErrorMessages(t *testing.T) {
	f := newFetcher(t, Policy{Domains: operator("example.com", "api.example.net:8443")})
	tests := []struct {
		url, want string
	}{
		{"http://10.0.0.1/", "forbidden: http://10.0.0.1/: address 10.0.0.1 is private"},
		{"http://0x7f.1/x", "forbidden: http://0x7f.1/x: address 127.0.0.1 is loopback"},
		{"http://169.254.169.254/", "forbidden: http://169.254.169.254/: address 169.254.169.254 is a cloud metadata endpoint"},
		{"http://1.1.1.1/", "forbidden: http://1.1.1.1/: IP literal 1.1.1.1 is not in the allowlist"},
		{"http://evil.test/", "forbidden: http://evil.test/: host evil.test is not in the allowlist"},
		{"https://api.example.net/", "forbidden: https://api.example.net/: port 443 of host api.example.net is not in the allowlist"},
		{"http://u:secret@example.com/", "forbidden: http://u:xxxxx@example.com/: userinfo (user:password@) is not allowed"},
		{"gopher://example.com/", `forbidden: gopher://example.com/: scheme "gopher" is not allowed; only http and https`},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			_, err := f.Check(tc.url)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Check(%q) error = %v\nwant %s", tc.url, err, tc.want)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	f := newFetcher(t, hostilePolicy)
	tests := []struct {
		in, want string
	}{
		{"http://example.com/", "http://example.com/"},
		{"HTTP://Example.COM./a/b?q=1#frag", "http://example.com/a/b?q=1"},
		{"https://example.com:443/", "https://example.com:443/"},
		{"http://example.com:080/", "http://example.com:80/"},
		{"http://example.com:/", "http://example.com/"},
		{"http://a.example.org/", "http://a.example.org/"},
		{"http://a.b.c.example.org/x", "http://a.b.c.example.org/x"},
		{"https://api.example.net:8443/v1", "https://api.example.net:8443/v1"},
		{"http://api.example.net:8443/v1", "http://api.example.net:8443/v1"},
		{"http://93.184.216.34/", "http://93.184.216.34/"},
		{"http://0x5d.0xb8.0xd8.0x22/", "http://93.184.216.34/"},
		{"http://1572395042/", "http://93.184.216.34/"},
		{"http://[::ffff:5db8:d822]:8080/", "http://93.184.216.34:8080/"},
		{"http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/", "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/"},
		{"http://[2606:2800:021f:cb07:6820:80da:af6b:8b2c]/", "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			u, err := f.Check(tc.in)
			if err != nil {
				t.Fatalf("Check(%q): %v", tc.in, err)
			}
			if u.String() != tc.want {
				t.Fatalf("Check(%q) = %s, want %s", tc.in, u, tc.want)
			}
		})
	}
}

// operator parses entries as the operator wrote them in buddy.toml: exact
// ones are Local.
func operator(domains ...string) []allow.Entry {
	out := make([]allow.Entry, len(domains))
	for i, d := range domains {
		e, err := allow.Parse(d, allow.Operator)
		if err != nil {
			panic(err)
		}
		out[i] = e
	}
	return out
}

func TestNewRefusesUnparsedEntries(t *testing.T) {
	star, err := allow.Parse("*", allow.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]allow.Entry{"zero Entry": {}, `"*"`: star} {
		t.Run(name, func(t *testing.T) {
			_, err := New(Policy{Domains: append(operator("ok.example"), e)})
			if !errors.Is(err, errs.ErrConfig) {
				t.Fatalf("New(%s) = %v, want a config error", name, err)
			}
		})
	}
}

func TestNewReportsEveryBadEntryAndLimit(t *testing.T) {
	_, err := New(Policy{Domains: append(operator("ok.example"), allow.Entry{}), MaxBodyBytes: -1, Timeout: -1, MaxRedirects: -2})
	if !errors.Is(err, errs.ErrConfig) {
		t.Fatalf("New = %v, want a config error", err)
	}
	for _, want := range []string{"entry 1", "body cap", "timeout", "redirect limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok.example") {
		t.Errorf("error %q names a good entry", err)
	}
}

func TestSpecialReason(t *testing.T) {
	special := []string{
		"0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.255", "127.0.0.1", "127.255.0.1",
		"169.254.169.254", "169.254.0.1", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1",
		"192.88.99.1", "192.168.0.1", "198.18.0.1", "198.19.255.255", "198.51.100.1", "203.0.113.1",
		"224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
		"::", "::1", "::127.0.0.1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:0:a00:1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "100::1", "2001:2::1", "2001:db8::1",
		"2001:20::1", "3fff::1", "fc00::1", "fd00:ec2::254", "fe80::1", "fe80::1%eth0", "fec0::1",
		"ff02::1", "2002:7f00:1::", "2002:a00:1::", "2001:0:4136:e378:8000:63bf:f5ff:fffe",
		"2001:0:7f00:1::1", "1::1", "4000::1",
	}
	for _, s := range special {
		if specialReason(netip.MustParseAddr(s)) == "" {
			t.Errorf("specialReason(%s) = \"\", want a reason", s)
		}
	}
	public := []string{
		"1.1.1.1", "8.8.8.8", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.32.0.1",
		"198.20.0.1", "223.255.255.255", "::ffff:8.8.8.8", "2606:4700:4700::1111",
		"2a00:1450:4001:830::200e", "64:ff9b::808:808", "2002:808:808::1",
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7",
	}
	for _, s := range public {
		if why := specialReason(netip.MustParseAddr(s)); why != "" {
			t.Errorf("specialReason(%s) = %q, want \"\"", s, why)
		}
	}
	for _, s := range []string{"169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1"} {
		if !isMetadata(netip.MustParseAddr(s)) {
			t.Errorf("isMetadata(%s) = false", s)
		}
	}
	if isMetadata(netip.MustParseAddr("169.254.169.253")) {
		t.Errorf("isMetadata(169.254.169.253) = true")
	}
}

// FuzzCheckURL: whatever the input, an accepted URL is http(s), has no userinfo,
// a lowercase ASCII host that an allowlist entry matches, is not an unlisted IP
// literal, and checks again to itself.
func FuzzCheckURL(f *testing.F) {
	for _, tc := range hostileURLs {
		f.Add(tc.url)
	}
	for _, s := range []string{"http://example.com/", "https://a.example.org/x?y#z", "http://0x5d.0xb8.0xd8.0x22/",
		"http://[::ffff:5db8:d822]:8443/", "https://api.example.net:8443/", "http://93.184.216.34:1/"} {
		f.Add(s)
	}
	fe, err := New(hostilePolicy)
	if err != nil {
		f.Fatal(err)
	}
	listed := map[netip.Addr]bool{}
	for _, e := range hostilePolicy.Domains {
		if e.IP().IsValid() {
			listed[e.IP()] = true
		}
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := fe.Check(raw)
		if err != nil {
			if !errors.Is(err, errs.ErrForbidden) && !errors.Is(err, errs.ErrInvalidInput) {
				t.Fatalf("Check(%q) = %v: neither forbidden nor invalid input", raw, err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(%q) = %T, want *Error", raw, err)
			}
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("Check(%q) accepted scheme %q", raw, u.Scheme)
		}
		if u.User != nil || u.Opaque != "" {
			t.Fatalf("Check(%q) accepted userinfo or an opaque URL: %s", raw, u)
		}
		host := u.Hostname()
		if host != strings.ToLower(host) || strings.HasSuffix(host, ".") {
			t.Fatalf("Check(%q) host %q is not normalised", raw, host)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			if !listed[ip] || ip.Zone() != "" {
				t.Fatalf("Check(%q) accepted unlisted IP literal %s", raw, ip)
			}
		} else {
			for i := 0; i < len(host); i++ {
				if c := host[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
					t.Fatalf("Check(%q) accepted host %q with %q", raw, host, c)
				}
			}
			ok := host == "example.com" ||
				strings.HasSuffix(host, ".example.org") && len(host) > len(".example.org") ||
				host == "api.example.net" && port == "8443"
			if !ok {
				t.Fatalf("Check(%q) accepted host %q port %s, which no entry allows", raw, host, port)
			}
		}
		again, err := fe.Check(u.String())
		if err != nil || again.String() != u.String() {
			t.Fatalf("Check(%q) = %s, which checks to %v, %v", raw, u, again, err)
		}
		if _, err := url.Parse(u.String()); err != nil {
			t.Fatalf("Check(%q) = %s, which does not parse: %v", raw, u, err)
		}
	})
}
