package httpapi

import (
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/api"
)

// TestQueryParamsMatchTheDescription checks that the query parameters the
// server takes, route by route, are the ones api/openapi.yaml declares.
func TestQueryParamsMatchTheDescription(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	require.NoError(t, err)
	described := map[string][]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var names []string
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value.In == openapi3.ParameterInQuery {
					names = append(names, p.Value.Name)
				}
			}
			if len(names) > 0 {
				slices.Sort(names)
				described[routeKey(method, path)] = names
			}
		}
	}
	taken := map[string][]string{}
	for key, names := range queryParams {
		taken[key] = slices.Sorted(slices.Values(names))
	}
	require.Equal(t, described, taken)
}

func TestRouteKeyReadsBothNotations(t *testing.T) {
	require.Equal(t, "GET /v1/activities/{}/registrations.csv", routeKey("GET", "/v1/activities/:id/registrations.csv"))
	require.Equal(t, "GET /v1/activities/{}/registrations.csv", routeKey("GET", "/v1/activities/{id}/registrations.csv"))
	require.Equal(t, "POST /v1/notes/{}/views", routeKey("POST", "/v1/notes/:noteId/views"))
	require.Equal(t, "GET /demo", routeKey("GET", "/demo"))
}
