package http

import (
	"context"
	"errors"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/buddy-run/buddy/internal/base/errs"
)

// Target is what a Get of one URL would contact, found by Inspect without
// sending anything: the URL's static check and the one lookup of its host
// that the dialer makes, each address judged as the dialer judges it.
type Target struct {
	URL    string // canonical (what Get fetches), or the URL as given when it does not parse
	Scheme string
	Host   string // normalised
	Port   uint16 // effective: 80 or 443 when the URL names none
	// Addresses are what the host resolves to now (an IP literal: itself),
	// sorted, each with why it would be refused ("" = allowed).
	Addresses []Address
	// Refused, when not "", is why Get would refuse the URL before sending
	// anything: the static check, or an address refused for this host (a
	// name with any refused address is refused outright).
	Refused string
	// Unresolved, when not "", is why the host did not resolve now (Get
	// would fail as unavailable, or resolve differently later).
	Unresolved string
}

// Address is one address a host resolves to.
type Address struct {
	IP      netip.Addr
	Refused string
}

// Inspect resolves what a Get of rawURL would contact first (redirects are
// checked as they come, at call time). Policy refusals are in
// Target.Refused; an error is returned only for a canceled ctx.
func (f *Fetcher) Inspect(ctx context.Context, rawURL string) (Target, error) {
	t := Target{URL: rawURL}
	u, err := f.Check(rawURL)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			t.Host = e.Host
		}
		if errors.Is(err, errs.ErrForbidden) {
			t.Refused = reasonOf(err)
		} else {
			t.Unresolved = reasonOf(err)
		}
		return t, nil
	}
	t.URL, t.Scheme = u.String(), u.Scheme
	host, ip, err := normalizeHost(u.Hostname(), len(u.Host) > 0 && u.Host[0] == '[')
	if err != nil {
		t.Refused = reasonOf(err)
		return t, nil
	}
	t.Host, t.Port = host, defaultPort(u.Scheme)
	if p := u.Port(); p != "" {
		n, _ := strconv.ParseUint(p, 10, 16)
		t.Port = uint16(n)
	}
	_, local := f.match(host, ip, t.Port)
	lctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	cands, err := f.lookup(lctx, host, ip)
	if err := ctx.Err(); err != nil {
		return t, err
	}
	if err != nil {
		if errors.Is(err, errs.ErrForbidden) {
			t.Refused = reasonOf(err)
		} else {
			t.Unresolved = reasonOf(err)
		}
		return t, nil
	}
	for _, c := range SortAddrs(cands) {
		a := Address{IP: c, Refused: f.addrRefusal(c, local)}
		if a.Refused != "" && t.Refused == "" {
			t.Refused = reasonOf(&Error{Kind: errs.ErrForbidden, URL: t.URL, Host: host, Addr: c, Reason: a.Refused})
		}
		t.Addresses = append(t.Addresses, a)
	}
	return t, nil
}

// SortAddrs returns the distinct addresses of as in ascending order, so that
// two lookups returning the same set in another order compare equal.
func SortAddrs(as []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		dup := false
		for _, b := range out {
			if a == b {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, a)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Less(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// contactKey carries the function WithContacts installs.
type contactKey struct{}

// WithContacts returns ctx with report, which Get calls with the host and the
// address of every connection it opens under ctx (each redirect hop too).
func WithContacts(ctx context.Context, report func(host string, addr netip.AddrPort)) context.Context {
	return context.WithValue(ctx, contactKey{}, report)
}

// traceContacts makes the connection a request to u gets (new or reused)
// reported to the function WithContacts put in ctx, if any.
func traceContacts(ctx context.Context, u *url.URL) context.Context {
	report, ok := ctx.Value(contactKey{}).(func(string, netip.AddrPort))
	if !ok {
		return ctx
	}
	host := u.Hostname()
	if h, _, err := normalizeHost(host, strings.Contains(host, ":")); err == nil {
		host = h
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if ap, err := netip.ParseAddrPort(info.Conn.RemoteAddr().String()); err == nil {
				report(host, netip.AddrPortFrom(canonicalAddr(ap.Addr()), ap.Port()))
			}
		},
	})
}

// reasonOf is an error's text without its leading kind ("forbidden: "): the
// gate names the kind itself.
func reasonOf(err error) string {
	msg := err.Error()
	var e *Error
	if errors.As(err, &e) && e.Kind != nil {
		msg = strings.TrimPrefix(msg, e.Kind.Error()+": ")
	}
	return msg
}
