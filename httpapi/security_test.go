package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDemoPageSecurityHeaders(t *testing.T) {
	t.Parallel()
	inst := startEdge(t)
	r := inst.do(t, http.MethodGet, "/demo?activity=%3Cscript%3E&note=%22onload%3D", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	csp := r.Header.Get("Content-Security-Policy")
	require.NotEmpty(t, csp)
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		require.Contains(t, csp, want)
	}
	require.NotContains(t, csp, "unsafe-inline")
	require.NotContains(t, csp, "unsafe-eval")
	require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "DENY", r.Header.Get("X-Frame-Options"))
	require.Equal(t, "no-referrer", r.Header.Get("Referrer-Policy"))
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/html"))
	// Query values of the wrong form never reach the page.
	require.NotContains(t, string(r.Body), "<script>")
	require.NotContains(t, string(r.Body), `"onload=`)
}

func TestAPIResponsesAreNoSniff(t *testing.T) {
	t.Parallel()
	inst := startEdge(t)
	for _, path := range []string{"/healthz", "/v1/activities/nope", "/v1/notes/n/stats"} {
		r := inst.do(t, http.MethodGet, path, "", nil)
		require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"), path)
		require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"), path)
	}
}
