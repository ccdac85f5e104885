package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// ConsoleSessions is what the edge asks of the organisers' console: its
// pages, and the caller of a request that carries a console session
// instead of a token.
type ConsoleSessions interface {
	http.Handler
	// SessionCaller is the caller of r's console session, ok false when
	// it has none. A request that changes something must also carry the
	// session's CSRF token (csrfOK).
	SessionCaller(r *http.Request) (c registration.Caller, csrfOK, ok bool, err error)
}

// consoleAPIPrefix is where the console's pages reach the API with their
// session: /console/api/v1/... is /v1/... for the session's user.
const consoleAPIPrefix = "/console/api"

// sessionCallerKey marks, in a request's context, the caller the console
// session gave it; only the edge sets it.
type sessionCallerKey struct{}

// registerConsole mounts the console's pages and its way into the API.
func (s *Server) registerConsole(e *echo.Echo, con ConsoleSessions) {
	pages := echo.WrapHandler(con)
	e.Any("/console", pages)
	e.Any("/console/*", pages)
	e.Any(consoleAPIPrefix+"/v1/*", func(c echo.Context) error { return s.consoleAPI(c, con) })
}

// consoleAPI serves an API route to a console session: the request goes
// through the API's router again, under its /v1 path, with the session's
// user as its caller, so that it meets every check a token's request
// meets. Changes need the session's CSRF token.
func (s *Server) consoleAPI(c echo.Context, con ConsoleSessions) error {
	r := c.Request()
	caller, csrfOK, ok, err := con.SessionCaller(r)
	switch {
	case err != nil:
		return err
	case !ok:
		return unauthenticated("sign in to the console first")
	case !csrfOK && r.Method != http.MethodGet && r.Method != http.MethodHead:
		return capacityd.Errorf(capacityd.EForbidden, "missing or wrong X-CSRF-Token header")
	}
	inner := r.Clone(r.Context())
	inner = inner.WithContext(contextWithSessionCaller(inner, caller))
	inner.URL.Path = strings.TrimPrefix(r.URL.Path, consoleAPIPrefix)
	inner.URL.RawPath = ""
	inner.RequestURI = inner.URL.RequestURI()
	inner.Header.Del(echo.HeaderAuthorization)
	s.echo.ServeHTTP(c.Response().Writer, inner)
	c.Response().Committed = true
	return nil
}

func contextWithSessionCaller(r *http.Request, caller registration.Caller) context.Context {
	return context.WithValue(r.Context(), sessionCallerKey{}, caller)
}
