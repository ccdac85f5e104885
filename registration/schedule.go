package registration

import (
	"github.com/physiciansnet/capacityd"
)

// Limits of an activity's schedule.
const (
	MaxReleaseNoShowsAfterMinutes = 240
	MaxAttendancePercent          = 100
)

// validate checks the schedule's ranges and that it ends after it starts.
func (s Schedule) validate() error {
	if s.StartsAt != nil && s.EndsAt != nil && !s.EndsAt.After(*s.StartsAt) {
		return capacityd.Errorf(capacityd.EInvalid, "ends_at must be after starts_at")
	}
	if p := s.AttendancePercent; p != nil && (*p < 1 || *p > MaxAttendancePercent) {
		return capacityd.Errorf(capacityd.EInvalid, "attendance_percent must be between 1 and %d, or null", MaxAttendancePercent)
	}
	if m := s.ReleaseNoShowsAfterMinutes; m != nil && (*m < 0 || *m > MaxReleaseNoShowsAfterMinutes) {
		return capacityd.Errorf(capacityd.EInvalid, "release_no_shows_after_minutes must be between 0 and %d, or null",
			MaxReleaseNoShowsAfterMinutes)
	}
	return nil
}

// changesSchedule reports whether the patch sets any field of the
// schedule.
func (p ActivityPatch) changesSchedule() bool {
	return p.StartsAt.Set || p.EndsAt.Set || p.ConfirmBy.Set || p.AttendancePercent.Set || p.ReleaseNoShowsAfterMinutes.Set
}

// schedule returns s with the patch's schedule fields applied.
func (p ActivityPatch) schedule(s Schedule) Schedule {
	s.StartsAt, s.EndsAt, s.ConfirmBy = p.StartsAt.Or(s.StartsAt), p.EndsAt.Or(s.EndsAt), p.ConfirmBy.Or(s.ConfirmBy)
	s.AttendancePercent = p.AttendancePercent.Or(s.AttendancePercent)
	s.ReleaseNoShowsAfterMinutes = p.ReleaseNoShowsAfterMinutes.Or(s.ReleaseNoShowsAfterMinutes)
	return s
}
