package httpapi

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
)

// queryParams lists, per route, the query parameters it reads. Routes
// absent from it take none. Keys are "METHOD path" with path parameters
// written as {} (see routeKey); api/openapi.yaml declares the same
// parameters, which a test checks.
var queryParams = map[string][]string{
	"GET /v1/activities":                      {"limit", "cursor"},
	"GET /v1/pools":                           {"limit", "cursor"},
	"GET /v1/series":                          {"limit", "cursor"},
	"GET /v1/me/registrations":                {"limit", "cursor"},
	"GET /v1/activities/{}/registrations":     {"status", "limit", "cursor"},
	"GET /v1/activities/{}/registrations.csv": {"status"},
	"GET /v1/activities/{}/events":            {"after", "limit", "wait"},
	"GET /v1/webhooks/{}/deliveries":          {"limit"},
	"GET /v1/checkin-lists":                   {"activity_id", "limit", "cursor"},
	"GET /v1/checkin-lists/{}/checkins":       {"after", "limit"},
	"GET /v1/checkin-lists/{}/tickets":        {"cursor", "limit", "wait"},
	"GET /v1/activities/{}/attendance":        {"limit", "cursor"},
	"GET /v1/series/{}/attendance":            {"room", "risk"},
	"GET /demo":                               {"activity", "waitlist", "pool", "note"},
}

// pathParam matches a path parameter as echo (":id") or OpenAPI ("{id}")
// writes it.
var pathParam = regexp.MustCompile(`:[^/.]+|\{[^/}]*\}`)

// routeKey returns the key of queryParams for a method and a route path
// in echo's or OpenAPI's notation.
func routeKey(method, path string) string {
	return method + " " + pathParam.ReplaceAllString(path, "{}")
}

// queryGuard refuses a request to a route with a query parameter the route
// does not take, with invalid_request, as unknown body fields are. Requests
// that match no route pass on to echo's not-found and method-not-allowed
// answers.
type queryGuard struct {
	once   sync.Once
	routes map[string]bool // "METHOD path" of every registered route
}

// middleware is the echo middleware of the guard. The routes are read at
// the first request, when every route is registered.
func (g *queryGuard) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.URL.RawQuery == "" {
			return next(c)
		}
		g.once.Do(func() {
			g.routes = map[string]bool{}
			for _, rt := range c.Echo().Routes() {
				g.routes[rt.Method+" "+rt.Path] = true
			}
		})
		// The console's pages read their own queries; its way into the
		// API is guarded when the request goes through again under /v1.
		if !g.routes[r.Method+" "+c.Path()] || strings.HasPrefix(c.Path(), "/console") {
			return next(c)
		}
		if err := checkQuery(r, queryParams[routeKey(r.Method, c.Path())]); err != nil {
			return err
		}
		return next(c)
	}
}

// checkQuery returns invalid_request when the request's query is
// malformed, names a parameter not in allowed, or gives one more than once.
func checkQuery(r *http.Request, allowed []string) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	var unknown, repeated []string
	for name, values := range q {
		switch {
		case !slices.Contains(allowed, name):
			unknown = append(unknown, safeForMessage(name))
		case len(values) > 1:
			repeated = append(repeated, name)
		}
	}
	slices.Sort(unknown)
	slices.Sort(repeated)
	switch {
	case len(unknown) > 0 && len(allowed) == 0:
		return capacityd.Errorf(capacityd.EInvalid, "unknown query parameter %s: this route takes none",
			strings.Join(unknown, ", "))
	case len(unknown) > 0:
		return capacityd.Errorf(capacityd.EInvalid, "unknown query parameter %s: this route takes %s",
			strings.Join(unknown, ", "), strings.Join(allowed, ", "))
	case len(repeated) > 0:
		return capacityd.Errorf(capacityd.EInvalid, "query parameter %s given more than once", strings.Join(repeated, ", "))
	}
	return nil
}
