package http

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// publicAddr is what the test resolver answers for a "public" name. The
// fetcher checks it as the public address it is; the test dialer then
// connects to the loopback server instead, so that no internet host is ever
// contacted.
const publicAddr = "93.184.216.34"

// provenanceFetcher builds a Fetcher from a skill's declaration and the
// operator's grant exactly as the registry does (allow.Intersect), resolving
// through res and dialling publicAddr as the loopback server. It records every
// address dialled.
func provenanceFetcher(t *testing.T, declared, granted []string, res Resolver, maxRedirects int) (*Fetcher, func() []string) {
	t.Helper()
	f := newFetcher(t, Policy{Domains: allow.Intersect(declared, granted), MaxRedirects: maxRedirects}, WithResolver(res))
	var mu sync.Mutex
	var dialled []string
	f.dial = func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		if rest, ok := strings.CutPrefix(address, publicAddr+":"); ok {
			// Checked as public; delivered to the local test server.
			var plain net.Dialer
			return plain.DialContext(ctx, network, "127.0.0.1:"+rest)
		}
		return d.DialContext(ctx, network, address)
	}
	return f, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), dialled...)
	}
}

// TestIntersectionPrivateAddressMatrix: whether a fetch may reach a loopback
// or private address depends only on whether the operator wrote the host
// exactly in buddy.toml, never on the skill's declaration nor on an entry the
// intersection derived. Every row fetches through a real loopback server.
func TestIntersectionPrivateAddressMatrix(t *testing.T) {
	srv := startServer(t, false, text("reached"))
	p := srv.port()
	res := newMapResolver(map[string][]string{
		"api.x.test":    {"127.0.0.1"},
		"a.x.test":      {"127.0.0.1"},
		"b.x.test":      {"127.0.0.1"},
		"v6.x.test":     {"::1"},
		"mapped.x.test": {"::ffff:127.0.0.1"},
		"ten.x.test":    {"10.0.0.5"},
		"mixed.x.test":  {publicAddr, "127.0.0.1"},
		"pub.x.test":    {publicAddr},
		"api.y.test":    {publicAddr},
		"db.internal":   {"127.0.0.1"},
		"pub.internal":  {publicAddr},
		"meta.x.test":   {"169.254.169.254"},
		"localhost":     {"127.0.0.1"},
	})
	url := func(host string) string { return "http://" + host + ":" + p + "/" }
	tests := []struct {
		name              string
		declared, granted []string
		url               string
		kind              error // nil = reached
	}{
		// The issue: an exact declaration narrowing an operator wildcard.
		{"declared exact ∩ granted wildcard: loopback refused", []string{"api.x.test"}, []string{"*.x.test"}, url("api.x.test"), errs.ErrForbidden},
		{"declared exact ∩ granted wildcard: IPv6 loopback refused", []string{"v6.x.test"}, []string{"*.x.test"}, url("v6.x.test"), errs.ErrForbidden},
		{"declared exact ∩ granted wildcard: mapped loopback refused", []string{"mapped.x.test"}, []string{"*.x.test"}, url("mapped.x.test"), errs.ErrForbidden},
		{"declared exact ∩ granted wildcard: RFC 1918 refused", []string{"ten.x.test"}, []string{"*.x.test"}, url("ten.x.test"), errs.ErrForbidden},
		{"declared exact ∩ granted wildcard: one private answer refuses all", []string{"mixed.x.test"}, []string{"*.x.test"}, url("mixed.x.test"), errs.ErrForbidden},
		{"declared exact ∩ granted wildcard: public reached", []string{"pub.x.test"}, []string{"*.x.test"}, url("pub.x.test"), nil},
		{"declared exact with port ∩ granted wildcard: loopback refused", []string{"api.x.test:" + p}, []string{"*.x.test"}, url("api.x.test"), errs.ErrForbidden},
		{"declared exact ∩ granted wildcard with port: loopback refused", []string{"api.x.test"}, []string{"*.x.test:" + p}, url("api.x.test"), errs.ErrForbidden},
		{"declared * ∩ granted wildcard: loopback refused", []string{"*"}, []string{"*.x.test"}, url("a.x.test"), errs.ErrForbidden},
		{"declared wildcard ∩ granted wildcard: loopback refused", []string{"*.x.test"}, []string{"*.x.test"}, url("a.x.test"), errs.ErrForbidden},
		{"declared narrower wildcard: loopback refused", []string{"*.api.x.test", "api.x.test"}, []string{"*.x.test"}, url("api.x.test"), errs.ErrForbidden},
		{"special-use wildcard *.internal: loopback refused", []string{"db.internal"}, []string{"*.internal"}, url("db.internal"), errs.ErrForbidden},
		{"special-use wildcard *.internal: public reached", []string{"*"}, []string{"*.internal"}, url("pub.internal"), nil},

		// The operator's exact entries keep their meaning.
		{"granted exact, declared exact: loopback reached", []string{"api.x.test"}, []string{"api.x.test"}, url("api.x.test"), nil},
		{"granted exact and wildcard, declared exact: loopback reached", []string{"a.x.test"}, []string{"a.x.test", "*.x.test"}, url("a.x.test"), nil},
		{"granted wildcard and exact, declared *: exact host reaches loopback", []string{"*"}, []string{"*.x.test", "a.x.test"}, url("a.x.test"), nil},
		{"granted wildcard and exact, declared *: other host refused", []string{"*"}, []string{"*.x.test", "a.x.test"}, url("b.x.test"), errs.ErrForbidden},
		{"granted wildcard and exact, declared wildcard: exact host reaches loopback", []string{"*.x.test"}, []string{"*.x.test", "a.x.test"}, url("a.x.test"), nil},
		{"granted exact, declared wildcard over it: loopback reached", []string{"*.x.test"}, []string{"a.x.test"}, url("a.x.test"), nil},
		{"granted exact with this port: loopback reached", []string{"a.x.test"}, []string{"a.x.test:" + p}, url("a.x.test"), nil},
		{"declared this port, granted exact: loopback reached", []string{"a.x.test:" + p}, []string{"a.x.test"}, url("a.x.test"), nil},
		{"granted exact on another port only: loopback refused", []string{"*"}, []string{"a.x.test:1", "*.x.test"}, url("a.x.test"), errs.ErrForbidden},
		{"granted exact localhost: reached", []string{"localhost"}, []string{"localhost"}, url("localhost"), nil},
		{"granted exact name resolving to metadata: refused", []string{"*"}, []string{"meta.x.test"}, "http://meta.x.test/", errs.ErrForbidden},
		{"granted exact, not declared: not in the list", []string{"b.x.test"}, []string{"a.x.test"}, url("a.x.test"), errs.ErrForbidden},

		// IP literals.
		{"IP declared and granted: reached", []string{"127.0.0.1"}, []string{"127.0.0.1"}, "http://127.0.0.1:" + p + "/", nil},
		{"IP granted, declared *: reached", []string{"*"}, []string{"127.0.0.1"}, "http://0x7f.1:" + p + "/", nil},
		{"IP declared, only a wildcard granted: refused", []string{"127.0.0.1"}, []string{"*.x.test"}, "http://127.0.0.1:" + p + "/", errs.ErrForbidden},
		{"IP declared, another IP granted: refused", []string{"127.0.0.1"}, []string{"127.0.0.2"}, "http://127.0.0.1:" + p + "/", errs.ErrForbidden},
		{"localhost declared under *.test: refused", []string{"localhost"}, []string{"*.test"}, url("localhost"), errs.ErrForbidden},
		{"public name not granted: refused", []string{"*"}, []string{"*.x.test"}, url("api.y.test"), errs.ErrForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.hits.Load()
			f, dialled := provenanceFetcher(t, tc.declared, tc.granted, res, 0)
			resp, err := f.Get(t.Context(), tc.url)
			hits := srv.hits.Load() - before
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("Get(%s) under %q ∩ %q = %v, want the page", tc.url, tc.declared, tc.granted, err)
				}
				if string(resp.Body) != "reached" || hits != 1 {
					t.Fatalf("Get = %q with %d hits, want the body and 1 hit", resp.Body, hits)
				}
				return
			}
			if err == nil {
				t.Fatalf("Get(%s) under %q ∩ %q = %d %q, want %v", tc.url, tc.declared, tc.granted, resp.Status, resp.Body, tc.kind)
			}
			wantKind(t, err, tc.kind)
			if hits != 0 {
				t.Errorf("server hits = %d, want 0", hits)
			}
			if d := dialled(); len(d) != 0 {
				t.Errorf("dialled %v, want nothing", d)
			}
		})
	}
}

// TestRedirectProvenance: every hop is judged by the entry that allows its
// host. A redirect from an operator's exact host to a host the skill narrowed
// an operator wildcard to may not reach loopback, nor may one to an IP literal
// that only a derived or absent entry covers.
func TestRedirectProvenance(t *testing.T) {
	target := startServer(t, false, text("target"))
	tp := target.port()
	res := newMapResolver(map[string][]string{
		"a.x.test":   {"127.0.0.1"},
		"b.x.test":   {"127.0.0.1"},
		"api.x.test": {"127.0.0.1"},
		"v6.x.test":  {"::1"},
		"pub.x.test": {publicAddr},
	})
	declared := []string{"a.x.test", "b.x.test", "api.x.test", "v6.x.test", "pub.x.test", "[::1]"}
	granted := []string{"a.x.test", "b.x.test", "*.x.test"}
	tests := []struct {
		name     string
		location string
		kind     error // nil = followed to the target
	}{
		{"to an operator's exact host on loopback", "http://b.x.test:" + tp + "/", nil},
		{"to a derived host on loopback", "http://api.x.test:" + tp + "/", errs.ErrForbidden},
		{"to a derived host on IPv6 loopback", "http://v6.x.test:" + tp + "/", errs.ErrForbidden},
		{"to a derived host on a public address", "http://pub.x.test:" + tp + "/", nil},
		{"to a loopback IP literal not granted", "http://127.0.0.1:" + tp + "/", errs.ErrForbidden},
		{"to an IPv6 loopback literal only declared", "http://[::1]:" + tp + "/", errs.ErrForbidden},
		{"to localhost", "http://localhost:" + tp + "/", errs.ErrForbidden},
		{"to the metadata endpoint", "http://169.254.169.254/", errs.ErrForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := startServer(t, false, redirectTo(tc.location))
			before := target.hits.Load()
			f, _ := provenanceFetcher(t, declared, granted, res, 0)
			resp, err := f.Get(t.Context(), "http://a.x.test:"+src.port()+"/start")
			hits := target.hits.Load() - before
			if tc.kind == nil {
				if err != nil || string(resp.Body) != "target" || hits != 1 {
					t.Fatalf("Get = %v, %v with %d target hits; want the target", resp, err, hits)
				}
				return
			}
			wantKind(t, err, tc.kind)
			if !strings.Contains(err.Error(), "redirected from") {
				t.Errorf("error %q does not say it was a redirect", err)
			}
			if hits != 0 {
				t.Errorf("target hits = %d, want 0", hits)
			}
		})
	}
}

// TestStaticIPRefusalWithoutLocalEntry: an IP literal allowed only by an entry
// that is not Local (a manifest's, used directly) is refused by Check, before
// any I/O, when the address is not public.
func TestStaticIPRefusalWithoutLocalEntry(t *testing.T) {
	e, err := allow.Parse("127.0.0.1", allow.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	f := newFetcher(t, Policy{Domains: []allow.Entry{e}})
	_, err = f.Check("http://127.0.0.1/")
	wantKind(t, err, errs.ErrForbidden)
	if !strings.Contains(err.Error(), "loopback") {
		t.Errorf("error %q does not say loopback", err)
	}
	pub, err := allow.Parse(publicAddr, allow.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	f = newFetcher(t, Policy{Domains: []allow.Entry{pub}})
	if _, err := f.Check("http://" + publicAddr + "/"); err != nil {
		t.Errorf("public IP: %v", err)
	}
}
