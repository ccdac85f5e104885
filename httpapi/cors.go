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

// cors applies the cross-origin policy: reads (GET, HEAD, and the seat
// stream) from any origin; writes only from the same origin or one of
// allowed ("*" allows every origin). A write that a browser sends from
// another origin is refused with forbidden rather than merely left
// unreadable, since simple requests reach the server without a preflight.
// Requests without an Origin header (not from a browser page) pass.
func cors(allowed []string) echo.MiddlewareFunc {
	writeAllowed := func(origin string, r *http.Request) bool {
		return sameOrigin(origin, r) || slices.Contains(allowed, "*") || slices.Contains(allowed, origin)
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			origin := r.Header.Get(echo.HeaderOrigin)
			if origin == "" {
				return next(c)
			}
			h := c.Response().Header()
			h.Add(echo.HeaderVary, echo.HeaderOrigin)
			method := r.Method
			preflight := method == http.MethodOptions && r.Header.Get(echo.HeaderAccessControlRequestMethod) != ""
			if preflight {
				method = r.Header.Get(echo.HeaderAccessControlRequestMethod)
			}
			read := method == http.MethodGet || method == http.MethodHead
			switch {
			case read:
				h.Set(echo.HeaderAccessControlAllowOrigin, "*")
			case writeAllowed(origin, r):
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
				h.Set(echo.HeaderAccessControlAllowMethods, "GET, HEAD")
				h.Set(echo.HeaderAccessControlAllowHeaders, "Last-Event-ID, Cache-Control")
			} else {
				h.Set(echo.HeaderAccessControlAllowMethods, "GET, HEAD, POST, PATCH")
				h.Set(echo.HeaderAccessControlAllowHeaders, "Authorization, Content-Type, Idempotency-Key")
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
