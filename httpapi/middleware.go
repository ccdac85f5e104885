package httpapi

import "github.com/labstack/echo/v4"

// composed returns h behind the route middleware mw (the first outermost),
// composed once: echo composes a route's middleware again at every request
// it serves, a closure for each.
func composed(h echo.HandlerFunc, mw ...echo.MiddlewareFunc) echo.HandlerFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}
