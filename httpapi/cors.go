package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
)

// corsMaxAge is how long browsers may cache a preflight answer, in seconds.
const corsMaxAge = "600"

// publicWrites are the routes of the writes that need no token: the note
// buttons' views and waters.
var publicWrites = map[string]bool{"/v1/notes/:noteId/views": true, "/v1/notes/:noteId/waters": true}

// cors applies the cross-origin policy: reads (GET, the seat stream
// among them) from any origin; writes only from the same origin or one of
// allowed ("*" allows every origin), except that while allowed is empty
// the public writes come from any origin, so that the note buttons work on
// every site that includes them. A write that a browser sends from
// another origin is refused with forbidden rather than merely left
// unreadable, since simple requests reach the server without a preflight.
// Requests without an Origin header (not from a browser page) pass, and
// /metrics gets no CORS headers at all.
func cors(allowed []string) echo.MiddlewareFunc {
	writeAllowed := func(origin string, c echo.Context) bool {
		return sameOrigin(origin, c.Request()) || slices.Contains(allowed, "*") || slices.Contains(allowed, origin) ||
			(len(allowed) == 0 && publicWrites[c.Path()])
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			origin := r.Header.Get(echo.HeaderOrigin)
			if origin == "" || c.Path() == "/metrics" {
				// /metrics is for Prometheus, never for a browser page:
				// no CORS headers, so no page of another origin reads it.
				return next(c)
			}
			h := c.Response().Header()
			h.Add(echo.HeaderVary, echo.HeaderOrigin)
			method := r.Method
			preflight := method == http.MethodOptions && r.Header.Get(echo.HeaderAccessControlRequestMethod) != ""
			if preflight {
				method = r.Header.Get(echo.HeaderAccessControlRequestMethod)
			}
			read := method == http.MethodGet
			switch {
			case read:
				h.Set(echo.HeaderAccessControlAllowOrigin, "*")
			case writeAllowed(origin, c):
				h.Set(echo.HeaderAccessControlAllowOrigin, origin)
			case preflight:
				// No CORS headers: the browser will not send the write.
				return c.NoContent(http.StatusNoContent)
			default:
				return capacityd.Errorf(capacityd.EForbidden, "writes are not allowed from origin %s", safeForMessage(origin))
			}
			if !preflight {
				return next(c)
			}
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestMethod)
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestHeaders)
			if read {
				h.Set(echo.HeaderAccessControlAllowMethods, "GET")
				// Authorization: a user's own reads (a queue ticket)
				// from a page that holds the user's token.
				h.Set(echo.HeaderAccessControlAllowHeaders, "Authorization, Last-Event-ID, Cache-Control")
			} else {
				h.Set(echo.HeaderAccessControlAllowMethods, "GET, POST, PATCH, DELETE")
				h.Set(echo.HeaderAccessControlAllowHeaders, "Authorization, Content-Type, Idempotency-Key, Admission-Token")
			}
			h.Set(echo.HeaderAccessControlMaxAge, corsMaxAge)
			return c.NoContent(http.StatusNoContent)
		}
	}
}

// sameOrigin reports whether origin is the origin the request was sent to.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}
