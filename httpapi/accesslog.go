package httpapi

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
)

// probeRoutes are polled by orchestrators and scrapers every few seconds;
// their access lines are logged at debug so they do not drown the rest.
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// accessLog is middleware that logs one line per request once it is
// answered: method, route (the pattern, not the path), status, duration,
// response bytes, request id, client address (see clientAddrExtractor) and,
// when a token was accepted, the caller's sub. Headers, query strings and
// bodies are never logged, so no token or secret can reach the log.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := routeOf(c)
		level := slog.LevelInfo
		if probeRoutes[route] {
			level = slog.LevelDebug
		}
		req, resp := c.Request(), c.Response()
		if !s.log.Enabled(req.Context(), level) {
			return nil // below the level: no line to build
		}
		// The attributes live on the stack: LogAttrs copies them into its
		// record, so a line allocates nothing of its own.
		var buf [8]slog.Attr
		attrs := append(buf[:0],
			slog.String("method", req.Method),
			slog.String("route", route),
			slog.Int("status", resp.Status),
			slog.Duration("duration", time.Since(start)),
			slog.Int64("bytes", resp.Size),
			slog.String("request_id", resp.Header().Get(echo.HeaderXRequestID)),
			slog.String("client", c.RealIP()),
		)
		if user := callerOf(c).UserID; user != "" {
			attrs = append(attrs, slog.String("user", user))
		}
		s.log.LogAttrs(req.Context(), level, "request", attrs...)
		return nil
	}
}

// routeOf returns the route pattern that matched the request, or
// "unmatched", so that logs and metrics have a bounded set of routes.
func routeOf(c echo.Context) string {
	if route := c.Path(); route != "" {
		return route
	}
	return "unmatched"
}
