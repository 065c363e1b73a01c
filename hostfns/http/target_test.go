package http

import (
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/buddy-run/buddy/hostfns/allow"
)

func TestInspect(t *testing.T) {
	res := newMapResolver(map[string][]string{
		"public.test": {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "93.184.215.14"},
		"mixed.test":  {"93.184.215.14", "10.0.0.7"},
		"intra.test":  {"10.0.0.7"},
	})
	wild, err := allow.Parse("*.test", allow.Operator)
	if err != nil {
		t.Fatal(err)
	}
	domains := append(operator("intra.test"), wild)
	f := newFetcher(t, Policy{Domains: domains}, WithResolver(res))
	tests := []struct {
		name       string
		url        string
		wantURL    string
		port       uint16
		addrs      []string // "ip" allowed, "!ip" refused
		refused    string   // substring of Refused, "" = not refused
		unresolved bool
	}{
		{"public name, addresses sorted and distinct", "HTTPS://Public.Test./a#frag", "https://public.test/a", 443,
			[]string{"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"}, "", false},
		{"a name with one private address is refused", "http://mixed.test:8080/", "http://mixed.test:8080/", 8080,
			[]string{"10.0.0.7!", "93.184.215.14"}, "10.0.0.7", false},
		{"an operator-listed name may be private", "http://intra.test/", "http://intra.test/", 80,
			[]string{"10.0.0.7"}, "", false},
		{"not in the allowlist", "https://example.com/", "", 0, nil, "not in the allowlist", false},
		{"metadata literal", "http://169.254.169.254/", "", 0, nil, "metadata", false},
		{"NXDOMAIN", "https://gone.test/", "https://gone.test/", 443, nil, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := f.Inspect(t.Context(), tc.url)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if tc.refused == "" && tg.Refused != "" || tc.refused != "" && !strings.Contains(tg.Refused, tc.refused) {
				t.Fatalf("Refused = %q, want %q", tg.Refused, tc.refused)
			}
			if tc.wantURL != "" && (tg.URL != tc.wantURL || tg.Port != tc.port) {
				t.Errorf("URL, port = %q, %d, want %q, %d", tg.URL, tg.Port, tc.wantURL, tc.port)
			}
			if (tg.Unresolved != "") != tc.unresolved {
				t.Errorf("Unresolved = %q, want set: %v", tg.Unresolved, tc.unresolved)
			}
			var got []string
			for _, a := range tg.Addresses {
				s := a.IP.String()
				if a.Refused != "" {
					s += "!"
				}
				got = append(got, s)
			}
			if strings.Join(got, ",") != strings.Join(tc.addrs, ",") {
				t.Errorf("addresses = %v, want %v", got, tc.addrs)
			}
		})
	}
}

// TestContactsReported: every connection of a Get, new or reused, is
// reported with its host and the address dialled.
func TestContactsReported(t *testing.T) {
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	res := newMapResolver(map[string][]string{"example.test": {"127.0.0.1"}})
	f := newFetcher(t, Policy{Domains: operator("example.test")}, WithResolver(res))
	var mu sync.Mutex
	var seen []string
	ctx := WithContacts(t.Context(), func(host string, addr netip.AddrPort) {
		mu.Lock()
		seen = append(seen, host+"@"+addr.String())
		mu.Unlock()
	})
	for range 2 { // the second Get reuses the connection
		if _, err := f.Get(ctx, "http://EXAMPLE.test:"+port+"/"); err != nil {
			t.Fatal(err)
		}
	}
	want := "example.test@127.0.0.1:" + port
	if len(seen) != 2 || seen[0] != want || seen[1] != want {
		t.Fatalf("contacts = %v, want %s twice", seen, want)
	}
	if _, err := f.Get(t.Context(), "http://example.test:"+port+"/"); err != nil || len(seen) != 2 {
		t.Fatalf("a Get without WithContacts reported: %v %v", seen, err)
	}
}
