// Package apicheck checks HTTP exchanges with capacityd against its API
// description (api/openapi.yaml), so that the description cannot drift
// from the code. Transport wraps an http.RoundTripper and checks every
// request and response that goes through it; Checker.Check checks one
// exchange and returns what is wrong.
//
// The rules:
//   - A request that keeps to the description (path, method, parameters,
//     no undeclared query parameter, body, bearer token where one is
//     required) must get a response the description documents for its
//     operation: a listed status, a listed content type, and a body (JSON
//     and YAML ones) and headers that match.
//   - A request that breaks the description must get a 4xx that the
//     operation documents, in the error shape.
//   - An unknown path must get 404 not_found; a known path with a method
//     it does not serve, 405 method_not_allowed with an Allow header.
//   - Streams (server-sent events) and other non-JSON bodies (CSV, HTML,
//     scripts, metrics) are checked by status and headers only: their
//     bodies are left unread, so a stream keeps streaming and a large
//     export is not held in memory.
//
// CORS preflights (OPTIONS) are not part of the description and pass
// unchecked.
package apicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"go.yaml.in/yaml/v3"

	"github.com/physiciansnet/capacityd/api"
)

// jsonContentType is the exact Content-Type of every JSON response.
const jsonContentType = "application/json; charset=utf-8"

// Checker checks exchanges against one API description. It is safe for
// concurrent use.
type Checker struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	defaultOnce    sync.Once
	defaultChecker *Checker
	defaultErr     error
)

// Default returns the Checker of the embedded api/openapi.yaml, loaded
// once.
func Default() (*Checker, error) {
	defaultOnce.Do(func() { defaultChecker, defaultErr = New(api.OpenAPI) })
	return defaultChecker, defaultErr
}

// New returns a Checker of the OpenAPI 3 description in spec, which must
// be valid (examples included).
func New(spec []byte) (*Checker, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("apicheck: load description: %w", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("apicheck: invalid description: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("apicheck: route description: %w", err)
	}
	return &Checker{doc: doc, router: router}, nil
}

// Violation is an exchange that breaks the description.
type Violation struct {
	Method string
	URL    string
	Status int
	// Reason says what is wrong.
	Reason string
	// Body is the start of the response body, when it was read.
	Body string
}

// Error implements error.
func (v *Violation) Error() string {
	s := fmt.Sprintf("%s %s answered %d: %s", v.Method, v.URL, v.Status, v.Reason)
	if v.Body != "" {
		s += "\n\tbody: " + v.Body
	}
	return s
}

// Check checks one exchange: req with its body reqBody, and resp, whose
// body is respBody when it was read (JSON and YAML responses) and nil when
// it was not. It returns nil when the exchange keeps to the description.
func (c *Checker) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	if req.Method == http.MethodOptions {
		return nil
	}
	fail := func(format string, args ...any) error {
		v := &Violation{Method: req.Method, URL: req.URL.RequestURI(), Status: resp.StatusCode, Reason: fmt.Sprintf(format, args...)}
		if respBody != nil {
			v.Body = shorten(string(respBody))
		}
		return v
	}
	route, pathParams, err := c.findRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return c.checkRoutingError(req, resp, respBody, http.StatusNotFound, "NotFoundError", fail)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return c.checkRoutingError(req, resp, respBody, http.StatusMethodNotAllowed, "MethodNotAllowedError", fail)
	case err != nil:
		return fail("route: %v", err)
	}
	// The router hands path parameters on as they are in the URL; the
	// server reads them decoded ("%4E" is "N").
	for k, v := range pathParams {
		if dec, err := url.PathUnescape(v); err == nil {
			pathParams[k] = dec
		}
	}

	reqErr := c.checkRequest(req, reqBody, route, pathParams)
	if reqErr != nil && (resp.StatusCode < 400 || resp.StatusCode >= 500) {
		return fail("the request breaks the description (%v) but was not refused with a 4xx", reqErr)
	}
	if err := c.checkResponse(req, reqBody, route, pathParams, resp, respBody); err != nil {
		if reqErr != nil {
			return fail("%v (the request broke the description: %v)", err, reqErr)
		}
		return fail("%v", err)
	}
	return nil
}

// findRoute finds the described route of req. A path with an empty
// segment where a path parameter stands ("/v1/notes//views") names a
// described route with a malformed parameter, not an unknown path: it is
// routed with a blank in that place, which no parameter accepts.
func (c *Checker) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	route, params, err := c.router.FindRoute(withBody(req, nil))
	if !errors.Is(err, routers.ErrPathNotFound) || !strings.Contains(req.URL.Path, "//") {
		return route, params, err
	}
	alt := withBody(req, nil)
	u := *req.URL
	u.Path = strings.ReplaceAll(u.Path, "//", "/ /")
	u.RawPath = ""
	alt.URL = &u
	if route, params, altErr := c.router.FindRoute(alt); altErr == nil {
		return route, params, nil
	}
	return route, params, err
}

// checkRoutingError checks the answer to a request the description does
// not route: status want, the error shape schema, and Allow on 405.
func (c *Checker) checkRoutingError(req *http.Request, resp *http.Response, respBody []byte, want int, schema string, fail func(string, ...any) error) error {
	if resp.StatusCode != want {
		return fail("the description has no %s %s: want %d", req.Method, req.URL.Path, want)
	}
	if want == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
		return fail("405 without an Allow header")
	}
	if req.Method == http.MethodHead {
		return nil
	}
	if err := checkJSONContentType(resp.Header); err != nil {
		return fail("%v", err)
	}
	if err := c.validateJSON(schema, respBody); err != nil {
		return fail("%v", err)
	}
	return nil
}

// checkRequest returns why the request breaks the description, or nil.
func (c *Checker) checkRequest(req *http.Request, body []byte, route *routers.Route, pathParams map[string]string) error {
	if err := checkQueryNames(req, route); err != nil {
		return err
	}
	opts := &openapi3filter.Options{SkipSettingDefaults: true, AuthenticationFunc: checkBearer}
	opts.WithCustomSchemaErrorFunc(schemaErrorMessage)
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: withBody(req, body), PathParams: pathParams, Route: route, Options: opts,
	})
}

// checkQueryNames refuses query parameters the operation does not declare.
func checkQueryNames(req *http.Request, route *routers.Route) error {
	for name := range req.URL.Query() {
		if route.Operation.Parameters.GetByInAndName(openapi3.ParameterInQuery, name) == nil &&
			route.PathItem.Parameters.GetByInAndName(openapi3.ParameterInQuery, name) == nil {
			return fmt.Errorf("query parameter %q is not declared", name)
		}
	}
	return nil
}

// checkBearer accepts a request that sends "Authorization: Bearer <token>";
// whether the token is valid is the server's business.
func checkBearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return in.NewError(errors.New("no bearer token"))
	}
	return nil
}

// checkResponse returns why the response breaks the operation's
// description, or nil.
func (c *Checker) checkResponse(req *http.Request, reqBody []byte, route *routers.Route, pathParams map[string]string,
	resp *http.Response, respBody []byte) error {
	ref := route.Operation.Responses.Status(resp.StatusCode)
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("status %d is not documented for %s %s", resp.StatusCode, route.Method, route.Path)
	}
	if req.Method == http.MethodHead {
		return nil
	}
	declared := ref.Value.Content
	ctype := resp.Header.Get("Content-Type")
	switch {
	case len(declared) == 0:
		if len(respBody) > 0 {
			return fmt.Errorf("status %d has no body in the description, but one was sent", resp.StatusCode)
		}
	case declared.Get(ctype) == nil:
		return fmt.Errorf("Content-Type %q is not documented for status %d", ctype, resp.StatusCode)
	case isJSON(ctype):
		if err := checkJSONContentType(resp.Header); err != nil {
			return err
		}
	case isYAML(ctype):
		// A YAML body is described as text (a string schema): it must
		// be a YAML document; its schema checks nothing more.
		if err := checkYAML(respBody); err != nil {
			return err
		}
		respBody = nil
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: respBody == nil}
	opts.WithCustomSchemaErrorFunc(schemaErrorMessage)
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: withBody(req, reqBody), PathParams: pathParams, Route: route,
		},
		Status:  resp.StatusCode,
		Header:  resp.Header,
		Options: opts,
	}
	input.SetBodyBytes(respBody)
	return openapi3filter.ValidateResponse(context.Background(), input)
}

// validateJSON validates body against the named component schema.
func (c *Checker) validateJSON(schema string, body []byte) error {
	ref := c.doc.Components.Schemas[schema]
	if ref == nil {
		return fmt.Errorf("no schema %s in the description", schema)
	}
	v, err := decodeJSON(body)
	if err != nil {
		return err
	}
	if err := ref.Value.VisitJSON(v, openapi3.SetSchemaErrorMessageCustomizer(schemaErrorMessage)); err != nil {
		return fmt.Errorf("body does not match %s: %w", schema, err)
	}
	return nil
}

// schemaErrorMessage says where a value breaks a schema and why, without
// the schema itself.
func schemaErrorMessage(err *openapi3.SchemaError) string {
	at := "/" + strings.Join(err.JSONPointer(), "/")
	if err.Origin != nil {
		return fmt.Sprintf("at %s: %v", at, err.Origin)
	}
	msg := fmt.Sprintf("at %s: %s", at, err.Reason)
	switch err.Value.(type) {
	case map[string]any, []any:
	default:
		v, _ := json.Marshal(err.Value)
		msg += fmt.Sprintf(" (value %s)", shorten(string(v)))
	}
	return msg
}

// checkJSONContentType requires the exact JSON Content-Type.
func checkJSONContentType(h http.Header) error {
	if got := h.Get("Content-Type"); got != jsonContentType {
		return fmt.Errorf("Content-Type %q, want %q", got, jsonContentType)
	}
	return nil
}

// readsBody reports whether a response of this Content-Type is read and
// checked whole: JSON and YAML are; streams, CSV, HTML, scripts and
// metrics are not.
func readsBody(ctype string) bool {
	mt, _, _ := mime.ParseMediaType(ctype)
	return mt == "application/json" || mt == "application/yaml"
}

func isYAML(ctype string) bool {
	mt, _, _ := mime.ParseMediaType(ctype)
	return mt == "application/yaml"
}

// checkYAML returns why body is not one YAML document, or nil.
func checkYAML(body []byte) error {
	var doc any
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("body is not YAML: %w", err)
	}
	if doc == nil {
		return errors.New("YAML body is empty")
	}
	return nil
}

func isJSON(ctype string) bool {
	mt, _, _ := mime.ParseMediaType(ctype)
	return mt == "application/json"
}

// withBody returns a shallow copy of req that reads body.
func withBody(req *http.Request, body []byte) *http.Request {
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return r
}

func shorten(s string) string {
	if len(s) > 500 {
		return s[:500] + "…"
	}
	return s
}

// decodeJSON decodes a JSON body the way schema validation expects it.
func decodeJSON(body []byte) (any, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return v, nil
}
