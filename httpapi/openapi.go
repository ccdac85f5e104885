package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd/api"
)

// contentTypeOpenAPI is the media type of the API description.
const contentTypeOpenAPI = "application/yaml; charset=utf-8"

// registerAPIDescription serves the API description at /openapi.yaml and
// holds every request to the query parameters the description declares:
// one a route does not take is refused with invalid_request (see
// queryParams).
func (s *Server) registerAPIDescription(e *echo.Echo) {
	e.Use((&queryGuard{}).middleware)
	e.GET("/openapi.yaml", serveAPIDescription)
}

// serveAPIDescription answers with api/openapi.yaml, cacheable for five
// minutes and readable from any origin.
func serveAPIDescription(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return c.Blob(http.StatusOK, contentTypeOpenAPI, api.OpenAPI)
}
