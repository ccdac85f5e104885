package httpapi_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
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

// fakeInstance is an HTTP server in the place of an instance: ready on
// /readyz, and on /junk an answer that is not HTTP, on /hangup a closed
// connection. It records the other paths it is asked for.
func fakeInstance(t *testing.T) (addr string, seen func() []string, stop func()) {
	t.Helper()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(http.StatusOK)
			return
		case "/junk", "/hangup":
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			if r.URL.Path == "/junk" {
				_, _ = buf.WriteString("this is not HTTP\r\n\r\n")
				_ = buf.Flush()
			}
			conn.Close()
			return
		}
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(paths)
	}, srv.Close
}

// proxyError is an answer of the proxy itself, checked to be in the API's
// error shape: JSON with a code and a message, and nothing else.
func proxyError(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	defer resp.Body.Close()
	require.Equal(t, status, resp.StatusCode)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&body))
	require.Equal(t, code, body.Error.Code)
	require.NotEmpty(t, body.Error.Message)
	if status >= 500 {
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
}

// TestHAProxyAnswersItsOwnErrorsInTheAPIShape runs the proxy of
// deploy/haproxy/haproxy.cfg before an instance that misbehaves: what the
// proxy answers itself (an instance's broken answer, a closed connection,
// no instance up, a path of the instances that is not for the public) is
// JSON in the API's error shape, never HAProxy's HTML page, and the proxy
// logs each request. Only a request that is not HTTP gets HAProxy's own
// page, which no errorfile replaces in HAProxy 2.6.
func TestHAProxyAnswersItsOwnErrorsInTheAPIShape(t *testing.T) {
	t.Parallel()
	addr, seen, stop := fakeInstance(t)
	h := testenv.StartHAProxy(t, addr)
	h.WaitServersUp(t, 1)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) *http.Response {
		resp, err := client.Get(h.URL + path)
		require.NoError(t, err)
		return resp
	}

	ok := get("/v1/activities/x/seats")
	ok.Body.Close()
	require.Equal(t, http.StatusNoContent, ok.StatusCode, "the rest passes")
	for _, path := range []string{"/metrics", "/metrics?x=1", "/demo", "/demo?note=n", "/demo/signups", "/%6detrics", "/Demo"} {
		proxyError(t, get(path), http.StatusNotFound, "not_found")
	}
	require.Equal(t, []string{"/v1/activities/x/seats"}, seen(), "the instance never saw a refused path")

	proxyError(t, get("/junk"), http.StatusBadGateway, "unavailable")
	proxyError(t, get("/hangup"), http.StatusBadGateway, "unavailable")

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
	require.NoError(t, err)
	_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	conn.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "text/html", resp.Header.Get("Content-Type"),
		"HAProxy 2.6 answers a request that is not HTTP before any errorfile applies (docs/deploy.md says so)")

	stop()
	h.WaitServersUp(t, 0)
	proxyError(t, get("/v1/activities/x/seats"), http.StatusServiceUnavailable, "unavailable")

	logged := h.Log(t)
	for _, line := range []string{`"GET /metrics HTTP/1.1"`, `"GET /junk HTTP/1.1"`, `"GET /v1/activities/x/seats HTTP/1.1"`, "capacityd/a is DOWN"} {
		require.Contains(t, logged, line, "the proxy logs its requests and the instances' states")
	}
}

// hangingUpInstance starts a fake instance that is ready (/readyz) and
// closes the connection of every other request unanswered, as an instance
// that crashed after doing it; arrivals counts the requests it got.
func hangingUpInstance(t *testing.T) (addr string, arrivals *atomic.Int64) {
	t.Helper()
	arrivals = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		arrivals.Add(1)
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), arrivals
}

// TestHAProxyResendsOnlyWhatIsSafeToDoTwice sends requests through the
// documented HAProxy to instances that close each connection unanswered,
// as a crash after the work was done: a note view, a signup without an
// Idempotency-Key or a PATCH reaches one instance once and gets the
// proxy's 502, since doing it again could count it twice; a read, a
// DELETE or a signup with a key is sent again to another instance.
func TestHAProxyResendsOnlyWhatIsSafeToDoTwice(t *testing.T) {
	t.Parallel()
	a, arrivedA := hangingUpInstance(t)
	b, arrivedB := hangingUpInstance(t)
	h := testenv.StartHAProxy(t, a, b)
	h.WaitServersUp(t, 2)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		method, path, key string
		resent            bool
	}{
		{http.MethodPost, "/v1/notes/n1/views", "", false},
		{http.MethodPost, "/v1/notes/n1/waters", "", false},
		{http.MethodPost, "/v1/activities/a_1/registrations", "", false},
		{http.MethodPatch, "/v1/activities/a_1", "", false},
		{http.MethodPost, "/v1/activities/a_1/registrations", "k1", true},
		{http.MethodGet, "/v1/activities/a_1/seats", "", true},
		{http.MethodDelete, "/v1/blocks/b_1", "", true},
	} {
		before := arrivedA.Load() + arrivedB.Load()
		req, err := http.NewRequest(tc.method, h.URL+tc.path, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if tc.key != "" {
			req.Header.Set("Idempotency-Key", tc.key)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		proxyError(t, resp, http.StatusBadGateway, "unavailable")
		sent := arrivedA.Load() + arrivedB.Load() - before
		if tc.resent {
			require.Greater(t, sent, int64(1), "%s %s (key %q) is sent again to another instance", tc.method, tc.path, tc.key)
		} else {
			require.Equal(t, int64(1), sent, "%s %s (key %q) reaches one instance once", tc.method, tc.path, tc.key)
		}
	}
}
