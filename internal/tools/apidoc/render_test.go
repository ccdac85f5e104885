package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/api"
)

// TestDocsAreUpToDate fails while docs/api.md is not what api/openapi.yaml
// renders to. Run `go generate ./api` to update it.
func TestDocsAreUpToDate(t *testing.T) {
	want, err := Render(api.OpenAPI)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "api.md"))
	require.NoError(t, err)
	if string(got) != want {
		t.Fatal("docs/api.md is out of date with api/openapi.yaml: run `go generate ./api` and commit the result")
	}
}

// TestRenderCoversEveryOperationAndSchema checks that the reference names
// every route and every schema of the description.
func TestRenderCoversEveryOperationAndSchema(t *testing.T) {
	md, err := Render(api.OpenAPI)
	require.NoError(t, err)
	for _, want := range []string{
		"### `POST /v1/activities/{id}/registrations`",
		"### `GET /v1/activities/{id}/registrations.csv`",
		"### `GET /v1/activities/{id}/seats/stream`",
		"### `DELETE /v1/webhooks/{id}`",
		"### `GET /openapi.yaml`",
		"<a id=\"schema-registration\"></a>",
		"| `waitlist_position` | integer ≥ 1 or null | yes |",
		"| `expires_at` | [NullableTime](#schema-nullabletime) or null | yes |",
		"| `from` | [NullableStatus](#schema-nullablestatus) or null | yes |",
		"| 405 | `method_not_allowed` |",
		"| [`GET /v1/registrations/{id}`](#op-getregistration) | owner or admin |",
		"| [`GET /v1/me/registrations`](#op-listmyregistrations) | user |",
		"| [`GET /v1/webhooks/{id}/deliveries`](#op-listdeliveries) | admin |",
		"| [`GET /v1/activities/{id}`](#op-getactivity) | public |",
		"| [`GET /v1/pools/{id}`](#op-getpool) | public |",
		"| [`PATCH /v1/pools/{id}`](#op-updatepool) | admin |",
		"<a id=\"schema-pool\"></a>",
		"Callback `registrationEvent`: `POST {$request.body#/url}`",
	} {
		require.Contains(t, md, want)
	}
	require.False(t, strings.Contains(md, "](#schema-)"), "a link without a target")
}

func TestRenderRefusesAnInvalidDescription(t *testing.T) {
	_, err := Render([]byte("openapi: 3.0.3\ninfo: {title: x}\npaths: {}\n"))
	require.Error(t, err)
}
