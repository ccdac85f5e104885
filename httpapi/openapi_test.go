package httpapi_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/api"
	"github.com/physiciansnet/capacityd/httpapi"
)

// TestAPIDescriptionIsServed checks GET /openapi.yaml: public, YAML, the
// embedded description, valid OpenAPI 3 with valid examples.
func TestAPIDescriptionIsServed(t *testing.T) {
	t.Parallel()
	inst := startEdge(t)
	r := inst.do(t, http.MethodGet, "/openapi.yaml", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "application/yaml; charset=utf-8", r.Header.Get("Content-Type"))
	require.Equal(t, api.OpenAPI, r.Body)

	r = inst.do(t, http.MethodGet, "/openapi.yaml", "", nil, "Origin", "https://elsewhere.example")
	require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(r.Body)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(loader.Context, openapi3.EnableExamplesValidation()))
}

// param matches a path parameter in echo's and OpenAPI's notations.
var param = regexp.MustCompile(`:[^/.]+|\{[^/}]*\}`)

// TestEveryRouteIsDescribed checks that every route the server serves is
// in the description, with the same method.
func TestEveryRouteIsDescribed(t *testing.T) {
	t.Parallel()
	inst := startEdge(t, func(c *httpapi.Config) { c.DemoSignups = true })
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	require.NoError(t, err)
	described := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+param.ReplaceAllString(path, "{}")] = true
		}
	}
	e, ok := inst.server.Handler().(*echo.Echo)
	require.True(t, ok)
	served := 0
	for _, rt := range e.Routes() {
		key := rt.Method + " " + param.ReplaceAllString(rt.Path, "{}")
		require.True(t, described[key], "%s is served but not described in api/openapi.yaml", key)
		served++
	}
	require.Greater(t, served, 15)
}
