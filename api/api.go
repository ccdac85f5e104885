// Package api holds the OpenAPI 3 description of capacityd's HTTP API,
// embedded in the binary. The service serves it at /openapi.yaml; the
// end-to-end tests check every request and response against it; docs/api.md
// is generated from it.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml: the description of every route.
//
//go:embed openapi.yaml
var OpenAPI []byte

//go:generate go run ../internal/tools/apidoc -in openapi.yaml -out ../docs/api.md
