package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/webhook"
)

// resolverFunc resolves names as the test says.
type resolverFunc func(host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host)
}

func TestPublicAddresses(t *testing.T) {
	t.Parallel()
	for _, a := range []string{
		"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "0.0.0.0", "0.1.2.3", "::", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0", "::127.0.0.1",
		"100.64.0.1", "192.0.0.8", "198.18.0.1", "224.0.0.1", "ff02::1", "240.0.0.1", "255.255.255.255",
		"64:ff9b::a00:1", "2002:a00:1::1",
	} {
		require.False(t, webhook.Public(netip.MustParseAddr(a)), "%s is not public", a)
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8"} {
		require.True(t, webhook.Public(netip.MustParseAddr(a)), "%s is public", a)
	}
}

func TestCheckURLRefusesNonPublicHosts(t *testing.T) {
	t.Parallel()
	g := &webhook.Guard{Resolver: resolverFunc(func(host string) ([]netip.Addr, error) {
		switch host {
		case "public.example":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		case "mixed.example": // one public, one private: refused
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}, nil
		case "loopback.example":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	})}
	check := func(raw string) error {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		return g.CheckURL(context.Background(), u)
	}
	require.NoError(t, check("https://public.example/hooks"))
	require.NoError(t, check("http://nowhere.example/"), "a host that does not resolve yet: its deliveries are checked when they dial")
	for _, raw := range []string{"https://mixed.example/", "http://loopback.example:8080/",
		"http://127.0.0.1/", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/"} {
		err := check(raw)
		require.Error(t, err, raw)
		require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err), raw)
		require.Contains(t, err.Error(), "WEBHOOK_ALLOW_PRIVATE", "the refusal names the setting that allows it")
	}
	g.AllowPrivate = true
	require.NoError(t, check("http://loopback.example:8080/"))
}

// TestClientDialsOnlyAllowedAddresses: the check at the dial sees the
// address actually dialled. A name that resolved to a public address when
// the webhook was created and to loopback now (DNS rebinding), or an IP
// literal, reaches nothing; with AllowPrivate the same request arrives.
func TestClientDialsOnlyAllowedAddresses(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	var lookups atomic.Int64
	rebinding := resolverFunc(func(string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	})
	g := &webhook.Guard{Resolver: rebinding}
	u, _ := url.Parse("http://rebind.example:" + port + "/hook")
	require.NoError(t, g.CheckURL(context.Background(), u), "public when the webhook is created")

	client := g.Client(2*time.Second, 4)
	for _, target := range []string{u.String(), srv.URL, "http://[::ffff:127.0.0.1]:" + port} {
		_, err := client.Post(target, "application/json", strings.NewReader("{}"))
		require.ErrorIs(t, err, webhook.ErrForbiddenAddress, target)
	}
	require.Zero(t, hits.Load(), "nothing reached the loopback server")

	open := (&webhook.Guard{AllowPrivate: true, Resolver: rebinding}).Client(2*time.Second, 4)
	resp, err := open.Post(u.String(), "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, hits.Load())
}

// TestClientFollowsNoRedirect: a 3xx is the attempt's answer; the place it
// points to is never asked.
func TestClientFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)

	client := (&webhook.Guard{AllowPrivate: true}).Client(2*time.Second, 4)
	resp, err := client.Post(redirector.URL, "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	require.Zero(t, hits.Load())
}
