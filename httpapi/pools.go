package httpapi

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// poolRequest is the body of POST /v1/pools and PATCH /v1/pools/{id}.
type poolRequest struct {
	Title    *string `json:"title"`
	Capacity *int    `json:"capacity"`
}

// poolRead is the Pool of GET /v1/pools/{id}, with the source of its seat
// numbers.
type poolRead struct {
	registration.Pool
	Source string `json:"source"`
}

// poolAnswer returns p as the API answers it: its activities a list, []
// when it has none, never null.
func poolAnswer(p registration.Pool) registration.Pool {
	if p.Activities == nil {
		p.Activities = []string{}
	}
	return p
}

func poolID(c echo.Context) (string, error) {
	return pathID(c, "id", "p", registration.PoolNotFound)
}

func (s *Server) createPool(c echo.Context) error {
	var req poolRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	if req.Title == nil || req.Capacity == nil {
		return capacityd.Errorf(capacityd.EInvalid, "title and capacity are required")
	}
	p, err := s.regs.CreatePool(c.Request().Context(), registration.NewPool{Title: *req.Title, Capacity: *req.Capacity})
	if err != nil {
		return err
	}
	if s.cfg.Pools != nil {
		s.cfg.Pools.Created(p)
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/pools/"+p.ID)
	return writeJSON(c, http.StatusCreated, poolAnswer(p))
}

// getPool serves a pool: to an admin with the authority's seat numbers,
// to anyone else with its seats from the display tier (PoolSeats), like
// an activity's. A public read reads the pool's settings from PostgreSQL,
// so it is held to the client's public-read limit.
func (s *Server) getPool(c echo.Context) error {
	id, err := poolID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if s.optionalAdmin(c) || s.cfg.PoolSeats == nil {
		p, err := s.regs.GetPool(ctx, id)
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, poolRead{Pool: poolAnswer(p), Source: registration.SourceDatabase})
	}
	p, err := s.publicPool(c, id)
	if err != nil {
		return err
	}
	st, source, err := s.cfg.PoolSeats(ctx, id)
	if err != nil {
		return err
	}
	p.Capacity, p.Taken, p.Reserved, p.Remaining = st.Capacity, st.Taken, st.Reserved, st.Remaining()
	return writeJSON(c, http.StatusOK, poolRead{Pool: poolAnswer(p), Source: source})
}

// listPools serves one page of the pools, newest first.
func (s *Server) listPools(c echo.Context) error {
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	limit, before, err := pageQuery(q, registration.PoolCursor)
	if err != nil {
		return err
	}
	page, err := s.regs.ListPools(c.Request().Context(), before, limit)
	if err != nil {
		return err
	}
	for i, p := range page.Items {
		page.Items[i] = poolAnswer(p)
	}
	return writeJSON(c, http.StatusOK, page)
}

// patchPool changes a pool's title or capacity: lowering the capacity
// below taken evicts nobody, raising it promotes from the waiting lists
// of its activities.
func (s *Server) patchPool(c echo.Context) error {
	id, err := poolID(c)
	if err != nil {
		return err
	}
	var req poolRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	p, err := s.regs.UpdatePool(c.Request().Context(), id,
		registration.PoolPatch{Title: req.Title, Capacity: req.Capacity}, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, poolAnswer(p))
}
