package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd/registration"
)

// noSniff is middleware that tells browsers to trust the Content-Type of
// every response (JSON stays JSON, never a script). Pages set their own,
// stricter headers (see demoPage).
func noSniff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderXContentTypeOptions, "nosniff")
		return next(c)
	}
}

// clientRequestIDs is middleware that keeps a client's X-Request-Id only
// when it is well-formed (registration.ValidRequestID: 1 to 64 visible
// ASCII characters, sent once). Any other is dropped before the request id
// middleware runs, which then gives the request one of the service's own:
// what a client chooses beyond that is never logged, stored on events,
// echoed or sent in webhooks.
func clientRequestIDs(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if ids := h.Values(echo.HeaderXRequestID); len(ids) > 1 || (len(ids) == 1 && !registration.ValidRequestID(ids[0])) {
			h.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}
