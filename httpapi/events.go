package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

func (s *Server) registrationEvents(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	evs, err := s.regs.RegistrationEvents(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"items": evs})
}

// activityEvents serves the activity's event feed: the events after
// ?after=, at most ?limit=, and with ?wait= seconds an empty answer waits
// that long for the next event (a long poll, exempt from the request
// timeout, that holds no database connection while it waits). An admin
// holds at most EventWaitsPerUser long polls at once; wait=0 is not one.
func (s *Server) activityEvents(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	f := registration.EventFilter{ActivityID: id}
	if v, ok := q["after"]; ok {
		if f.After, err = strconv.ParseInt(v[0], 10, 64); err != nil || f.After < 0 {
			return capacityd.Errorf(capacityd.EInvalid, "after must be an event seq of 0 or more")
		}
	}
	if v, ok := q["limit"]; ok {
		if f.Limit, err = intParam("limit", v[0], 1, registration.MaxEventLimit); err != nil {
			return err
		}
	}
	if v, ok := q["wait"]; ok {
		secs, err := intParam("wait", v[0], 0, int(registration.MaxEventWait.Seconds()))
		if err != nil {
			return err
		}
		f.Wait = time.Duration(secs) * time.Second
	}
	if f.Wait > 0 {
		release, err := s.takeEventWaitSlot(c)
		if err != nil {
			return err
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), f.Wait+s.cfg.RequestTimeout)
	defer cancel()
	// The server's write timeout is for requests that do not wait.
	_ = http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(f.Wait + s.cfg.RequestTimeout))
	page, err := s.regs.ActivityEvents(ctx, f)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, page)
}
