package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// Defaults of the queue settings a request leaves out.
const (
	defaultTokenSeconds  = 120
	defaultAbsentSeconds = 60
)

// queueRequest is an activity's queue as a request sends it: the rate and
// the cap are required, the token's and the absence's seconds default.
type queueRequest struct {
	AdmitPerSecond *int `json:"admit_per_second"`
	MaxAdmitted    *int `json:"max_admitted"`
	TokenSeconds   *int `json:"token_seconds"`
	AbsentSeconds  *int `json:"absent_seconds"`
}

// onSaleFields decodes the request's signup window and queue: nil when
// absent, a nil inner value when null.
func (r activityRequest) onSaleFields() (opens, closes **time.Time, queue **registration.QueueSettings, err error) {
	if opens, err = nullableField[time.Time](r.OpensAt, "opens_at", "a time (RFC 3339)"); err != nil {
		return nil, nil, nil, err
	}
	if closes, err = nullableField[time.Time](r.ClosesAt, "closes_at", "a time (RFC 3339)"); err != nil {
		return nil, nil, nil, err
	}
	q, err := nullableField[queueRequest](r.Queue, "queue", "an object")
	if err != nil || q == nil {
		return opens, closes, nil, err
	}
	var settings *registration.QueueSettings
	if *q != nil {
		in := **q
		if in.AdmitPerSecond == nil || in.MaxAdmitted == nil {
			return nil, nil, nil, capacityd.Errorf(capacityd.EInvalid, "queue.admit_per_second and queue.max_admitted are required")
		}
		settings = &registration.QueueSettings{AdmitPerSecond: *in.AdmitPerSecond, MaxAdmitted: *in.MaxAdmitted,
			TokenSeconds: defaultTokenSeconds, AbsentSeconds: defaultAbsentSeconds}
		if in.TokenSeconds != nil {
			settings.TokenSeconds = *in.TokenSeconds
		}
		if in.AbsentSeconds != nil {
			settings.AbsentSeconds = *in.AbsentSeconds
		}
	}
	return opens, closes, &settings, nil
}

// nullableField decodes a field that may be absent (nil), null (a nil
// inner value) or a value of type T (what says which, for the error).
func nullableField[T any](raw json.RawMessage, name, what string) (**T, error) {
	if raw == nil {
		return nil, nil
	}
	var v *T
	if !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var x T
		if err := dec.Decode(&x); err != nil {
			return nil, capacityd.Errorf(capacityd.EInvalid, "field %q must be %s or null", name, what)
		}
		v = &x
	}
	return &v, nil
}

// deref returns the inner value of a decoded nullable field (nil when
// absent or null).
func deref[T any](p **T) *T {
	if p == nil {
		return nil
	}
	return *p
}

func (s *Server) joinQueue(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	// The body is empty or an empty object: anything else is refused.
	if err := decodeJSON(c, &struct{}{}, true); err != nil {
		return err
	}
	t, err := s.cfg.Queues.Join(c.Request().Context(), id, callerOf(c).UserID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, t)
}

func (s *Server) myQueueTicket(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	t, err := s.cfg.Queues.Me(c.Request().Context(), id, callerOf(c).UserID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, t)
}
