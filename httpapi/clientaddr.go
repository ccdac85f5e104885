package httpapi

import (
	"fmt"
	"net"
	"strings"

	"github.com/labstack/echo/v4"
)

// ParseTrustedProxies reads a comma-separated list of CIDRs (a bare
// address counts as a /32 or /128) naming the reverse proxies whose
// X-Forwarded-For is believed. Empty means none.
func ParseTrustedProxies(s string) ([]*net.IPNet, error) {
	var nets []*net.IPNet
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			ip := net.ParseIP(part)
			if ip == nil {
				return nil, fmt.Errorf("want CIDRs such as 10.0.0.0/8, got %q", part)
			}
			bits := 128
			if ip.To4() != nil {
				bits = 32
			}
			part = fmt.Sprintf("%s/%d", part, bits)
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return nil, fmt.Errorf("want CIDRs such as 10.0.0.0/8, got %q", part)
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// clientAddrExtractor returns how the client address of a request is found.
// With no trusted proxies it is the connection's peer, whatever the
// headers say. Otherwise X-Forwarded-For is read from the right, skipping
// the addresses of trusted proxies, and only when the peer itself is one:
// nothing else is trusted (not loopback, link-local or private ranges, which
// echo trusts by default), so a forged header from any other peer changes
// nothing.
func clientAddrExtractor(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
