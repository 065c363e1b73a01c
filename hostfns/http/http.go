// Package http is the network gate behind buddy's http_get and http_request
// host functions: an HTTP client that reaches only the hosts an operator
// allowlisted, checks every redirect hop and every address it dials, adds a
// skill's granted credentials only where they are granted, and refuses a
// request that would carry a secret anywhere else.
//
//	domains := allow.Intersect(
//		[]string{"*"}, // what the skill declares
//		[]string{"example.com", "*.wikipedia.org"}) // what the operator grants
//	f, err := http.New(http.Policy{Domains: domains})
//	if err != nil {
//		return err // errs.ErrConfig
//	}
//	defer f.CloseIdleConnections()
//
//	resp, err := f.Get(ctx, "https://en.wikipedia.org/wiki/Go")
//	// resp.Status, resp.Headers (a safe subset), resp.Body (capped)
//
//	_, err = f.Get(ctx, "http://169.254.169.254/latest/meta-data/")
//	// errors.Is(err, errs.ErrForbidden):
//	// "forbidden: http://169.254.169.254/latest/meta-data/: address 169.254.169.254 is a cloud metadata endpoint"
//
// # The allowlist
//
// [Policy.Domains] holds entries of package allow, the one grammar of
// allowlist entries ("example.com", "*.example.com", an IP literal, each with
// an optional ":port"), parsed from the operator's buddy.toml or derived by
// [allow.Intersect] from a skill's declaration and the operator's grant. The
// caller cannot pass raw strings: whether an entry may reach private addresses
// ([allow.Entry.Local]) is decided where it was parsed, by who wrote it.
//
// # The checks
//
// [Fetcher.Check] is the static check of a URL: scheme http or https, absolute
// (not scheme-relative, not opaque), no userinfo, and a host that matches the
// allowlist after normalisation. Host names are lowercased and lose one trailing
// dot; a host whose last label is numeric is an IPv4 address read the way
// browsers read it (2130706433, 0177.0.0.1, 0x7f.1 and 127.1 are all
// 127.0.0.1), and IPv4-mapped IPv6 addresses are unmapped, so an IP literal is
// allowed only when that exact address is listed, however it is written. IPv6
// zone identifiers and the deprecated IPv4-compatible form (::127.0.0.1) are
// refused. Unparseable URLs, malformed IPv4 forms (1.2.3.4.5) and bad ports
// are errs.ErrInvalidInput; every other refusal is errs.ErrForbidden.
//
// [Fetcher.Get] runs Check, then fetches with one deadline for everything
// (DNS, connect, TLS, redirects, body). It resolves each host once, through the
// [Resolver], checks every address the name resolved to and dials those
// addresses itself, so a DNS answer that changes between check and connect
// cannot redirect the connection; a [net.Dialer] Control function checks the
// address of every socket again before it connects.
//
// A host that no Local entry allows (only a wildcard, an entry a manifest
// declared, or one the intersection derived from a manifest's declaration
// under an operator's wildcard) must resolve to globally reachable addresses
// only: loopback, private (RFC 1918), link-local, CGNAT, unique-local,
// multicast, unspecified, broadcast, documentation, benchmarking and reserved
// ranges are refused, as are IPv6 forms embedding such an IPv4 address (mapped,
// NAT64, 6to4, Teredo). If any address of a name is refused, the fetch is. A
// host allowed by a Local entry (one the operator wrote exactly in buddy.toml:
// "intranet.corp", "localhost", "10.0.0.5") is trusted to be local: its
// addresses may be private. Cloud metadata endpoints
// (169.254.169.254, fd00:ec2::254, ...) are refused even then, unless the
// endpoint's address is itself a Local entry.
//
// Redirects (301, 302, 303, 307, 308) are followed by Get itself, at most
// [Policy.MaxRedirects] times. Every hop runs Check and the address checks
// again before any request is sent to it; a hop from https to http, and a hop
// back to a URL already visited, are refused. Each hop is a fresh request:
// Get sends only the headers this package sets (User-Agent "buddy/1", and
// Accept-Encoding from the transport), never a Referer or cookie; Do adds
// the caller's own headers (not to another host for Authorization and
// Cookie). No proxy is used, whatever the environment says.
//
// # Credentials and secrets
//
// [Policy.Credentials] are secrets of buddy's store ([WithSecrets]) that a
// skill declared and the operator granted for some hosts. Do and Get add
// each to a request after its checks, and only when the request goes to one
// of its hosts on the first hop's host and port: a redirect elsewhere drops
// it. Over http, a hop that carries a credential is dialled only to a
// loopback address, on a connection of its own: anywhere else the value
// would cross the network in clear text, so the hop is refused
// (errs.ErrForbidden, naming the credential) before any connection. The
// value is read from the store for that request and cleared after.
// Before every hop, the URL (also percent-decoded), the headers and the
// body are searched for every secret in the store, raw or encoded (base64,
// base64url, hex, URL escaping: see package secrets); a secret found where
// it is not granted refuses the request as errs.ErrForbidden, naming the
// secret, before anything is sent. What comes back (body, headers, final
// URL, error text) has every secret replaced by "[secret:NAME]", so that a
// server echoing a credential does not hand it to the skill.
//
// The body is read through a cap of [Policy.MaxBodyBytes] after the transport's
// gzip decoding, so a compression bomb stops at the cap; a body that is over it
// is refused with errs.ErrTooLarge without being read to the end. A
// Content-Encoding the transport did not decode (deflate, br, ...) is refused.
// Response headers over [MaxHeaderBytes] (counted as HTTP/1 lines) are refused. Only a safe subset of
// response headers reaches the caller ([Response.Headers]).
//
// # Errors
//
// Every error is an [*Error] naming the URL, and usually the host or address,
// and wrapping one of the errs kinds: ErrForbidden (a policy refusal),
// ErrInvalidInput (an unparseable URL), ErrTooLarge (body or headers over the
// cap), ErrTimeout (the deadline), ErrCanceled (the caller's context),
// ErrUnavailable (DNS failure, connection refused, TLS failure, a broken or
// looping upstream) and, from New, ErrConfig.
package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// Defaults and fixed limits.
const (
	// DefaultMaxBodyBytes is the body cap when Policy.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 5 << 20
	// DefaultTimeout is the deadline of a whole Get when Policy.Timeout is 0.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxRedirects is the redirect limit when Policy.MaxRedirects is 0.
	DefaultMaxRedirects = 5
	// MaxHeaderBytes caps the response headers of each hop.
	MaxHeaderBytes = 64 << 10
	// UserAgent is the User-Agent of every request.
	UserAgent = "buddy/1"
)

// Policy is what a Fetcher may reach and how much it may read. It is a plain
// value: New copies it.
type Policy struct {
	// Domains is the allowlist (see package allow): a host is fetched when an
	// entry allows it, and may resolve to non-public addresses only when an
	// entry that allows it is Local.
	Domains []allow.Entry
	// MaxBodyBytes caps the body after decompression; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Timeout is one deadline for DNS, connect, TLS, redirects and body; 0
	// means DefaultTimeout. A shorter deadline on the caller's context wins.
	Timeout time.Duration
	// MaxRedirects is how many redirects Get follows; 0 means
	// DefaultMaxRedirects and -1 means none (a redirect is then refused).
	MaxRedirects int
	// MaxRequestBytes caps the body of a Do; 0 means DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// Credentials are added by Do and Get to requests to their hosts
	// (request.go); they need WithSecrets.
	Credentials []Credential
}

// Resolver resolves host names; *net.Resolver satisfies it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Option configures a Fetcher in New.
type Option func(*Fetcher)

// WithResolver makes the Fetcher resolve names with r instead of
// net.DefaultResolver. A nil r keeps the default.
func WithResolver(r Resolver) Option {
	return func(f *Fetcher) {
		if r != nil {
			f.resolver = r
		}
	}
}

// WithTLSConfig makes the Fetcher use a clone of c for TLS (tests use it to
// trust an httptest server's certificate). A nil c keeps the default.
func WithTLSConfig(c *tls.Config) Option {
	return func(f *Fetcher) {
		if c != nil {
			f.tlsConfig = c.Clone()
		}
	}
}

// dialFunc dials one checked address with the Dialer that carries the Control
// check. Tests replace it to observe or redirect dials.
type dialFunc func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error)

func defaultDial(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	return d.DialContext(ctx, network, address)
}

// Fetcher fetches URLs under one Policy. It is safe for concurrent use and
// keeps idle connections for reuse; see CloseIdleConnections.
type Fetcher struct {
	entries      []allow.Entry
	maxBody      int64
	timeout      time.Duration
	maxRedirects int // -1 = none
	resolver     Resolver
	tlsConfig    *tls.Config
	dial         dialFunc
	transport    *nethttp.Transport
	// plain sends the hops that carry a credential over http: it keeps no
	// connection, so that each is dialled, and checked, for that hop.
	plain       *nethttp.Transport
	maxRequest  int64
	credentials []Credential
	secrets     Secrets
}

// New validates p and returns a Fetcher for it. An entry that did not come
// from package allow (the zero Entry) or that is "*" (a manifest's "any host
// the operator allows", meaningful only before intersection) is an
// errs.ErrConfig, as are negative limits.
func New(p Policy, opts ...Option) (*Fetcher, error) {
	f := &Fetcher{
		maxBody:      p.MaxBodyBytes,
		timeout:      p.Timeout,
		maxRedirects: p.MaxRedirects,
		resolver:     net.DefaultResolver,
		dial:         defaultDial,
		maxRequest:   p.MaxRequestBytes,
		credentials:  slices.Clone(p.Credentials),
	}
	problems := checkCredentials(p.Credentials)
	for i, e := range p.Domains {
		switch {
		case !e.IsValid():
			problems = append(problems, errs.New(errs.ErrConfig, fmt.Sprintf("network allowlist entry %d is not a parsed entry", i)))
		case e.Any():
			problems = append(problems, errs.New(errs.ErrConfig, `network allowlist entry "*" is a skill's declaration, not a grant; intersect it with the operator's list`))
		default:
			f.entries = append(f.entries, e)
		}
	}
	switch {
	case f.maxBody < 0:
		problems = append(problems, errs.New(errs.ErrConfig, fmt.Sprintf("network body cap %d is negative", f.maxBody)))
	case f.maxBody == 0:
		f.maxBody = DefaultMaxBodyBytes
	}
	switch {
	case f.timeout < 0:
		problems = append(problems, errs.New(errs.ErrConfig, fmt.Sprintf("network timeout %s is negative", f.timeout)))
	case f.timeout == 0:
		f.timeout = DefaultTimeout
	}
	switch {
	case f.maxRedirects < -1:
		problems = append(problems, errs.New(errs.ErrConfig, fmt.Sprintf("network redirect limit %d is below -1", f.maxRedirects)))
	case f.maxRedirects == 0:
		f.maxRedirects = DefaultMaxRedirects
	}
	switch {
	case f.maxRequest < 0:
		problems = append(problems, errs.New(errs.ErrConfig, fmt.Sprintf("network request body cap %d is negative", f.maxRequest)))
	case f.maxRequest == 0:
		f.maxRequest = DefaultMaxRequestBytes
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	for _, o := range opts {
		o(f)
	}
	if len(f.credentials) > 0 && f.secrets == nil {
		return nil, errs.New(errs.ErrConfig, "credentials are granted but buddy has no secret store to read them from")
	}
	if f.tlsConfig == nil {
		f.tlsConfig = &tls.Config{}
	}
	if f.tlsConfig.MinVersion == 0 {
		f.tlsConfig.MinVersion = tls.VersionTLS12
	}
	f.transport = &nethttp.Transport{
		Proxy:                  nil, // never a proxy, whatever HTTP_PROXY says
		DialContext:            f.dialContext,
		TLSClientConfig:        f.tlsConfig,
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: MaxHeaderBytes,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
	}
	f.plain = &nethttp.Transport{
		Proxy:                  nil,
		DialContext:            f.dialContext,
		MaxResponseHeaderBytes: MaxHeaderBytes,
		DisableKeepAlives:      true,
	}
	return f, nil
}

// CloseIdleConnections closes the connections kept for reuse.
func (f *Fetcher) CloseIdleConnections() {
	f.transport.CloseIdleConnections()
	f.plain.CloseIdleConnections()
}

// Response is a fetched page.
type Response struct {
	URL     string            // final URL after redirects (canonical form)
	Status  int               // HTTP status code; any status is a response, not an error
	Headers map[string]string // Content-Type, Content-Length (of Body), Content-Language, Last-Modified, ETag, Cache-Control, Expires, Date; values joined with ", "
	Body    []byte            // decoded body, at most Policy.MaxBodyBytes
}

// safeHeaders are the response headers passed on in Response.Headers.
// Content-Length is the length of the decoded Body.
var safeHeaders = []string{
	"Content-Type", "Content-Length", "Content-Language", "Last-Modified",
	"ETag", "Cache-Control", "Expires", "Date",
}

// Error is the error of Check and Get. It unwraps to its Kind (an errs
// sentinel) and to its cause, if any:
//
//	forbidden: http://10.0.0.1/: address 10.0.0.1 is private
type Error struct {
	Kind   error      // errs.ErrForbidden, errs.ErrTooLarge, errs.ErrTimeout, ...
	URL    string     // the URL or redirect hop concerned (password redacted), if known
	Host   string     // the normalised host, if known
	Addr   netip.Addr // the address refused or dialled, if any
	Reason string     // why, in words
	Err    error      // the underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.URL != "" {
		b.WriteString(": ")
		b.WriteString(e.URL)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is match both the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// deadlineKey carries the fetch deadline into the dialer: net/http dials with
// a context stripped of the request's cancellation and deadline.
type deadlineKey struct{}

// Get fetches rawURL with GET under the Fetcher's policy, following allowed
// redirects, and returns the final response with its body read and capped. A
// non-2xx status is a Response, not an error. It is Do with a GET and no
// header of the caller's (credentials granted for the host are added, and
// secrets are taken out of what it returns), and it passes on only the
// safe subset of response headers.
func (f *Fetcher) Get(ctx context.Context, rawURL string) (*Response, error) {
	resp, err := f.do(ctx, Request{Method: nethttp.MethodGet, URL: rawURL}, false)
	return resp, f.redactErr(err)
}

// headerBytes is the size of h as HTTP/1 lines ("Name: value\r\n"). The
// transport enforces MaxHeaderBytes on the wire, with a little slack under
// HTTP/2; this makes the cap the same for both.
func headerBytes(h nethttp.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

func isRedirect(status int) bool {
	switch status {
	case nethttp.StatusMovedPermanently, nethttp.StatusFound, nethttp.StatusSeeOther,
		nethttp.StatusTemporaryRedirect, nethttp.StatusPermanentRedirect:
		return true
	}
	return false
}

// discard reads a little of a redirect's body, so that the connection can be
// reused, and closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	_ = body.Close()
}

// roundTrip sends one fresh request for h: its method, body and headers
// (the caller's, and User-Agent; the transport adds Accept-Encoding), no
// cookie jar, no Referer, and the credentials granted for its host.
func (f *Fetcher) roundTrip(ctx context.Context, h hop, creds *credentials) (*nethttp.Response, error) {
	cu := *h.u
	ctx = traceContacts(ctx, h.u)
	req := (&nethttp.Request{
		Method:     h.method,
		URL:        &cu,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h.header.Clone(),
		Host:       cu.Host,
	}).WithContext(ctx)
	if len(h.body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(h.body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(h.body)), nil }
		req.ContentLength = int64(len(h.body))
	} else if h.method != nethttp.MethodGet && h.method != nethttp.MethodHead && h.method != nethttp.MethodOptions {
		req.Body = nethttp.NoBody
	}
	names, err := creds.apply(ctx, h, req)
	if err != nil {
		return nil, err
	}
	if len(names) > 0 && h.u.Scheme == "http" {
		// A credential in clear text is for this machine only: the
		// dialler refuses any address but loopback, on a connection of
		// this hop's own.
		req = req.WithContext(context.WithValue(req.Context(), plainKey{}, names))
		return f.plain.RoundTrip(req)
	}
	return f.transport.RoundTrip(req)
}

// read reads and caps the body of the final response.
func (f *Fetcher) read(ctx context.Context, u *url.URL, resp *nethttp.Response, api bool) (*Response, error) {
	defer resp.Body.Close()
	for _, ce := range resp.Header.Values("Content-Encoding") {
		if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
			return nil, &Error{Kind: errs.ErrUnavailable, URL: displayURL(u), Reason: fmt.Sprintf("unsupported Content-Encoding %q", ce)}
		}
	}
	tooLarge := func(what string) error {
		return &Error{Kind: errs.ErrTooLarge, URL: displayURL(u), Reason: fmt.Sprintf("%s over the %d-byte cap", what, f.maxBody)}
	}
	if resp.ContentLength > f.maxBody {
		return nil, tooLarge(fmt.Sprintf("body of %d bytes is", resp.ContentLength))
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength) + 1)
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, f.maxBody+1))
	if err != nil {
		return nil, f.fetchErr(ctx, u, err)
	}
	if n > f.maxBody {
		return nil, tooLarge("body is")
	}
	out := &Response{URL: u.String(), Status: resp.StatusCode, Headers: map[string]string{}, Body: buf.Bytes()}
	pass := safeHeaders
	if api {
		pass = slices.Concat(safeHeaders, apiHeaders)
	}
	for _, h := range pass {
		if vs := resp.Header.Values(h); len(vs) > 0 {
			out.Headers[h] = strings.Join(vs, ", ")
		}
	}
	out.Headers["Content-Length"] = strconv.Itoa(len(out.Body))
	f.redactResponse(out)
	return out, nil
}

// fetchErr turns a transport or body error into an *Error of the right kind.
func (f *Fetcher) fetchErr(ctx context.Context, u *url.URL, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		c := *e // the dialer's error may be seen by more than one request
		if c.URL == "" {
			c.URL = displayURL(u)
		}
		return &c
	}
	out := &Error{URL: displayURL(u), Host: u.Hostname(), Err: err}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.Kind, out.Reason, out.Err = errs.ErrTimeout, "deadline exceeded", nil
	case ctx.Err() != nil:
		out.Kind, out.Reason, out.Err = errs.ErrCanceled, "canceled", nil
	case headerTooLarge(err):
		out.Kind, out.Reason, out.Err = errs.ErrTooLarge, fmt.Sprintf("response headers over the %d-byte cap", MaxHeaderBytes), nil
	case isTimeout(err):
		out.Kind, out.Reason = errs.ErrTimeout, "timed out"
	default:
		out.Kind, out.Reason = errs.ErrUnavailable, "fetch failed"
	}
	return out
}

func headerTooLarge(err error) bool {
	s := err.Error()
	return strings.Contains(s, "response headers exceeded") || strings.Contains(s, "header list larger than")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
