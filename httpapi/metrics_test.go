package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
)

// requireNoCORS checks that h has no CORS header.
func requireNoCORS(t *testing.T, h http.Header) {
	t.Helper()
	for name := range h {
		require.False(t, strings.HasPrefix(strings.ToLower(name), "access-control-"), "CORS header %s on /metrics", name)
	}
}

// TestMetricsHaveNoCORSHeaders: /metrics on the API's listener
// (METRICS_ADDR=api) answers a browser page of another origin without
// CORS headers, so that the page cannot read it, while other reads keep
// theirs.
func TestMetricsHaveNoCORSHeaders(t *testing.T) {
	t.Parallel()
	inst := startEdge(t)
	r := inst.do(t, http.MethodGet, "/metrics", "", nil, "Origin", "https://elsewhere.example")
	require.Equal(t, http.StatusOK, r.Status)
	requireNoCORS(t, r.Header)
	r = inst.do(t, http.MethodGet, "/healthz", "", nil, "Origin", "https://elsewhere.example")
	require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"), "other reads are unchanged")
}

// TestMetricsElsewhereLeavesThemOffTheAPI: with MetricsElsewhere the API
// answers /metrics with 404 to every client but one on this machine that
// comes straight (no proxy's header), and MetricsHandler serves them,
// without CORS headers, and nothing else.
func TestMetricsElsewhereLeavesThemOffTheAPI(t *testing.T) {
	t.Parallel()
	inst := startEdge(t, func(c *httpapi.Config) { c.MetricsElsewhere = true })
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip"} {
		r := inst.do(t, http.MethodGet, "/metrics", "", nil, "Origin", "https://elsewhere.example", h, "for=203.0.113.7")
		requireErrorShape(t, r, http.StatusNotFound, "not_found")
	}
	r := inst.do(t, http.MethodGet, "/metrics", "", nil, "Origin", "https://elsewhere.example")
	require.Equal(t, http.StatusOK, r.Status, "a client on this machine, straight to the listener")
	require.Contains(t, string(r.Body), "capacityd_http_requests_total{")
	requireNoCORS(t, r.Header)
	// Not from this machine: the handler as a remote peer reaches it.
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = "203.0.113.7:40000"
	w := httptest.NewRecorder()
	inst.server.Handler().ServeHTTP(w, req)
	require.Equal(t, http.StatusNotFound, w.Code)

	srv := httptest.NewServer(inst.server.MetricsHandler())
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://elsewhere.example")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "capacityd_http_requests_total{")
	requireNoCORS(t, resp.Header)
	for _, path := range []string{"/", "/healthz", "/v1/activities", "/debug/pprof/"} {
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	resp, err = srv.Client().Post(srv.URL+"/metrics", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}
