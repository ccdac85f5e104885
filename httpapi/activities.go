package httpapi

import (
	"encoding/json"
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
	MaxSeats    *int    `json:"max_seats_per_registration"`
	Policy      *string `json:"waitlist_policy"`
	// Pools are the ids of the pools the activity belongs to: null or
	// absent leaves them as they are, [] leaves every pool.
	Pools *[]string `json:"pools"`
	// SeriesID is the id of the series the activity belongs to, decoded
	// by seriesField: absent leaves it as it is, null takes the activity
	// out of its series (at creation: in none).
	SeriesID json.RawMessage `json:"series_id"`
	// OpensAt, ClosesAt and Queue are decoded by onSaleFields: absent
	// leaves them as they are, null removes them.
	OpensAt  json.RawMessage `json:"opens_at"`
	ClosesAt json.RawMessage `json:"closes_at"`
	Queue    json.RawMessage `json:"queue"`
	scheduleRequest
}

// policy returns the request's waiting-list policy, nil when absent.
func (r activityRequest) policy() *registration.WaitlistPolicy {
	if r.Policy == nil {
		return nil
	}
	p := registration.WaitlistPolicy(*r.Policy)
	return &p
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
	if req.MaxSeats != nil {
		if *req.MaxSeats == 0 {
			return capacityd.Errorf(capacityd.EInvalid, "max_seats_per_registration must be between 1 and %d", registration.MaxSeatsLimit)
		}
		in.MaxSeats = *req.MaxSeats
	}
	if p := req.policy(); p != nil {
		if *p == "" {
			return capacityd.Errorf(capacityd.EInvalid, "waitlist_policy must be %q or %q", registration.PolicyStrict, registration.PolicyFill)
		}
		in.Policy = *p
	}
	if req.Pools != nil {
		in.Pools = *req.Pools
	}
	series, err := seriesField(req.SeriesID)
	if err != nil {
		return err
	}
	if series != nil {
		in.SeriesID = *series
	}
	opens, closes, queue, err := req.onSaleFields()
	if err != nil {
		return err
	}
	in.OpensAt, in.ClosesAt, in.Queue = deref(opens), deref(closes), deref(queue)
	if in.Schedule, err = req.schedule(); err != nil {
		return err
	}
	a, err := s.regs.CreateActivity(c.Request().Context(), in)
	if err != nil {
		return err
	}
	if s.cfg.Activities != nil {
		s.cfg.Activities.Created(a)
	}
	if s.cfg.Pools != nil && len(a.Pools) > 0 {
		s.cfg.Pools.Forget(a.Pools...) // they list their activities
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/activities/"+a.ID)
	return writeJSON(c, http.StatusCreated, activityAnswer(a))
}

// activityAnswer returns a as the API answers it: its pools a list, []
// when it belongs to none, never null.
func activityAnswer(a registration.Activity) registration.Activity {
	if a.Pools == nil {
		a.Pools = []string{}
	}
	return a
}

func activityID(c echo.Context) (string, error) {
	return pathID(c, "id", "a", registration.ActivityNotFound)
}

// activityRead is the Activity of GET /v1/activities/{id}, with the
// source of its seat numbers.
type activityRead struct {
	registration.Activity
	Source string `json:"source"`
}

// getActivity serves an activity: to an admin with the authority's seat
// numbers, to anyone else with its settings from the activity cache and
// its seats from the display tier, like /seats, so that public reads do
// not reach PostgreSQL unbounded.
func (s *Server) getActivity(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if s.cfg.Activities == nil || s.optionalAdmin(c) {
		a, err := s.regs.GetActivity(ctx, id)
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, activityRead{Activity: activityAnswer(a), Source: registration.SourceDatabase})
	}
	a, err := s.publicActivity(c, id)
	if err != nil {
		return err
	}
	st, err := s.cfg.Seats(ctx, id)
	if err != nil {
		return err
	}
	a.Capacity, a.Taken, a.Remaining, a.Waiting, a.Reserved = st.Capacity, st.Taken, st.Remaining, st.Waiting, st.Reserved
	return writeJSON(c, http.StatusOK, activityRead{Activity: activityAnswer(a), Source: st.Source})
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
	series, err := seriesField(req.SeriesID)
	if err != nil {
		return err
	}
	opens, closes, queue, err := req.onSaleFields()
	if err != nil {
		return err
	}
	patch := registration.ActivityPatch{
		Title: req.Title, Capacity: req.Capacity, HoldSeconds: req.HoldSeconds, Waitlist: req.Waitlist,
		MaxSeats: req.MaxSeats, Policy: req.policy(), Pools: req.Pools, SeriesID: series,
		OpensAt: registration.OptionalOf(opens), ClosesAt: registration.OptionalOf(closes), Queue: registration.OptionalOf(queue),
	}
	if err := req.scheduleRequest.patch(&patch); err != nil {
		return err
	}
	a, err := s.regs.UpdateActivity(c.Request().Context(), id, patch, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, activityAnswer(a))
}

func (s *Server) seats(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	// A warm counter answers alone; on a miss the activity must exist
	// before the counter is rebuilt from the authority.
	if st, ok := s.cachedSeats(c, id); ok {
		return writeJSON(c, http.StatusOK, seatsAnswer{Seats: st, Reserved: st.Reserved})
	}
	if s.cfg.Activities != nil {
		if _, err := s.publicActivity(c, id); err != nil {
			return err
		}
	}
	st, err := s.cfg.Seats(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, seatsAnswer{Seats: st, Reserved: st.Reserved})
}

// seatsAnswer is the seat display of GET /v1/activities/{id}/seats, with
// the seats its blocks reserve, so that taken, reserved and remaining add
// up to the capacity.
type seatsAnswer struct {
	registration.Seats
	Reserved int `json:"reserved"`
}
