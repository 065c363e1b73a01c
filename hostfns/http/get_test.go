package http

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// ---- helpers ----

// resolverFunc is a Resolver built from a function.
type resolverFunc func(ctx context.Context, host string) ([]net.IPAddr, error)

func (r resolverFunc) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	return r(ctx, host)
}

// mapResolver answers from m (host → addresses) and counts lookups per host;
// unknown hosts are NXDOMAIN.
type mapResolver struct {
	mu    sync.Mutex
	m     map[string][]string
	calls map[string]int
}

func newMapResolver(m map[string][]string) *mapResolver {
	return &mapResolver{m: m, calls: map[string]int{}}
}

func (r *mapResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[host]++
	addrs, ok := r.m[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

func (r *mapResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func newFetcher(t testing.TB, p Policy, opts ...Option) *Fetcher {
	t.Helper()
	f, err := New(p, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(f.CloseIdleConnections)
	return f
}

// server is an httptest server that counts the requests it receives.
type server struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	reqs []*nethttp.Request
}

func (s *server) port() string {
	u, _ := url.Parse(s.URL)
	return u.Port()
}

func (s *server) requests() []*nethttp.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func startServer(t testing.TB, tls bool, h nethttp.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	wrapped := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(context.Background()))
		s.mu.Unlock()
		h(w, r)
	})
	if tls {
		s.Server = httptest.NewTLSServer(wrapped)
	} else {
		s.Server = httptest.NewServer(wrapped)
	}
	t.Cleanup(s.Close)
	return s
}

func text(body string) nethttp.HandlerFunc {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) { io.WriteString(w, body) }
}

func redirectTo(loc string) nethttp.HandlerFunc {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.SetCookie(w, &nethttp.Cookie{Name: "session", Value: "secret"})
		nethttp.Redirect(w, r, loc, nethttp.StatusFound)
	}
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want kind %q", err, kind)
	}
}

// ---- allowed fetches ----

func TestGetAllowed(t *testing.T) {
	srv := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/hello":
			io.WriteString(w, "hello")
		default:
			nethttp.NotFound(w, r)
		}
	})
	res := newMapResolver(map[string][]string{"example.test": {"127.0.0.1"}})
	tests := []struct {
		name     string
		domains  []string
		url      string
		status   int
		body     string
		resolved int
	}{
		{"listed IP literal", []string{"127.0.0.1"}, srv.URL + "/hello", 200, "hello", 0},
		{"listed IP literal with port", []string{"127.0.0.1:" + srv.port()}, srv.URL + "/hello", 200, "hello", 0},
		{"IP literal in hex", []string{"127.0.0.1"}, "http://0x7f.1:" + srv.port() + "/hello", 200, "hello", 0},
		{"exact name resolving to loopback", []string{"example.test"}, "http://example.test:" + srv.port() + "/hello", 200, "hello", 1},
		{"upper case and trailing dot", []string{"example.test"}, "HTTP://EXAMPLE.TEST.:" + srv.port() + "/hello", 200, "hello", 1},
		{"404 is a response", []string{"127.0.0.1"}, srv.URL + "/missing", 404, "404 page not found\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, hits := res.count("example.test"), srv.hits.Load()
			f := newFetcher(t, Policy{Domains: operator(tc.domains...)}, WithResolver(res))
			resp, err := f.Get(t.Context(), tc.url)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if resp.Status != tc.status || string(resp.Body) != tc.body {
				t.Fatalf("Get = %d %q, want %d %q", resp.Status, resp.Body, tc.status, tc.body)
			}
			if got := srv.hits.Load() - hits; got != 1 {
				t.Errorf("server hits = %d, want 1", got)
			}
			if got := res.count("example.test") - before; got != tc.resolved {
				t.Errorf("lookups = %d, want %d", got, tc.resolved)
			}
		})
	}
}

func TestGetHeadersAreASafeSubset(t *testing.T) {
	srv := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("ETag", `"v1"`)
		h.Set("Cache-Control", "max-age=60")
		h.Add("Content-Language", "en")
		h.Add("Content-Language", "fr")
		h.Set("Set-Cookie", "session=secret")
		h.Set("X-Secret", "token")
		h.Set("Server", "test")
		h.Set("Location", "http://evil.test/")
		io.WriteString(w, "body")
	})
	f := newFetcher(t, Policy{Domains: operator("127.0.0.1")})
	resp, err := f.Get(t.Context(), srv.URL+"/h")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if resp.URL != srv.URL+"/h" {
		t.Errorf("URL = %q, want %q", resp.URL, srv.URL+"/h")
	}
	want := map[string]string{
		"Content-Type":     "text/plain; charset=utf-8",
		"ETag":             `"v1"`,
		"Cache-Control":    "max-age=60",
		"Content-Language": "en, fr",
		"Content-Length":   "4",
	}
	got := resp.Headers
	delete(got, "Date") // set by the server, value varies
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Headers = %v\nwant %v", got, want)
	}
	// The request carried only our headers.
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests", len(reqs))
	}
	var names []string
	for k := range reqs[0].Header {
		names = append(names, k)
	}
	slices.Sort(names)
	if fmt.Sprint(names) != "[Accept-Encoding User-Agent]" || reqs[0].UserAgent() != UserAgent || reqs[0].Method != "GET" {
		t.Errorf("request %s with headers %v, want GET with Accept-Encoding and User-Agent %q", reqs[0].Method, reqs[0].Header, UserAgent)
	}
}

func TestGetHTTPS(t *testing.T) {
	srv := startServer(t, true, text("secure"))
	trust := srv.Client().Transport.(*nethttp.Transport).TLSClientConfig
	res := newMapResolver(map[string][]string{"example.com": {"127.0.0.1"}})
	tests := []struct {
		name    string
		domains []string
		url     string
		opts    []Option
		kind    error // nil = success
	}{
		{"IP literal", []string{"127.0.0.1"}, srv.URL, []Option{WithTLSConfig(trust)}, nil},
		{"name in the certificate", []string{"example.com"}, "https://example.com:" + srv.port() + "/", []Option{WithTLSConfig(trust), WithResolver(res)}, nil},
		{"untrusted certificate", []string{"127.0.0.1"}, srv.URL, nil, errs.ErrUnavailable},
		{"name not in the certificate", []string{"other.test"}, "https://other.test:" + srv.port() + "/", []Option{WithTLSConfig(trust), WithResolver(newMapResolver(map[string][]string{"other.test": {"127.0.0.1"}}))}, errs.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFetcher(t, Policy{Domains: operator(tc.domains...)}, tc.opts...)
			resp, err := f.Get(t.Context(), tc.url)
			if tc.kind != nil {
				wantKind(t, err, tc.kind)
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if resp.Status != 200 || string(resp.Body) != "secure" {
				t.Fatalf("Get = %d %q", resp.Status, resp.Body)
			}
		})
	}
}

func gzipped(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestGetContentEncoding(t *testing.T) {
	plain := bytes.Repeat([]byte("buddy "), 1000)
	gz := gzipped(t, plain)
	var fl bytes.Buffer
	fw, _ := flate.NewWriter(&fl, flate.BestCompression)
	fw.Write(plain)
	fw.Close()
	srv := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz)
		case "/deflate":
			w.Header().Set("Content-Encoding", "deflate")
			w.Write(fl.Bytes())
		case "/br":
			w.Header().Set("Content-Encoding", "br")
			w.Write([]byte{0x0b, 0x02, 0x80, 'h', 'i', 0x03})
		case "/identity":
			w.Header().Set("Content-Encoding", "identity")
			w.Write(plain)
		case "/double":
			w.Header().Set("Content-Encoding", "gzip, gzip")
			w.Write(gzipped(t, gz))
		case "/badgzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz[:len(gz)/2])
		}
	})
	f := newFetcher(t, Policy{Domains: operator("127.0.0.1")})
	tests := []struct {
		path string
		kind error
	}{
		{"/gzip", nil},
		{"/identity", nil},
		{"/deflate", errs.ErrUnavailable},
		{"/br", errs.ErrUnavailable},
		{"/double", errs.ErrUnavailable},
		{"/badgzip", errs.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := f.Get(t.Context(), srv.URL+tc.path)
			if tc.kind != nil {
				wantKind(t, err, tc.kind)
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !bytes.Equal(resp.Body, plain) {
				t.Fatalf("body is %d bytes, want the %d decoded bytes", len(resp.Body), len(plain))
			}
			if resp.Headers["Content-Length"] != fmt.Sprint(len(plain)) {
				t.Errorf("Content-Length = %q, want %d", resp.Headers["Content-Length"], len(plain))
			}
		})
	}
}

// ---- redirects ----

func TestRedirects(t *testing.T) {
	target := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		io.WriteString(w, "target")
	})
	tp := target.port()
	res := newMapResolver(map[string][]string{
		"a.test": {"127.0.0.1"}, "b.test": {"127.0.0.1"}, "evil.test": {"127.0.0.1"},
		"x.wild.test": {"127.0.0.1"},
	})
	tests := []struct {
		name         string
		location     string
		maxRedirects int
		kind         error // nil = followed
		targetHits   int64
	}{
		{"to another allowed host", "http://b.test:" + tp + "/ok", 0, nil, 1},
		{"relative", "/ok", 0, nil, 0}, // stays on the source server
		{"to a host not on the list", "http://evil.test:" + tp + "/", 0, errs.ErrForbidden, 0},
		{"scheme-relative to a host not on the list", "//evil.test:" + tp + "/", 0, errs.ErrForbidden, 0},
		{"to a loopback IP", "http://127.0.0.1:" + tp + "/", 0, errs.ErrForbidden, 0},
		{"to a decimal loopback IP", "http://2130706433:" + tp + "/", 0, errs.ErrForbidden, 0},
		{"to a mapped loopback IP", "http://[::ffff:127.0.0.1]:" + tp + "/", 0, errs.ErrForbidden, 0},
		{"to a private IP", "http://10.0.0.1/", 0, errs.ErrForbidden, 0},
		{"to the metadata endpoint", "http://169.254.169.254/latest/meta-data/", 0, errs.ErrForbidden, 0},
		{"to a userinfo URL", "http://user:pw@b.test:" + tp + "/", 0, errs.ErrForbidden, 0},
		{"to a file URL", "file:///etc/passwd", 0, errs.ErrForbidden, 0},
		{"to a wildcard name that resolves to loopback", "http://x.wild.test:" + tp + "/", 0, errs.ErrForbidden, 0},
		{"when redirects are off", "http://b.test:" + tp + "/ok", -1, errs.ErrForbidden, 0},
		{"to an invalid Location", "http://b.test:bad/", 0, errs.ErrUnavailable, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
				if r.URL.Path == "/ok" {
					io.WriteString(w, "source")
					return
				}
				redirectTo(tc.location)(w, r)
			})
			before := target.hits.Load()
			f := newFetcher(t, Policy{Domains: operator("a.test", "b.test", "*.wild.test"), MaxRedirects: tc.maxRedirects}, WithResolver(res))
			resp, err := f.Get(t.Context(), "http://a.test:"+src.port()+"/start")
			if got := target.hits.Load() - before; got != tc.targetHits {
				t.Errorf("target hits = %d, want %d", got, tc.targetHits)
			}
			if tc.kind != nil {
				wantKind(t, err, tc.kind)
				if !strings.Contains(err.Error(), "redirect") {
					t.Errorf("error %q does not say it was a redirect", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if resp.Status != 200 {
				t.Fatalf("status %d", resp.Status)
			}
			if tc.targetHits == 1 {
				if string(resp.Body) != "target" || resp.URL != tc.location {
					t.Fatalf("Get = %q from %s, want the target's body from %s", resp.Body, resp.URL, tc.location)
				}
				reqs := target.requests()
				last := reqs[len(reqs)-1]
				for _, h := range []string{"Referer", "Cookie", "Authorization"} {
					if v := last.Header.Get(h); v != "" {
						t.Errorf("redirected request carried %s: %q", h, v)
					}
				}
			}
		})
	}
}

func TestRedirectHTTPSToHTTPRefused(t *testing.T) {
	plain := startServer(t, false, text("plain"))
	secure := startServer(t, true, redirectTo("http://example.com:"+plain.port()+"/"))
	trust := secure.Client().Transport.(*nethttp.Transport).TLSClientConfig
	res := newMapResolver(map[string][]string{"example.com": {"127.0.0.1"}})
	f := newFetcher(t, Policy{Domains: operator("example.com")}, WithResolver(res), WithTLSConfig(trust))
	_, err := f.Get(t.Context(), "https://example.com:"+secure.port()+"/")
	wantKind(t, err, errs.ErrForbidden)
	if !strings.Contains(err.Error(), "https to http") {
		t.Errorf("error %q does not name the downgrade", err)
	}
	if secure.hits.Load() != 1 || plain.hits.Load() != 0 {
		t.Errorf("hits: https %d, http %d; want 1, 0", secure.hits.Load(), plain.hits.Load())
	}
}

func TestRedirectLimit(t *testing.T) {
	var mu sync.Mutex
	hops := map[string]int{}
	srv := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		mu.Lock()
		hops[r.URL.Path]++
		mu.Unlock()
		var n int
		fmt.Sscanf(r.URL.Path, "/hop/%d", &n)
		nethttp.Redirect(w, r, fmt.Sprintf("/hop/%d", n+1), nethttp.StatusMovedPermanently)
	})
	tests := []struct {
		max, wantHops int
	}{
		{0, DefaultMaxRedirects + 1},
		{2, 3},
		{-1, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			mu.Lock()
			clear(hops)
			mu.Unlock()
			f := newFetcher(t, Policy{Domains: operator("127.0.0.1"), MaxRedirects: tc.max})
			_, err := f.Get(t.Context(), srv.URL+"/hop/0")
			wantKind(t, err, errs.ErrForbidden)
			mu.Lock()
			defer mu.Unlock()
			for i := range tc.wantHops {
				if hops[fmt.Sprintf("/hop/%d", i)] != 1 {
					t.Errorf("/hop/%d requested %d times, want 1", i, hops[fmt.Sprintf("/hop/%d", i)])
				}
			}
			if len(hops) != tc.wantHops {
				t.Errorf("requested %v, want /hop/0../hop/%d only", hops, tc.wantHops-1)
			}
		})
	}
}

func TestRedirectLoop(t *testing.T) {
	res := newMapResolver(map[string][]string{"a.test": {"127.0.0.1"}, "b.test": {"127.0.0.1"}})
	var a, b *server
	a = startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/self" {
			redirectTo("/self")(w, r)
			return
		}
		redirectTo("http://b.test:"+b.port()+"/")(w, r)
	})
	b = startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		redirectTo("http://a.test:"+a.port()+"/start")(w, r)
	})
	f := newFetcher(t, Policy{Domains: operator("a.test", "b.test")}, WithResolver(res))
	tests := []struct {
		path         string
		aHits, bHits int64
	}{
		{"/self", 1, 0},
		{"/start", 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			a0, b0 := a.hits.Load(), b.hits.Load()
			_, err := f.Get(t.Context(), "http://a.test:"+a.port()+tc.path)
			wantKind(t, err, errs.ErrUnavailable)
			if !strings.Contains(err.Error(), "redirect loop") {
				t.Errorf("error %q does not name the loop", err)
			}
			if a.hits.Load()-a0 != tc.aHits || b.hits.Load()-b0 != tc.bHits {
				t.Errorf("hits a=%d b=%d, want %d %d", a.hits.Load()-a0, b.hits.Load()-b0, tc.aHits, tc.bHits)
			}
		})
	}
}

// ---- the dialled address ----

func TestDialledAddressChecks(t *testing.T) {
	srv := startServer(t, false, text("reached"))
	p := srv.port()
	res := newMapResolver(map[string][]string{
		"public.test":   {"127.0.0.1"},
		"mixed.test":    {"93.184.216.34", "127.0.0.1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"private.test":  {"10.0.0.5"},
		"nat64.test":    {"64:ff9b::7f00:1"},
		"local.corp":    {"127.0.0.1"},
		"meta.corp":     {"169.254.169.254"},
		"metalist.corp": {"169.254.169.254"},
		"empty.test":    {},
	})
	tests := []struct {
		name    string
		domains []string
		url     string
		kind    error // nil = success
	}{
		{"wildcard name resolving to loopback", []string{"*.test"}, "http://public.test:" + p + "/", errs.ErrForbidden},
		{"wildcard name with one private answer", []string{"*.test"}, "http://mixed.test:" + p + "/", errs.ErrForbidden},
		{"wildcard name resolving to mapped loopback", []string{"*.test"}, "http://mapped.test:" + p + "/", errs.ErrForbidden},
		{"wildcard name resolving to RFC 1918", []string{"*.test"}, "http://private.test:" + p + "/", errs.ErrForbidden},
		{"wildcard name resolving to NAT64 loopback", []string{"*.test"}, "http://nat64.test:" + p + "/", errs.ErrForbidden},
		{"wildcard does not make a name explicit", []string{"*.corp", "127.0.0.1"}, "http://local.corp:" + p + "/", errs.ErrForbidden},
		{"exact entry on another port is not explicit", []string{"local.corp:1", "*.corp"}, "http://local.corp:" + p + "/", errs.ErrForbidden},
		{"exact name may be local", []string{"local.corp"}, "http://local.corp:" + p + "/", nil},
		{"exact name with its port may be local", []string{"local.corp:" + p}, "http://local.corp:" + p + "/", nil},
		{"exact name resolving to metadata", []string{"meta.corp"}, "http://meta.corp/", errs.ErrForbidden},
		{"DNS failure", []string{"*.test"}, "http://nxdomain.test:" + p + "/", errs.ErrUnavailable},
		{"no addresses", []string{"*.test"}, "http://empty.test:" + p + "/", errs.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.hits.Load()
			f := newFetcher(t, Policy{Domains: operator(tc.domains...)}, WithResolver(res))
			var dialled []string
			var mu sync.Mutex
			f.dial = func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
				mu.Lock()
				dialled = append(dialled, address)
				mu.Unlock()
				return d.DialContext(ctx, network, address)
			}
			resp, err := f.Get(t.Context(), tc.url)
			hits := srv.hits.Load() - before
			if tc.kind == nil {
				if err != nil || string(resp.Body) != "reached" || hits != 1 {
					t.Fatalf("Get = %v, %v with %d hits; want the body, 1 hit", resp, err, hits)
				}
				return
			}
			wantKind(t, err, tc.kind)
			if hits != 0 {
				t.Errorf("server hits = %d, want 0", hits)
			}
			if len(dialled) != 0 {
				t.Errorf("dialled %v, want nothing", dialled)
			}
			var e *Error
			if errors.Is(err, errs.ErrForbidden) && (!errors.As(err, &e) || !e.Addr.IsValid() || e.Host == "") {
				t.Errorf("error %#v does not name the host and the address", err)
			}
		})
	}
}

func TestMetadataNeedsItsAddressListed(t *testing.T) {
	res := newMapResolver(map[string][]string{"meta.corp": {"169.254.169.254"}})
	var dialled []string
	f := newFetcher(t, Policy{Domains: operator("meta.corp", "169.254.169.254"), Timeout: time.Second}, WithResolver(res))
	f.dial = func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
		dialled = append(dialled, address)
		return nil, errors.New("test: not dialling")
	}
	_, err := f.Get(t.Context(), "http://meta.corp/")
	wantKind(t, err, errs.ErrUnavailable) // allowed through the checks, stopped by the fake dial
	if fmt.Sprint(dialled) != "[169.254.169.254:80]" {
		t.Errorf("dialled %v", dialled)
	}
	if _, err := f.Check("http://169.254.169.254/"); err != nil {
		t.Errorf("Check of the listed metadata address: %v", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	f := newFetcher(t, Policy{Domains: operator("127.0.0.1")})
	_, err = f.Get(t.Context(), "http://"+addr+"/")
	wantKind(t, err, errs.ErrUnavailable)
}

// TestDNSRebinding: the name is resolved once per connection and the address
// checked is the address dialled. The first answer is public (the fake dial
// refuses to go there, so the test never touches the internet), the second is
// loopback; loopback is never dialled and the local server is never reached.
func TestDNSRebinding(t *testing.T) {
	srv := startServer(t, false, text("loopback"))
	var lookups atomic.Int64
	res := resolverFunc(func(ctx context.Context, host string) ([]net.IPAddr, error) {
		if lookups.Add(1) == 1 {
			return []net.IPAddr{{IP: net.ParseIP("93.184.216.34")}}, nil
		}
		return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}}, nil
	})
	f := newFetcher(t, Policy{Domains: operator("*.test"), Timeout: 5 * time.Second}, WithResolver(res))
	var mu sync.Mutex
	var dialled []string
	f.dial = func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		if strings.HasPrefix(address, "93.184.216.34:") {
			return nil, errors.New("test: refusing to dial the internet")
		}
		return d.DialContext(ctx, network, address)
	}
	u := "http://rebind.test:" + srv.port() + "/"

	_, err := f.Get(t.Context(), u)
	wantKind(t, err, errs.ErrUnavailable)
	if lookups.Load() != 1 {
		t.Errorf("first fetch resolved %d times, want once", lookups.Load())
	}
	_, err = f.Get(t.Context(), u)
	wantKind(t, err, errs.ErrForbidden)
	if lookups.Load() != 2 {
		t.Errorf("two fetches resolved %d times, want twice", lookups.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"93.184.216.34:" + srv.port()}; !slices.Equal(dialled, want) {
		t.Errorf("dialled %v, want %v", dialled, want)
	}
	if srv.hits.Load() != 0 {
		t.Errorf("loopback server reached %d times", srv.hits.Load())
	}
}

// TestControlRefusesAnotherAddress: should anything between the check and the
// connect swap the destination, the Dialer's Control function refuses it.
func TestControlRefusesAnotherAddress(t *testing.T) {
	srv := startServer(t, false, text("loopback"))
	res := newMapResolver(map[string][]string{"public.test": {"93.184.216.34"}})
	f := newFetcher(t, Policy{Domains: operator("*.test")}, WithResolver(res))
	f.dial = func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
		return d.DialContext(ctx, network, srv.Listener.Addr().String()) // the swap
	}
	_, err := f.Get(t.Context(), "http://public.test:"+srv.port()+"/")
	wantKind(t, err, errs.ErrForbidden)
	if srv.hits.Load() != 0 {
		t.Errorf("server reached %d times", srv.hits.Load())
	}

	f2 := newFetcher(t, Policy{Domains: operator("*.test", "local.test")})
	tests := []struct {
		want     string
		port     uint16
		explicit bool
		address  string
		ok       bool
	}{
		{"93.184.216.34", 80, false, "93.184.216.34:80", true},
		{"93.184.216.34", 80, false, "93.184.216.34:81", false},
		{"93.184.216.34", 80, false, "127.0.0.1:80", false},
		{"127.0.0.1", 80, false, "127.0.0.1:80", false},
		{"127.0.0.1", 80, true, "127.0.0.1:80", true},
		{"127.0.0.1", 80, true, "[::ffff:127.0.0.1]:80", true},
		{"169.254.169.254", 80, true, "169.254.169.254:80", false},
		{"93.184.216.34", 80, false, "not-an-address:80", false},
	}
	for _, tc := range tests {
		err := f2.control(netip.MustParseAddr(tc.want), tc.port, tc.explicit)("tcp", tc.address, nil)
		if (err == nil) != tc.ok {
			t.Errorf("control(%s, explicit=%v)(%s) = %v, want ok=%v", tc.want, tc.explicit, tc.address, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errs.ErrForbidden) {
			t.Errorf("control error %v is not forbidden", err)
		}
	}
}

// ---- caps and deadlines ----

func TestBodyCap(t *testing.T) {
	const limit = 64 << 10
	bomb := gzipped(t, make([]byte, 16<<20)) // 16 MiB of zeros in about 16 KiB
	srv := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		chunk := make([]byte, 32<<10)
		switch r.URL.Path {
		case "/exact":
			w.Write(make([]byte, limit))
		case "/exact-gzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gzipped(t, make([]byte, limit)))
		case "/content-length":
			w.Header().Set("Content-Length", fmt.Sprint(limit+1))
			w.Write(make([]byte, limit+1))
		case "/endless":
			// Never ends: only a reader that stops at the cap returns too_large.
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/bomb":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb)
		case "/endless-bomb":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zeros := make([]byte, 64<<10)
			for r.Context().Err() == nil {
				if _, err := zw.Write(zeros); err != nil {
					return
				}
				if err := zw.Flush(); err != nil {
					return
				}
				w.(nethttp.Flusher).Flush()
			}
		}
	})
	f := newFetcher(t, Policy{Domains: operator("127.0.0.1"), MaxBodyBytes: limit, Timeout: 20 * time.Second})
	tests := []struct {
		path string
		kind error
	}{
		{"/exact", nil},
		{"/exact-gzip", nil},
		{"/content-length", errs.ErrTooLarge},
		{"/endless", errs.ErrTooLarge},
		{"/bomb", errs.ErrTooLarge},
		{"/endless-bomb", errs.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := f.Get(t.Context(), srv.URL+tc.path)
			if tc.kind == nil {
				if err != nil || len(resp.Body) != limit {
					t.Fatalf("Get = %v; want %d bytes", err, limit)
				}
				return
			}
			wantKind(t, err, tc.kind)
		})
	}
}

func TestDeadlines(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const slack = 3 * time.Second
	srv := startServer(t, false, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/dribble":
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			for i := 0; i < 1000; i++ {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
				w.Write([]byte("x"))
				w.(nethttp.Flusher).Flush()
			}
		case "/slow-headers":
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		case "/slow-redirect":
			time.Sleep(timeout / 2)
			nethttp.Redirect(w, r, "/slow-redirect2", nethttp.StatusFound)
		case "/slow-redirect2":
			select {
			case <-r.Context().Done():
			case <-time.After(timeout):
			}
			io.WriteString(w, "late")
		}
	})
	var resolverHadDeadline atomic.Bool
	slowDNS := resolverFunc(func(ctx context.Context, host string) ([]net.IPAddr, error) {
		_, ok := ctx.Deadline()
		resolverHadDeadline.Store(ok)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return nil, errors.New("slow resolver was not stopped")
		}
	})
	tests := []struct {
		name string
		url  string
		opts []Option
	}{
		{"body dribbled slower than the deadline", srv.URL + "/dribble", nil},
		{"headers slower than the deadline", srv.URL + "/slow-headers", nil},
		{"redirects eat the same deadline", srv.URL + "/slow-redirect", nil},
		{"slow DNS", "http://slow.test/", []Option{WithResolver(slowDNS)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFetcher(t, Policy{Domains: operator("127.0.0.1", "slow.test"), Timeout: timeout}, tc.opts...)
			start := time.Now()
			_, err := f.Get(t.Context(), tc.url)
			wantKind(t, err, errs.ErrTimeout)
			if d := time.Since(start); d > timeout+slack {
				t.Errorf("took %s, want about %s", d, timeout)
			}
		})
	}
	if !resolverHadDeadline.Load() {
		t.Errorf("the resolver was called without a deadline")
	}

	t.Run("the caller's shorter deadline", func(t *testing.T) {
		f := newFetcher(t, Policy{Domains: operator("127.0.0.1"), Timeout: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := f.Get(ctx, srv.URL+"/slow-headers")
		wantKind(t, err, errs.ErrTimeout)
	})
	t.Run("the caller cancels", func(t *testing.T) {
		f := newFetcher(t, Policy{Domains: operator("127.0.0.1"), Timeout: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(timeout, cancel)
		_, err := f.Get(ctx, srv.URL+"/slow-headers")
		wantKind(t, err, errs.ErrCanceled)
	})
}

func TestHeaderCap(t *testing.T) {
	var protos sync.Map
	h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		protos.Store(r.Proto, true)
		n := 1 << 10
		if r.URL.Path == "/big" {
			n = MaxHeaderBytes + 1
		}
		w.Header().Set("X-Pad", strings.Repeat("a", n))
		io.WriteString(w, "ok")
	})
	h1 := httptest.NewServer(h)
	defer h1.Close()
	h2 := httptest.NewUnstartedServer(h)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	for _, srv := range []*httptest.Server{h1, h2} {
		t.Run(srv.URL[:strings.Index(srv.URL, ":")], func(t *testing.T) {
			trust := srv.Client().Transport.(*nethttp.Transport).TLSClientConfig
			f := newFetcher(t, Policy{Domains: operator("127.0.0.1")}, WithTLSConfig(trust))
			if _, err := f.Get(t.Context(), srv.URL+"/small"); err != nil {
				t.Fatalf("small headers: %v", err)
			}
			_, err := f.Get(t.Context(), srv.URL+"/big")
			wantKind(t, err, errs.ErrTooLarge)
		})
	}
	if _, ok := protos.Load("HTTP/2.0"); !ok {
		t.Errorf("no request came over HTTP/2")
	}
}

func TestNoProxy(t *testing.T) {
	proxy := startServer(t, false, text("proxied"))
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	srv := startServer(t, false, text("direct"))
	res := newMapResolver(map[string][]string{"direct.test": {"127.0.0.1"}})
	f := newFetcher(t, Policy{Domains: operator("direct.test")}, WithResolver(res))
	resp, err := f.Get(t.Context(), "http://direct.test:"+srv.port()+"/")
	if err != nil || string(resp.Body) != "direct" || proxy.hits.Load() != 0 {
		t.Fatalf("Get = %v, %v; proxy hits %d", resp, err, proxy.hits.Load())
	}
}

func TestConcurrentGets(t *testing.T) {
	srv := startServer(t, false, text("ok"))
	f := newFetcher(t, Policy{Domains: operator("127.0.0.1")})
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			resp, err := f.Get(t.Context(), srv.URL)
			if err == nil && string(resp.Body) != "ok" {
				err = fmt.Errorf("body %q", resp.Body)
			}
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestConnectionReuse: checking every dial must not cost keep-alive.
func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Write(make([]byte, 4<<10))
	}))
	srv.Config.ConnState = func(_ net.Conn, s nethttp.ConnState) {
		if s == nethttp.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	f := newFetcher(t, Policy{Domains: operator("127.0.0.1")})
	for range 20 {
		if _, err := f.Get(t.Context(), srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	if conns.Load() != 1 {
		t.Errorf("20 sequential fetches opened %d connections, want 1", conns.Load())
	}
}

// ---- benchmark ----

func BenchmarkGet4KiB(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 4<<10)
	srv := startServer(b, false, func(w nethttp.ResponseWriter, r *nethttp.Request) { w.Write(body) })
	b.Run("fetcher", func(b *testing.B) {
		f := newFetcher(b, Policy{Domains: operator("127.0.0.1")})
		b.ReportAllocs()
		for b.Loop() {
			resp, err := f.Get(b.Context(), srv.URL)
			if err != nil || len(resp.Body) != len(body) {
				b.Fatal(err)
			}
		}
	})
	b.Run("native", func(b *testing.B) {
		c := &nethttp.Client{Transport: &nethttp.Transport{}}
		b.Cleanup(c.CloseIdleConnections)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || len(got) != len(body) {
				b.Fatal(err)
			}
		}
	})
}
