package httpapi

import (
	"net"
	"net/http"

	"github.com/labstack/echo/v4"
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

// onlyLocal serves h on the API's listener only to a client on this
// machine that connects straight to it: a loopback peer, with no header a
// proxy adds. The operator's own curl and a scraper on the host get the
// metrics there as well as on their own listener; anyone else, proxies'
// clients included, gets 404 as for a route that does not exist.
func onlyLocal(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		if err != nil || ip == nil || !ip.IsLoopback() ||
			r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" || r.Header.Get("X-Real-Ip") != "" {
			return echo.ErrNotFound
		}
		return h(c)
	}
}
