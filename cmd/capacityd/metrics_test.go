package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

func TestMetricsAddrSetting(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, httpapi.DefaultMetricsAddr, c.MetricsAddr, "a listener of its own by default")
	require.True(t, c.App.HTTP.MetricsElsewhere, "the API serves no /metrics then")
	require.True(t, strings.HasPrefix(c.MetricsAddr, "127.0.0.1:"), "on the loopback interface by default")

	env["METRICS_ADDR"] = "api"
	c, err = loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, httpapi.MetricsOnAPI, c.MetricsAddr)
	require.False(t, c.App.HTTP.MetricsElsewhere)
	c, err = loadConfig("serve", serveSettings, []string{"--metrics-addr", ":9464"}, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, ":9464", c.MetricsAddr, "the flag overrides the environment")

	for _, bad := range []string{"9090", "API", "off", "http://127.0.0.1:9090"} {
		_, err := loadConfig("serve", serveSettings, []string{"--metrics-addr", bad}, envOf(env), io.Discard, nil)
		require.ErrorContains(t, err, "METRICS_ADDR (--metrics-addr): want host:port", bad)
	}
}

// TestMetricsOnTheirOwnListener starts capacityd with METRICS_ADDR: its
// metrics are served there, without CORS headers whatever the Origin, and
// the API's listener has no /metrics.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	p := apptest.StartProcess(t, testenv.NewDatabase(t), testenv.RedisURL(), "METRICS_ADDR="+metricsAddr)

	r, err := apptest.Do(http.MethodGet, p.URL+"/metrics", "", nil, "Origin", "https://elsewhere.example", "X-Forwarded-For", "203.0.113.7")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, r.Status, "no /metrics on the API's listener through a proxy: %s", r.Body)
	require.Equal(t, "not_found", r.ErrorCode())

	get := func(path string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+metricsAddr+path, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "https://elsewhere.example")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	resp, body := get("/metrics")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "capacityd_http_requests_total{")
	for name := range resp.Header {
		require.NotContains(t, strings.ToLower(name), "access-control", "no CORS headers on /metrics")
	}
	resp, _ = get("/v1/activities")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the metrics listener serves nothing else")
}
