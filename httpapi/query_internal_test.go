package httpapi

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
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

// TestCheckQuerySaysWhatIsWrong: an unknown parameter is named before a
// repeated one, and each message lists the names in order.
func TestCheckQuerySaysWhatIsWrong(t *testing.T) {
	allowed := []string{"limit", "cursor"}
	for _, tc := range []struct {
		query   string
		allowed []string
		message string // "" for none
	}{
		{query: "limit=1&cursor=x", allowed: allowed},
		{query: "", allowed: nil},
		{query: "b=1&a=2", allowed: allowed, message: "unknown query parameter a, b: this route takes limit, cursor"},
		{query: "a=1", allowed: nil, message: "unknown query parameter a: this route takes none"},
		{query: "limit=1&limit=2&a=1", allowed: allowed, message: "unknown query parameter a: this route takes limit, cursor"},
		{query: "limit=1&limit=2&cursor=x&cursor=y", allowed: allowed, message: "query parameter cursor, limit given more than once"},
		{query: "limit=%zz", allowed: allowed, message: "malformed query string"},
	} {
		err := checkQuery(httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil), tc.allowed)
		if tc.message == "" {
			require.NoError(t, err, tc.query)
			continue
		}
		var e *capacityd.Error
		require.ErrorAs(t, err, &e, tc.query)
		require.Equal(t, capacityd.EInvalid, e.Code, tc.query)
		require.Equal(t, tc.message, e.Message, tc.query)
	}
}
