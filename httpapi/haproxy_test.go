package httpapi_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/internal/testenv"
)

// clientFrom returns an HTTP client whose connections come from the
// loopback address ip, so that a proxy on 127.0.0.1 sees distinct clients.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// viewsThrough posts n views of note to base with client, sending
// forwardedFor in X-Forwarded-For when set, and returns the statuses.
func viewsThrough(t *testing.T, client *http.Client, base, note, forwardedFor string, n int) []int {
	t.Helper()
	var out []int
	for range n {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/notes/"+note+"/views", nil)
		require.NoError(t, err)
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		out = append(out, resp.StatusCode)
	}
	return out
}

// behindHAProxy starts an instance limiting note writes to a burst of 2
// per client, trusting trusted (TRUSTED_PROXIES syntax), behind HAProxy.
func behindHAProxy(t *testing.T, trusted string) (*testenv.HAProxy, *apptest.SyncBuffer) {
	t.Helper()
	inst, logs := proxiedInstance(t, trusted)
	h := testenv.StartHAProxy(t, strings.TrimPrefix(inst.URL, "http://"))
	h.WaitServersUp(t, 1)
	return h, logs
}

func TestBehindHAProxyEachClientHasItsOwnRateLimit(t *testing.T) {
	t.Parallel()
	h, logs := behindHAProxy(t, "127.0.0.1/32")
	alice, bob := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	limited := []int{200, 200, 429}

	require.Equal(t, limited, viewsThrough(t, alice, h.URL, "n1", "", 3))
	// HAProxy appends the address it saw: what a client writes itself is
	// to the left of it and never counts.
	require.Equal(t, []int{429}, viewsThrough(t, alice, h.URL, "n1", "203.0.113.9", 1))
	require.Equal(t, limited, viewsThrough(t, bob, h.URL, "n1", "", 3), "another client, another bucket")

	clients := loggedClients(t, logs.String(), "/v1/notes/:noteId/views")
	require.Contains(t, clients, "127.0.0.2")
	require.Contains(t, clients, "127.0.0.3")
	require.NotContains(t, clients, "127.0.0.1", "the proxy is not the client")
	require.NotContains(t, clients, "203.0.113.9")
}

func TestBehindHAProxyWithoutTrustEveryClientIsTheProxy(t *testing.T) {
	t.Parallel()
	h, logs := behindHAProxy(t, "")
	alice, bob := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")

	require.Equal(t, []int{200, 200, 429}, viewsThrough(t, alice, h.URL, "n1", "", 3))
	require.Equal(t, []int{429}, viewsThrough(t, bob, h.URL, "n1", "", 1), "one bucket for everyone behind the proxy")
	require.Equal(t, []int{429}, viewsThrough(t, bob, h.URL, "n1", "198.51.100.7", 1), "a forged header changes nothing")
	for _, c := range loggedClients(t, logs.String(), "/v1/notes/:noteId/views") {
		require.Equal(t, "127.0.0.1", c)
	}
}

func TestSeatStreamThroughHAProxy(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	h := testenv.StartHAProxy(t, strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://"))
	h.WaitServersUp(t, 2)
	id := a.CreateActivity(t, "proxied stream", 10)

	c := openStream(t, h.URL, id)
	require.Equal(t, "text/event-stream; charset=utf-8", c.Resp.Header.Get("Content-Type"))
	require.Equal(t, 0, c.Next(t, time.Second).seats(t).Taken)
	for i := 1; i <= 3; i++ {
		[]*apptest.Instance{a, b}[i%2].MustSignup(t, id, "u"+string(rune('0'+i)))
		c.NextTaken(t, i, time.Second)
	}
}
