package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

type activityRequest struct {
	Title       *string `json:"title"`
	Capacity    *int    `json:"capacity"`
	HoldSeconds *int    `json:"hold_seconds"`
	Waitlist    *bool   `json:"waitlist"`
}

func (s *Server) createActivity(c echo.Context) error {
	var req activityRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	if req.Title == nil || req.Capacity == nil {
		return capacityd.Errorf(capacityd.EInvalid, "title and capacity are required")
	}
	in := registration.NewActivity{Title: *req.Title, Capacity: *req.Capacity, Waitlist: req.Waitlist != nil && *req.Waitlist}
	if req.HoldSeconds != nil {
		if *req.HoldSeconds == 0 {
			return capacityd.Errorf(capacityd.EInvalid, "hold_seconds must be between %d and %d",
				registration.MinHoldSeconds, registration.MaxHoldSeconds)
		}
		in.HoldSeconds = *req.HoldSeconds
	}
	a, err := s.regs.CreateActivity(c.Request().Context(), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/activities/"+a.ID)
	return writeJSON(c, http.StatusCreated, a)
}

func activityID(c echo.Context) (string, error) {
	return pathID(c, "id", "a", registration.ActivityNotFound)
}

func (s *Server) getActivity(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	a, err := s.regs.GetActivity(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a)
}

func (s *Server) patchActivity(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	var req activityRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	a, err := s.regs.UpdateActivity(c.Request().Context(), id, registration.ActivityPatch{
		Title: req.Title, Capacity: req.Capacity, HoldSeconds: req.HoldSeconds, Waitlist: req.Waitlist,
	}, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a)
}

func (s *Server) seats(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	st, err := s.cfg.Seats(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, st)
}
