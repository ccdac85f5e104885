package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// proxiedInstance starts an instance that limits note writes to a burst of
// 2 per client address, trusts the proxies given (as TRUSTED_PROXIES
// reads them) and logs access lines as JSON into the returned buffer. The
// test client reaches it from 127.0.0.1.
func proxiedInstance(t *testing.T, trusted string) (*apptest.Instance, *apptest.SyncBuffer) {
	t.Helper()
	nets, err := httpapi.ParseTrustedProxies(trusted)
	require.NoError(t, err)
	logs := &apptest.SyncBuffer{}
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		HTTP:   httpapi.Config{PublicWriteLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 2}, TrustedProxies: nets},
	}})
	return inst, logs
}

// viewStatuses posts n views of note as a client sending forwardedFor in
// X-Forwarded-For ("" for none) and returns the statuses.
func viewStatuses(t *testing.T, inst *apptest.Instance, note, forwardedFor string, n int) []int {
	t.Helper()
	var headers []string
	if forwardedFor != "" {
		headers = []string{"X-Forwarded-For", forwardedFor}
	}
	var out []int
	for range n {
		out = append(out, inst.MustDo(t, http.MethodPost, "/v1/notes/"+note+"/views", "", nil, headers...).Status)
	}
	return out
}

// loggedClients returns the client address of each access line of route.
func loggedClients(t *testing.T, logs string, route string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var l struct{ Msg, Route, Client string }
		require.NoError(t, json.Unmarshal([]byte(line), &l), line)
		if l.Msg == "request" && l.Route == route {
			out = append(out, l.Client)
		}
	}
	return out
}

func TestForwardedAddressCountsBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	inst, logs := proxiedInstance(t, "127.0.0.1/32, 10.0.0.0/8")
	ok2, limited := []int{200, 200}, []int{200, 200, 429}
	// Two clients behind the proxy get a bucket each.
	require.Equal(t, limited, viewStatuses(t, inst, "n1", "203.0.113.7", 3))
	require.Equal(t, limited, viewStatuses(t, inst, "n1", "198.51.100.9", 3))
	// The rightmost untrusted address counts: what the client wrote to the
	// left of it does not, and a chain of trusted proxies is skipped.
	require.Equal(t, ok2, viewStatuses(t, inst, "n1", "1.2.3.4, 192.0.2.1", 2))
	require.Equal(t, []int{429}, viewStatuses(t, inst, "n1", "5.6.7.8, 192.0.2.1, 10.1.2.3", 1))
	// An IPv6 client's /64 is one bucket.
	require.Equal(t, limited, viewStatuses(t, inst, "n1", "2001:db8:1:2::1", 3))
	require.Equal(t, []int{429}, viewStatuses(t, inst, "n1", "2001:db8:1:2::ffff", 1))
	// The access log names the forwarded clients.
	clients := loggedClients(t, logs.String(), "/v1/notes/:noteId/views")
	require.Contains(t, clients, "203.0.113.7")
	require.Contains(t, clients, "198.51.100.9")
	require.Contains(t, clients, "192.0.2.1")
	require.NotContains(t, clients, "1.2.3.4")
	require.NotContains(t, clients, "127.0.0.1")
}

func TestForgedForwardedForFromAnUntrustedPeerChangesNothing(t *testing.T) {
	t.Parallel()
	for name, trusted := range map[string]string{
		"no trusted proxies":         "",
		"peer not among the trusted": "10.0.0.0/8, 192.168.0.0/16, ::1/128",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inst, logs := proxiedInstance(t, trusted)
			require.Equal(t, []int{200, 200}, viewStatuses(t, inst, "n2", "203.0.113.1", 2))
			// Every forged address still lands in the peer's bucket.
			for _, forged := range []string{"203.0.113.2", "198.51.100.3, 203.0.113.4", "garbage", "::1"} {
				require.Equal(t, []int{429}, viewStatuses(t, inst, "n2", forged, 1), forged)
			}
			require.Equal(t, []int{429}, viewStatuses(t, inst, "n2", "", 1))
			for _, c := range loggedClients(t, logs.String(), "/v1/notes/:noteId/views") {
				require.Equal(t, "127.0.0.1", c)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	nets, err := httpapi.ParseTrustedProxies(" 10.0.0.0/8, 192.0.2.1 ,fd00::/8,::1,")
	require.NoError(t, err)
	var got []string
	for _, n := range nets {
		got = append(got, n.String())
	}
	require.Equal(t, []string{"10.0.0.0/8", "192.0.2.1/32", "fd00::/8", "::1/128"}, got)
	nets, err = httpapi.ParseTrustedProxies("")
	require.NoError(t, err)
	require.Empty(t, nets)
	for _, bad := range []string{"10.0.0.0/33", "example.org", "10.0.0/8", "1.2.3.4/x"} {
		_, err := httpapi.ParseTrustedProxies(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), bad)
	}
}
