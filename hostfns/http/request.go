package http

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	nethttp "net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
	"github.com/buddy-run/buddy/internal/secrets"
)

// Limits of a Request.
const (
	// DefaultMaxRequestBytes caps a request body when Policy.MaxRequestBytes is 0.
	DefaultMaxRequestBytes = 1 << 20
	// MaxRequestHeaders caps the headers a caller sets.
	MaxRequestHeaders = 64
	// MaxRequestHeaderBytes caps their names and values together.
	MaxRequestHeaderBytes = 16 << 10
)

// Methods a Request may use.
var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Methods are the HTTP methods a Request may use.
func Methods() []string { return slices.Clone(methods) }

// RequestsInWords says what a Request may be, for the descriptions of a
// network grant: "GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, with a
// body of up to 1 MiB".
func RequestsInWords() string {
	size := fmt.Sprintf("%d bytes", DefaultMaxRequestBytes)
	switch {
	case DefaultMaxRequestBytes%(1<<20) == 0:
		size = fmt.Sprintf("%d MiB", DefaultMaxRequestBytes>>20)
	case DefaultMaxRequestBytes%(1<<10) == 0:
		size = fmt.Sprintf("%d KiB", DefaultMaxRequestBytes>>10)
	}
	return strings.Join(methods[:len(methods)-1], ", ") + " or " + methods[len(methods)-1] + ", with a body of up to " + size
}

// refusedHeaders frame the request or the connection, or decide how the
// body is decoded and capped: the Fetcher sets them, a caller may not.
var refusedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Proxy-Authorization": true, "Proxy-Connection": true,
	"Expect": true, "Accept-Encoding": true,
}

// crossHostHeaders are the caller's headers a redirect to another host
// drops (as net/http's client does).
var crossHostHeaders = []string{"Authorization", "Www-Authenticate", "Cookie", "Cookie2"}

// Request is one HTTP request of a skill (buddy:host/v1.http_request).
type Request struct {
	Method string            // one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS; "" = GET
	URL    string            // checked as Get checks it
	Header map[string]string // the caller's headers; Host, Content-Length, Accept-Encoding and other framing headers are refused
	Body   []byte            // at most Policy.MaxRequestBytes
}

// Credential is a secret the Fetcher adds to requests to Hosts, after the
// destination is checked and only there: on a redirect hop to another host
// it is dropped. The value comes from the Secrets option at the request
// (never from the caller).
type Credential struct {
	Name  string        // the secret's name in the store
	Hosts []allow.Entry // where it is sent: the skill's declaration intersected with the operator's grant
	// As is "bearer" (Authorization: Bearer VALUE), "basic" (Authorization:
	// Basic base64(VALUE)), "header" (Param: VALUE) or "query" (?Param=VALUE).
	As    string
	Param string
}

// Secrets is what a Fetcher needs of buddy's secret store: the value of a
// credential for one request, and the fingerprints of every secret, to
// refuse a request carrying one where it is not granted and to take them out
// of what the caller reads back. *secrets.Store satisfies it.
type Secrets interface {
	Secret(ctx context.Context, name string) ([]byte, error)
	Redactor() *secrets.Redactor
}

// WithSecrets gives the Fetcher buddy's secret store: credentials
// (Policy.Credentials) are read from it, requests carrying a secret to a
// host it is not granted for are refused, and every secret is replaced by
// "[secret:NAME]" in what the caller gets back (body, headers, URL, error).
// A nil s keeps none.
func WithSecrets(s Secrets) Option {
	return func(f *Fetcher) {
		if s != nil {
			f.secrets = s
		}
	}
}

// credentialKey carries the function WithCredentialUse installs.
type credentialKey struct{}

// WithCredentialUse returns ctx with report, which Do calls with the name of
// every credential it adds to a request sent under ctx.
func WithCredentialUse(ctx context.Context, report func(name string)) context.Context {
	return context.WithValue(ctx, credentialKey{}, report)
}

func reportCredential(ctx context.Context, name string) {
	if report, ok := ctx.Value(credentialKey{}).(func(string)); ok {
		report(name)
	}
}

// checkCredentials validates Policy.Credentials (New).
func checkCredentials(cs []Credential) []error {
	var problems []error
	for _, c := range cs {
		bad := func(format string, args ...any) {
			problems = append(problems, errs.New(errs.ErrConfig, fmt.Sprintf("credential %q: ", c.Name)+fmt.Sprintf(format, args...)))
		}
		if !secrets.ValidName(c.Name) {
			bad("not a secret name")
		}
		if len(c.Hosts) == 0 {
			bad("no hosts")
		}
		for _, h := range c.Hosts {
			if !h.IsValid() || h.Any() {
				bad("host entries must be parsed hosts, not %q", h.String())
			}
		}
		switch c.As {
		case "bearer", "basic":
		case "header":
			if ck := nethttp.CanonicalHeaderKey(c.Param); !validHeaderName(c.Param) || refusedHeaders[ck] || strings.HasPrefix(ck, "Proxy-") {
				bad("header %q cannot carry it", c.Param)
			}
		case "query":
			if c.Param == "" || strings.ContainsAny(c.Param, "&=#%+ ") {
				bad("query parameter %q cannot carry it", c.Param)
			}
		default:
			bad("as %q is not bearer, basic, header or query", c.As)
		}
	}
	return problems
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// checkRequest validates what the caller set, before anything is resolved
// or sent.
func (f *Fetcher) checkRequest(r *Request) (nethttp.Header, error) {
	if r.Method == "" {
		r.Method = nethttp.MethodGet
	}
	if !slices.Contains(methods, r.Method) {
		return nil, &Error{Kind: errs.ErrInvalidInput, URL: quoteURL(r.URL), Reason: fmt.Sprintf("method %s is not allowed (only %s)", quoteMethod(r.Method), strings.Join(methods, ", "))}
	}
	if int64(len(r.Body)) > f.maxRequest {
		return nil, &Error{Kind: errs.ErrTooLarge, URL: quoteURL(r.URL), Reason: fmt.Sprintf("request body of %d bytes is over the %d-byte cap", len(r.Body), f.maxRequest)}
	}
	if len(r.Header) > MaxRequestHeaders {
		return nil, &Error{Kind: errs.ErrTooLarge, URL: quoteURL(r.URL), Reason: fmt.Sprintf("%d request headers; at most %d", len(r.Header), MaxRequestHeaders)}
	}
	h := nethttp.Header{}
	size := 0
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := r.Header[k]
		size += len(k) + len(v)
		ck := nethttp.CanonicalHeaderKey(k)
		switch {
		case !validHeaderName(k):
			return nil, &Error{Kind: errs.ErrInvalidInput, URL: quoteURL(r.URL), Reason: fmt.Sprintf("%s is not a header name", strconv.Quote(clipString(k, 64)))}
		case refusedHeaders[ck] || strings.HasPrefix(ck, "Proxy-"):
			return nil, &Error{Kind: errs.ErrInvalidInput, URL: quoteURL(r.URL), Reason: fmt.Sprintf("header %s is set by buddy, not by a skill", ck)}
		case strings.ContainsFunc(v, func(c rune) bool { return c < 0x20 && c != '\t' || c == 0x7f }):
			return nil, &Error{Kind: errs.ErrInvalidInput, URL: quoteURL(r.URL), Reason: fmt.Sprintf("header %s has a control character in its value", ck)}
		case h.Get(ck) != "":
			return nil, &Error{Kind: errs.ErrInvalidInput, URL: quoteURL(r.URL), Reason: fmt.Sprintf("header %s is set twice", ck)}
		}
		h.Set(ck, v)
	}
	if size > MaxRequestHeaderBytes {
		return nil, &Error{Kind: errs.ErrTooLarge, URL: quoteURL(r.URL), Reason: fmt.Sprintf("request headers of %d bytes are over the %d-byte cap", size, MaxRequestHeaderBytes)}
	}
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", UserAgent)
	}
	return h, nil
}

func quoteMethod(m string) string { return strconv.Quote(clipString(m, 32)) }

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// hop is what one request of a Do sends.
type hop struct {
	method string
	u      *url.URL // as checked: never holds a credential added by the Fetcher
	header nethttp.Header
	body   []byte
}

// credentials is the credential state of one Do: values read once, cleared
// when it returns.
type credentials struct {
	f      *Fetcher
	first  *url.URL // credentials go only to the host (and port) of the first hop
	values map[string][]byte
}

func (c *credentials) clear() {
	for _, v := range c.values {
		clear(v)
	}
}

// forHop returns the credentials to add to a request to u: those whose
// hosts allow u's host and port, when u is on the first hop's host and port.
func (c *credentials) forHop(u *url.URL) []Credential {
	if len(c.f.credentials) == 0 || !sameHost(u, c.first) {
		return nil
	}
	host, ip, err := normalizeHost(u.Hostname(), len(u.Host) > 0 && u.Host[0] == '[')
	if err != nil {
		return nil
	}
	port := portOf(u)
	var out []Credential
	for _, cr := range c.f.credentials {
		for _, e := range cr.Hosts {
			if e.Allows(host, ip, port) {
				out = append(out, cr)
				break
			}
		}
	}
	return out
}

// grantedFor reports whether the credential name may be sent to u.
func (c *credentials) grantedFor(name string, u *url.URL) bool {
	for _, cr := range c.forHop(u) {
		if cr.Name == name {
			return true
		}
	}
	return false
}

// value reads a credential's value, once per Do.
func (c *credentials) value(ctx context.Context, name string) ([]byte, error) {
	if v, ok := c.values[name]; ok {
		return v, nil
	}
	v, err := c.f.secrets.Secret(ctx, name)
	if err != nil {
		return nil, err
	}
	if c.values == nil {
		c.values = map[string][]byte{}
	}
	c.values[name] = v
	return v, nil
}

func sameHost(a, b *url.URL) bool {
	return strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a) == portOf(b)
}

func portOf(u *url.URL) uint16 {
	if p := u.Port(); p != "" {
		n, _ := strconv.ParseUint(p, 10, 16)
		return uint16(n)
	}
	return defaultPort(u.Scheme)
}

// apply adds the credentials to the request about to be sent to h.u, and
// returns their names; the caller's own value of a header a credential
// sets is replaced.
func (c *credentials) apply(ctx context.Context, h hop, req *nethttp.Request) ([]string, error) {
	var names []string
	for _, cr := range c.forHop(h.u) {
		v, err := c.value(ctx, cr.Name)
		if err != nil {
			return nil, &Error{Kind: kindOf(err), URL: displayURL(h.u), Reason: fmt.Sprintf("credential %q: %s", cr.Name, reasonOf(err))}
		}
		names = append(names, cr.Name)
		switch cr.As {
		case "bearer":
			req.Header.Set("Authorization", "Bearer "+string(v))
		case "basic":
			req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString(v))
		case "header":
			req.Header.Set(cr.Param, string(v))
		case "query":
			req.URL.RawQuery = withParam(req.URL.RawQuery, cr.Param, string(v))
		}
		reportCredential(ctx, cr.Name)
	}
	return names, nil
}

// plainKey marks the dial of a hop that carries credentials over http: the
// names of those credentials.
type plainKey struct{}

// plainRefusal says why addr may not be sent the credentials of a hop over
// http, "" when it may: only a loopback address may, since anything on
// the path to another one reads a request in clear text.
func plainRefusal(ctx context.Context, addr netip.Addr) string {
	names, ok := ctx.Value(plainKey{}).([]string)
	if !ok || addr.Unmap().IsLoopback() {
		return ""
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return fmt.Sprintf("the credential %s would go in clear text (http) to %s, which is not this machine: use https", strings.Join(quoted, ", "), addr)
}

// withParam returns raw with name=value as its one parameter of that name.
func withParam(raw, name, value string) string {
	var kept []string
	for _, p := range strings.Split(raw, "&") {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); p == "" || (err == nil && uk == name) || k == name {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(append(kept, url.QueryEscape(name)+"="+url.QueryEscape(value)), "&")
}

// leaks returns the secrets a hop would carry to a host they are not granted
// for: found, in any form the redactor knows, in its URL (also
// percent-decoded), its headers or its body. bodyNames are the body's,
// found once per Do.
func (f *Fetcher) leaks(c *credentials, h hop, bodyNames []string) []string {
	r := f.redactor()
	if r.Empty() {
		return nil
	}
	found := slices.Clone(bodyNames)
	add := func(names []string) {
		for _, n := range names {
			if !slices.Contains(found, n) {
				found = append(found, n)
			}
		}
	}
	var b bytes.Buffer
	b.WriteString(h.u.String() + "\n")
	for k, vs := range h.header {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	add(r.Find(b.Bytes()))
	if un, ok := unescape(b.Bytes()); ok {
		add(r.Find(un))
	}
	var out []string
	for _, n := range found {
		if !c.grantedFor(n, h.u) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// bodyLeaks are the secrets in a request body (also percent-decoded, as a
// form body is read).
func (f *Fetcher) bodyLeaks(body []byte) []string {
	r := f.redactor()
	if r.Empty() || len(body) == 0 {
		return nil
	}
	found := r.Find(body)
	if un, ok := unescape(body); ok {
		for _, n := range r.Find(un) {
			if !slices.Contains(found, n) {
				found = append(found, n)
			}
		}
	}
	return found
}

// unescape decodes every %XX of b, leaving anything else as it is (a
// malformed escape does not stop the rest from being decoded); ok is false
// when b has none.
func unescape(b []byte) ([]byte, bool) {
	if bytes.IndexByte(b, '%') < 0 {
		return nil, false
	}
	out := make([]byte, 0, len(b))
	changed := false
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) {
			if v, err := hex.DecodeString(string(b[i+1 : i+3])); err == nil {
				out = append(out, v[0])
				i += 2
				changed = true
				continue
			}
		}
		out = append(out, b[i])
	}
	return out, changed
}

func (f *Fetcher) redactor() *secrets.Redactor {
	if f.secrets == nil {
		return nil
	}
	return f.secrets.Redactor()
}

// leakError refuses a hop that carries secrets where they are not granted,
// naming them (never their values).
func leakError(h hop, names []string, from string) error {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	what := "the secret " + quoted[0]
	if len(names) > 1 {
		what = "the secrets " + strings.Join(quoted, ", ")
	}
	return &Error{Kind: errs.ErrForbidden, URL: displayURL(h.u), Host: h.u.Hostname(),
		Reason: fmt.Sprintf("the request carries %s, which is not granted for %s", what, h.u.Host) + from}
}

// Do sends req under the Fetcher's policy, as Get does (the same checks of
// the URL, of every redirect hop and of every address dialled; one deadline
// for everything; the body capped), with the caller's method, headers and
// body. The credentials of Policy.Credentials whose hosts allow the first
// hop's host are added to it after its checks, and to later hops on the
// same host and port; a hop to another host gets none. A request that
// carries a secret (raw or encoded, in its URL, headers or body) to a host
// that secret is not granted for is refused before it is sent, naming the
// secret. Every secret is replaced by "[secret:NAME]" in the Response and
// in errors.
//
// Redirects: 301, 302 and 303 turn a request other than HEAD into a GET
// without a body; 307 and 308 keep the method and the body. A hop to
// another host drops the caller's Authorization and Cookie headers.
func (f *Fetcher) Do(ctx context.Context, req Request) (*Response, error) {
	resp, err := f.do(ctx, req, true)
	return resp, f.redactErr(err)
}

// do is Do and Get; api widens the response headers passed on.
func (f *Fetcher) do(ctx context.Context, req Request, api bool) (*Response, error) {
	header, err := f.checkRequest(&req)
	if err != nil {
		return nil, err
	}
	u, err := f.Check(req.URL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		ctx = context.WithValue(ctx, deadlineKey{}, dl)
	}
	creds := &credentials{f: f, first: u}
	defer creds.clear()
	h := hop{method: req.Method, u: u, header: header, body: req.Body}
	bodyNames := f.bodyLeaks(h.body)
	visited := map[string]bool{}
	from := "" // " (redirected from ...)" after the first hop
	for hops := 0; ; hops++ {
		visited[h.u.String()] = true
		if names := f.leaks(creds, h, bodyNames); len(names) > 0 {
			return nil, leakError(h, names, from)
		}
		resp, err := f.roundTrip(ctx, h, creds)
		if err != nil {
			err := f.fetchErr(ctx, h.u, err)
			err.Reason += from
			return nil, err
		}
		if n := headerBytes(resp.Header); n > MaxHeaderBytes {
			resp.Body.Close()
			return nil, &Error{Kind: errs.ErrTooLarge, URL: displayURL(h.u), Reason: fmt.Sprintf("response headers of %d bytes are over the %d-byte cap", n, MaxHeaderBytes) + from}
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			return f.read(ctx, h.u, resp, api)
		}
		discard(resp.Body)
		next, err := h.u.Parse(loc)
		if err != nil {
			return nil, &Error{Kind: errs.ErrUnavailable, URL: displayURL(h.u), Reason: "redirect to an invalid Location " + quoteURL(loc)}
		}
		from = " (redirected from " + displayURL(h.u) + ")"
		switch {
		case f.maxRedirects < 0:
			return nil, &Error{Kind: errs.ErrForbidden, URL: displayURL(next), Reason: "redirects are not allowed" + from}
		case hops >= f.maxRedirects:
			return nil, &Error{Kind: errs.ErrForbidden, URL: displayURL(next), Reason: fmt.Sprintf("more than %d redirects", f.maxRedirects) + from}
		}
		nu, err := f.Check(next.String())
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Reason += from
			}
			return nil, err
		}
		if h.u.Scheme == "https" && nu.Scheme != "https" {
			return nil, &Error{Kind: errs.ErrForbidden, URL: displayURL(nu), Reason: "redirect from https to http is not allowed" + from}
		}
		if visited[nu.String()] {
			return nil, &Error{Kind: errs.ErrUnavailable, URL: displayURL(nu), Reason: "redirect loop" + from}
		}
		switch resp.StatusCode {
		case nethttp.StatusMovedPermanently, nethttp.StatusFound, nethttp.StatusSeeOther:
			if h.method != nethttp.MethodGet && h.method != nethttp.MethodHead {
				h.method, h.body, bodyNames = nethttp.MethodGet, nil, nil
				h.header = h.header.Clone()
				h.header.Del("Content-Type")
			}
		}
		if !sameHost(nu, h.u) {
			h.header = h.header.Clone()
			for _, k := range crossHostHeaders {
				h.header.Del(k)
			}
		}
		h.u = nu
	}
}

// redactErr takes every secret out of an error's text: a redirect's
// Location or an upstream's message may hold one.
func (f *Fetcher) redactErr(err error) error {
	r := f.redactor()
	if err == nil || r.Empty() {
		return err
	}
	var e *Error
	if !errors.As(err, &e) {
		if red := r.Redact(err.Error()); red != err.Error() {
			return errs.New(kindOf(err), red)
		}
		return err
	}
	c := *e
	c.URL, c.Reason = r.Redact(c.URL), r.Redact(c.Reason)
	if c.Err != nil {
		if red := r.Redact(c.Err.Error()); red != c.Err.Error() {
			c.Err = errors.New(red)
		}
	}
	return &c
}

// redactResponse takes every secret out of what the caller reads back.
func (f *Fetcher) redactResponse(resp *Response) {
	r := f.redactor()
	if r.Empty() {
		return
	}
	resp.URL = r.Redact(resp.URL)
	resp.Body = r.RedactBytes(resp.Body)
	for k, v := range resp.Headers {
		resp.Headers[k] = r.Redact(v)
	}
	resp.Headers["Content-Length"] = strconv.Itoa(len(resp.Body))
}

// apiHeaders are passed on by Do besides safeHeaders: what API clients read
// (pagination, rate limits, where a created resource is).
var apiHeaders = []string{"Link", "Location", "Retry-After", "X-Ratelimit-Limit", "X-Ratelimit-Remaining",
	"X-Ratelimit-Reset", "X-Ratelimit-Used", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", "X-Request-Id"}

// kindOf is err's sentinel (internal when it has none).
func kindOf(err error) error {
	if s := errs.Sentinel(errs.KindOf(err)); s != nil {
		return s
	}
	return errs.ErrInternal
}
