package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMetricsAddr is where /metrics is served unless METRICS_ADDR says
// otherwise: a listener of its own on the loopback interface, out of
// reach of the API's clients and of browsers' pages (no CORS headers).
const DefaultMetricsAddr = "127.0.0.1:9090"

// MetricsOnAPI, as METRICS_ADDR, serves /metrics on the API's listener
// instead (still without CORS headers): for development and tests, or
// behind a proxy that keeps /metrics private.
const MetricsOnAPI = "api"

// MetricsHandler returns the handler of /metrics for a listener of its
// own: the Prometheus text of the server's registry, with none of the
// API's middleware (no CORS headers, no rate limit, no request id).
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}))
	return mux
}
