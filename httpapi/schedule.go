package httpapi

import (
	"encoding/json"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// scheduleRequest is the schedule's part of an activity's body: each
// field absent (unchanged), null (removed) or a value.
type scheduleRequest struct {
	StartsAt                   json.RawMessage `json:"starts_at"`
	EndsAt                     json.RawMessage `json:"ends_at"`
	AttendancePercent          json.RawMessage `json:"attendance_percent"`
	ConfirmBy                  json.RawMessage `json:"confirm_by"`
	ReleaseNoShowsAfterMinutes json.RawMessage `json:"release_no_shows_after_minutes"`
}

// patch returns the schedule's fields as a patch's.
func (r scheduleRequest) patch(p *registration.ActivityPatch) error {
	times := []struct {
		raw  json.RawMessage
		name string
		dst  *registration.Optional[time.Time]
	}{{r.StartsAt, "starts_at", &p.StartsAt}, {r.EndsAt, "ends_at", &p.EndsAt}, {r.ConfirmBy, "confirm_by", &p.ConfirmBy}}
	for _, f := range times {
		v, err := nullableField[time.Time](f.raw, f.name, "a time (RFC 3339)")
		if err != nil {
			return err
		}
		*f.dst = registration.OptionalOf(v)
	}
	ints := []struct {
		raw  json.RawMessage
		name string
		dst  *registration.Optional[int]
	}{{r.AttendancePercent, "attendance_percent", &p.AttendancePercent},
		{r.ReleaseNoShowsAfterMinutes, "release_no_shows_after_minutes", &p.ReleaseNoShowsAfterMinutes}}
	for _, f := range ints {
		v, err := nullableField[int](f.raw, f.name, "an integer")
		if err != nil {
			return err
		}
		*f.dst = registration.OptionalOf(v)
	}
	return nil
}

// schedule returns the schedule a creation's body sets.
func (r scheduleRequest) schedule() (registration.Schedule, error) {
	var p registration.ActivityPatch
	if err := r.patch(&p); err != nil {
		return registration.Schedule{}, err
	}
	return registration.Schedule{StartsAt: p.StartsAt.Value, EndsAt: p.EndsAt.Value, ConfirmBy: p.ConfirmBy.Value,
		AttendancePercent: p.AttendancePercent.Value, ReleaseNoShowsAfterMinutes: p.ReleaseNoShowsAfterMinutes.Value}, nil
}
