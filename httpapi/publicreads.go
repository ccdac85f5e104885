package httpapi

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd/registration"
)

// DefaultPublicReadLimit is the default of the per-address limit on the
// public reads that reach PostgreSQL, as ParseRateLimit reads it: far above
// what a page of widgets asks, whose reads the caches answer anyway.
const DefaultPublicReadLimit = "100:200"

// allowPublicRead takes a token of the client's public-read limit, for a
// public read about to reach PostgreSQL: a rate_limited error when none is
// left.
func (s *Server) allowPublicRead(c echo.Context) error {
	if s.limits == nil || s.limits.publicReads == nil {
		return nil
	}
	if ok, d := s.limits.publicReads.allow(clientKey(c)); !ok {
		return rateLimited(d, "reads from this address that reach the database")
	}
	return nil
}

// limitPublicReads is route middleware limiting, per client IP, public
// reads that always reach PostgreSQL (note stats).
func (s *Server) limitPublicReads(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.allowPublicRead(c); err != nil {
			return err
		}
		return next(c)
	}
}

// publicActivity returns the settings of the activity id for a public
// read, from the activity cache: an id cached as unknown is not_found
// without a query, and one that misses the cache is looked up with the
// other lookups of the moment, within the client's public-read limit.
// Without a cache it reads the database.
func (s *Server) publicActivity(c echo.Context, id string) (registration.Activity, error) {
	ctx := c.Request().Context()
	if s.cfg.Activities == nil {
		return s.regs.GetActivity(ctx, id)
	}
	return s.cfg.Activities.Get(ctx, id, func() error { return s.allowPublicRead(c) })
}

// publicPool returns the settings of the pool id for a public read, from
// the pool cache as publicActivity does for activities: within the
// client's public-read limit when they must be read from the database.
func (s *Server) publicPool(c echo.Context, id string) (registration.Pool, error) {
	if s.cfg.Pools == nil {
		if err := s.allowPublicRead(c); err != nil {
			return registration.Pool{}, err
		}
		return s.regs.GetPool(c.Request().Context(), id)
	}
	return s.cfg.Pools.Get(c.Request().Context(), id, func() error { return s.allowPublicRead(c) })
}

// requireActivity answers not_found (or rate_limited) before a public
// read of an activity's seats goes on, the way publicActivity does. A warm
// display counter shows that the activity exists: then it is not asked.
func (s *Server) requireActivity(c echo.Context, id string) error {
	if s.cfg.Activities == nil {
		return nil
	}
	if _, ok := s.cachedSeats(c, id); ok {
		return nil
	}
	_, err := s.publicActivity(c, id)
	return err
}

// cachedSeats reads the activity's seats from a warm display counter.
func (s *Server) cachedSeats(c echo.Context, id string) (registration.Seats, bool) {
	if s.cfg.CachedSeats == nil {
		return registration.Seats{}, false
	}
	return s.cfg.CachedSeats(c.Request().Context(), id)
}

// optionalAdmin reports whether a request to a public route carries a
// valid token with the admin role. A missing or invalid token makes an
// anonymous caller: the route is public.
func (s *Server) optionalAdmin(c echo.Context) bool {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || s.auth == nil {
		return false
	}
	caller, err := s.auth.VerifyContext(c.Request().Context(), strings.TrimSpace(token))
	return err == nil && caller.Admin
}
