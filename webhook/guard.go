package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"github.com/physiciansnet/capacityd"
)

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard keeps webhook traffic away from the service's own network: a URL
// whose host resolves to a loopback, private, link-local, unspecified or
// otherwise non-public address is refused when the webhook is created, and
// every delivery's connection is checked again at the dial, against the
// address actually dialled, so a name that resolves elsewhere later (DNS
// rebinding) gets nowhere. AllowPrivate (the server's setting
// WEBHOOK_ALLOW_PRIVATE, which the refusals name) turns both checks off.
type Guard struct {
	AllowPrivate bool
	// Resolver resolves host names; nil: net.DefaultResolver.
	Resolver Resolver
}

// ErrForbiddenAddress is the error of a connection the guard refused.
var ErrForbiddenAddress = errors.New("webhook: the address is not public")

// nonPublic are the ranges netip has no predicate for: "this network",
// shared address space (carrier-grade NAT), IETF protocol assignments,
// benchmarking, reserved and broadcast, IPv4-compatible IPv6 (which covers
// :: and ::1), NAT64 (which reaches IPv4 addresses) and 6to4.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
}

// Public reports whether a is an address webhooks may reach without
// AllowPrivate. IPv4-mapped IPv6 addresses are judged as their IPv4
// address.
func Public(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified() ||
		a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

func (g *Guard) allowed(a netip.Addr) bool { return g.AllowPrivate || Public(a) }

func (g *Guard) resolver() Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

// lookup returns the addresses of host: itself when it is an IP literal.
func (g *Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	return g.resolver().LookupNetIP(ctx, "ip", host)
}

// CheckURL refuses, with invalid_request, a webhook URL whose host is or
// resolves to any address that is not public (unless AllowPrivate). A host
// that does not resolve now (a name not yet published, a DNS outage, a
// network without DNS) is accepted: every delivery checks the addresses it
// dials all the same.
func (g *Guard) CheckURL(ctx context.Context, u *url.URL) error {
	if g.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if !Public(a) {
			return capacityd.Errorf(capacityd.EInvalid,
				"field \"url\": host %q is or resolves to %s, a loopback, private, link-local or otherwise non-public address; "+
					"webhooks reach only public addresses unless the server runs with WEBHOOK_ALLOW_PRIVATE=true (for receivers on your own network or a lab)",
				safe(host), a)
		}
	}
	return nil
}

// Client returns the HTTP client of deliveries: every attempt bounded by
// timeout, connections dialled only to allowed addresses, no proxy (a
// proxy would resolve names out of the guard's sight), redirects not
// followed (a 3xx is the attempt's answer), and connections kept for
// reuse: perWebhook per webhook (its most attempts in flight) for several
// webhooks on one receiver host.
func (g *Guard) Client(timeout time.Duration, perWebhook int) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           g.dial(timeout),
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConns:          64 * perWebhook,
			MaxIdleConnsPerHost:   8 * perWebhook,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// dial is dialContext with the dialer of deliveries: connections time
// out after timeout, are kept alive, and reach only allowed addresses.
func (g *Guard) dial(timeout time.Duration) func(ctx context.Context, network, address string) (net.Conn, error) {
	return g.dialContext(&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: g.control})
}

// dialContext resolves the host itself and dials only allowed addresses,
// by address, so the name is resolved once and checked.
func (g *Guard) dialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		addrs, err := g.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
		err = fmt.Errorf("%w: %s resolves to no allowed address (WEBHOOK_ALLOW_PRIVATE=true allows private ones)", ErrForbiddenAddress, host)
		for _, a := range addrs {
			if !g.allowed(a) {
				continue
			}
			c, dialErr := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
			if dialErr == nil {
				return c, nil
			}
			err = dialErr
		}
		return nil, err
	}
}

// control checks, right before the connection is made, the address the
// socket connects to.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
	}
	if !g.allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr())
	}
	return nil
}
