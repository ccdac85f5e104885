package httpapi

import "github.com/labstack/echo/v4"

// noSniff is middleware that tells browsers to trust the Content-Type of
// every response (JSON stays JSON, never a script). Pages set their own,
// stricter headers (see demoPage).
func noSniff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderXContentTypeOptions, "nosniff")
		return next(c)
	}
}
