package http

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/buddy-run/buddy/hostfns/allow"
	"github.com/buddy-run/buddy/internal/base/errs"
)

// minAttempt is the least time one address of several gets to connect before
// the next is tried (as in package net).
const minAttempt = 2 * time.Second

// dialContext is the Transport's only way out. It checks the host against the
// allowlist again, resolves it once, refuses the connection if any address is
// refused for this host, and dials the addresses themselves, each through a
// Dialer whose Control function checks the socket's address one last time.
func (f *Fetcher) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	// net/http dials with a context stripped of the request's deadline; put
	// the fetch deadline back so that no dial outlives the fetch by much.
	var cancel context.CancelFunc
	if dl, ok := ctx.Value(deadlineKey{}).(time.Time); ok {
		ctx, cancel = context.WithDeadline(ctx, dl)
	} else {
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
	}
	defer cancel()

	refuse := func(host string, ip netip.Addr, why string) error {
		return &Error{Kind: errs.ErrForbidden, Host: host, Addr: ip, Reason: why}
	}
	hostname, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, refuse("", netip.Addr{}, fmt.Sprintf("dial address %q is malformed", addr))
	}
	port, ok := allow.ParsePort(portStr)
	if !ok {
		return nil, refuse(hostname, netip.Addr{}, fmt.Sprintf("dial address %q has an invalid port", addr))
	}
	host, ip, err := normalizeHost(hostname, strings.Contains(hostname, ":"))
	if err != nil {
		e := err.(*Error)
		return nil, refuse(hostname, netip.Addr{}, e.Reason)
	}
	matched, local := f.match(host, ip, port)
	if !matched {
		return nil, refuse(host, ip, fmt.Sprintf("host %s port %d is not in the allowlist", host, port))
	}

	cands, err := f.lookup(ctx, host, ip)
	if err != nil {
		return nil, err
	}
	// Every address is checked before any is dialled: a name that mixes public
	// and private answers is refused outright.
	for _, c := range cands {
		why := f.addrRefusal(c, local)
		if why == "" {
			why = plainRefusal(ctx, c)
		}
		if why != "" {
			if !ip.IsValid() {
				why += fmt.Sprintf(" (resolved from %s)", host)
			}
			return nil, refuse(host, c, why)
		}
	}

	var firstErr error
	var firstAddr netip.Addr
	for i, c := range cands {
		actx := ctx
		if left := len(cands) - i; left > 1 {
			if dl, ok := ctx.Deadline(); ok {
				part := time.Until(dl) / time.Duration(left)
				if part < minAttempt {
					part = min(minAttempt, time.Until(dl))
				}
				var acancel context.CancelFunc
				actx, acancel = context.WithTimeout(ctx, part)
				defer acancel()
			}
		}
		d := &net.Dialer{Control: f.control(c, port, local)}
		conn, err := f.dial(actx, d, network, netip.AddrPortFrom(c, port).String())
		if err == nil {
			return conn, nil
		}
		var e *Error
		if errors.As(err, &e) {
			e.Host = host
			return nil, e
		}
		if firstErr == nil {
			firstErr, firstAddr = err, c
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, f.dialErr(ctx, host, firstAddr, "connecting to "+netip.AddrPortFrom(firstAddr, port).String(), firstErr)
}

// lookup returns the addresses a dial of host (a normalised name, or the IP
// literal ip) would try: the one lookup of the name, as the resolver answers
// now. Inspect shows an approver exactly these.
func (f *Fetcher) lookup(ctx context.Context, host string, ip netip.Addr) ([]netip.Addr, error) {
	if ip.IsValid() {
		return []netip.Addr{ip}, nil
	}
	addrs, err := f.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, f.dialErr(ctx, host, netip.Addr{}, "resolving "+host, err)
	}
	var cands []netip.Addr
	for _, a := range addrs {
		na, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			return nil, &Error{Kind: errs.ErrForbidden, Host: host, Reason: fmt.Sprintf("host %s resolved to a malformed address", host)}
		}
		na = na.Unmap()
		if na.Is6() && a.Zone != "" {
			na = na.WithZone(a.Zone)
		}
		cands = append(cands, na)
	}
	if len(cands) == 0 {
		return nil, &Error{Kind: errs.ErrUnavailable, Host: host, Reason: fmt.Sprintf("host %s has no addresses", host)}
	}
	return cands, nil
}

// dialErr classifies a resolver or connect failure.
func (f *Fetcher) dialErr(ctx context.Context, host string, ip netip.Addr, what string, err error) error {
	e := &Error{Kind: errs.ErrUnavailable, Host: host, Addr: ip, Reason: what, Err: err}
	if ctx.Err() != nil || isTimeout(err) {
		e.Kind = errs.ErrTimeout
	}
	return e
}

// control returns the Dialer.Control check for one dial: the socket must be
// about to connect to exactly the address and port that were checked, and that
// address must still be allowed for the host. It is the last line of defence
// should anything between the check and the connect change the destination.
func (f *Fetcher) control(want netip.Addr, port uint16, local bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &Error{Kind: errs.ErrForbidden, Reason: fmt.Sprintf("dialled address %q is not an IP address and port", address)}
		}
		got := ap.Addr()
		if canonicalAddr(got) != canonicalAddr(want) || ap.Port() != port {
			return &Error{Kind: errs.ErrForbidden, Addr: got, Reason: fmt.Sprintf("dialled address %s is not the checked address %s", ap, netip.AddrPortFrom(want, port))}
		}
		if why := f.addrRefusal(got, local); why != "" {
			return &Error{Kind: errs.ErrForbidden, Addr: got, Reason: why}
		}
		return nil
	}
}
