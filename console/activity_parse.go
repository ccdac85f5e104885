package console

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// activityTimeLayout is a datetime-local input's value (with seconds, as a
// browser may send it, in activityTimeSeconds).
const (
	activityTimeLayout  = "2006-01-02T15:04"
	activityTimeSeconds = "2006-01-02T15:04:05"
)

// parsedActivity is the activity form's values as the domain's types; an
// empty optional field is nil ("not set").
type parsedActivity struct {
	f                                 *activityForm
	title                             string
	capacity, holdSeconds, maxSeats   *int
	waitlist, queue                   bool
	policy                            registration.WaitlistPolicy
	pools                             []string
	seriesID                          string
	opensAt, closesAt                 *time.Time
	startsAt, endsAt, confirmBy       *time.Time
	attendancePercent, releaseNoShows *int
	admitPerSecond, maxAdmitted       *int
	tokenSeconds, absentSeconds       *int
	ok                                bool
}

// parseActivity reads the form's values; one that is not a number or a
// time where one is asked puts its message beside its field. Ranges and
// every other rule are the domain's.
func (h *Handler) parseActivity(r *request, f *activityForm) parsedActivity {
	p := parsedActivity{f: f, title: f.values["title"], seriesID: f.values["series_id"],
		waitlist: f.values["waitlist"] == "on", queue: f.values["queue"] == "on",
		policy: registration.WaitlistPolicy(f.values["waitlist_policy"])}
	number := func(name string) *int {
		v := f.values[name]
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errors[name] = h.locales.text(r.lang, "activities.error.number")
			return nil
		}
		return &n
	}
	moment := func(name string) *time.Time {
		v := f.values[name]
		if v == "" {
			return nil
		}
		t, err := time.ParseInLocation(activityTimeLayout, v, r.tz)
		if err != nil {
			t, err = time.ParseInLocation(activityTimeSeconds, v, r.tz)
		}
		if err != nil {
			f.errors[name] = h.locales.text(r.lang, "activities.error.time")
			return nil
		}
		return &t
	}
	p.capacity, p.holdSeconds, p.maxSeats = number("capacity"), number("hold_seconds"), number("max_seats_per_registration")
	p.attendancePercent, p.releaseNoShows = number("attendance_percent"), number("release_no_shows_after_minutes")
	p.admitPerSecond, p.maxAdmitted = number("queue.admit_per_second"), number("queue.max_admitted")
	p.tokenSeconds, p.absentSeconds = number("queue.token_seconds"), number("queue.absent_seconds")
	p.opensAt, p.closesAt = moment("opens_at"), moment("closes_at")
	p.startsAt, p.endsAt, p.confirmBy = moment("starts_at"), moment("ends_at"), moment("confirm_by")
	if p.capacity == nil && f.errors["capacity"] == "" {
		f.errors["capacity"] = h.locales.text(r.lang, "activities.error.required")
	}
	p.pools = splitActivityIDs(f.values["pools"])
	p.ok = len(f.errors) == 0
	return p
}

// splitActivityIDs is the ids of a field that lists them separated by commas or
// spaces.
func splitActivityIDs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// queueSettings is the admission queue the form asks for, nil for none:
// the token's and the absence's lifetimes default as the API's do.
func (p parsedActivity) queueSettings() *registration.QueueSettings {
	if !p.queue {
		return nil
	}
	q := registration.QueueSettings{TokenSeconds: 120, AbsentSeconds: 60}
	for _, v := range []struct {
		from *int
		to   *int
	}{{p.admitPerSecond, &q.AdmitPerSecond}, {p.maxAdmitted, &q.MaxAdmitted}, {p.tokenSeconds, &q.TokenSeconds}, {p.absentSeconds, &q.AbsentSeconds}} {
		if v.from != nil {
			*v.to = *v.from
		}
	}
	return &q
}

// schedule is the form's schedule.
func (p parsedActivity) schedule() registration.Schedule {
	return registration.Schedule{StartsAt: p.startsAt, EndsAt: p.endsAt, AttendancePercent: p.attendancePercent,
		ConfirmBy: p.confirmBy, ReleaseNoShowsAfterMinutes: p.releaseNoShows}
}

// newActivity is the activity the form creates; ok false when a field
// did not parse (its message is beside it). A hold or a party size typed
// as 0 is checked as the API checks it: NewActivity takes 0 for its
// default.
func (p parsedActivity) newActivity() (registration.NewActivity, bool) {
	if !p.ok {
		return registration.NewActivity{}, false
	}
	in := registration.NewActivity{Title: p.title, Capacity: *p.capacity, Waitlist: p.waitlist, Policy: p.policy,
		Pools: p.pools, SeriesID: p.seriesID, OpensAt: p.opensAt, ClosesAt: p.closesAt, Queue: p.queueSettings(),
		Schedule: p.schedule()}
	if p.holdSeconds != nil {
		in.HoldSeconds = *p.holdSeconds
	}
	if p.maxSeats != nil {
		in.MaxSeats = *p.maxSeats
	}
	if zero := (p.holdSeconds != nil && *p.holdSeconds == 0) || (p.maxSeats != nil && *p.maxSeats == 0); zero {
		if err := (registration.ActivityPatch{HoldSeconds: p.holdSeconds, MaxSeats: p.maxSeats}).Validate(); err != nil {
			if field, msg := errorMessage(err, activityFieldNames...); field != "" {
				p.f.errors[field] = msg
			} else {
				p.f.Error = msg
			}
			return registration.NewActivity{}, false
		}
	}
	return in, true
}

// patchOf is the patch of the fields of a that the form changes, and
// whether it changes any; ok false when a field did not parse. A time is
// compared as the form shows it (to the minute, in the organiser's time
// zone), so that a time set to the second through the API stays as it is
// unless it is changed; an emptied optional field is removed.
func (p parsedActivity) patchOf(a registration.Activity, r *request) (patch registration.ActivityPatch, changed, ok bool) {
	if !p.ok {
		return patch, false, false
	}
	if p.title != a.Title {
		patch.Title = &p.title
	}
	patch.Capacity = changedActivityInt(p.capacity, a.Capacity)
	patch.HoldSeconds = changedActivityInt(p.holdSeconds, a.HoldSeconds)
	patch.MaxSeats = changedActivityInt(p.maxSeats, a.MaxSeats)
	if p.waitlist != a.Waitlist {
		patch.Waitlist = &p.waitlist
	}
	if p.policy != a.Policy {
		patch.Policy = &p.policy
	}
	if pools := slices.Sorted(slices.Values(p.pools)); !slices.Equal(pools, a.Pools) {
		patch.Pools = &p.pools
	}
	if current := activitySeries(a.SeriesID); p.seriesID != current {
		patch.SeriesID = &p.seriesID
	}
	times := []struct {
		name    string
		value   *time.Time
		current *time.Time
		dst     *registration.Optional[time.Time]
	}{
		{"opens_at", p.opensAt, a.OpensAt, &patch.OpensAt}, {"closes_at", p.closesAt, a.ClosesAt, &patch.ClosesAt},
		{"starts_at", p.startsAt, a.StartsAt, &patch.StartsAt}, {"ends_at", p.endsAt, a.EndsAt, &patch.EndsAt},
		{"confirm_by", p.confirmBy, a.ConfirmBy, &patch.ConfirmBy},
	}
	for _, t := range times {
		if p.f.values[t.name] != activityInputTime(t.current, r.tz) {
			*t.dst = registration.Optional[time.Time]{Set: true, Value: t.value}
		}
	}
	patch.AttendancePercent = changedActivityOptional(p.attendancePercent, a.AttendancePercent)
	patch.ReleaseNoShowsAfterMinutes = changedActivityOptional(p.releaseNoShows, a.ReleaseNoShowsAfterMinutes)
	if q := p.queueSettings(); (q == nil) != (a.Queue == nil) || (q != nil && *q != *a.Queue) {
		patch.Queue = registration.Optional[registration.QueueSettings]{Set: true, Value: q}
	}
	changed = patch.Title != nil || patch.Capacity != nil || patch.HoldSeconds != nil || patch.MaxSeats != nil ||
		patch.Waitlist != nil || patch.Policy != nil || patch.Pools != nil || patch.SeriesID != nil ||
		patch.OpensAt.Set || patch.ClosesAt.Set || patch.StartsAt.Set || patch.EndsAt.Set || patch.ConfirmBy.Set ||
		patch.AttendancePercent.Set || patch.ReleaseNoShowsAfterMinutes.Set || patch.Queue.Set
	return patch, changed, true
}

// changedActivityInt is v when it is given and differs from current, else nil
// (unchanged).
func changedActivityInt(v *int, current int) *int {
	if v == nil || *v == current {
		return nil
	}
	return v
}

// changedActivityOptional is the change of an optional number: set (or removed,
// for nil) when it differs from current.
func changedActivityOptional(v, current *int) registration.Optional[int] {
	if (v == nil) == (current == nil) && (v == nil || *v == *current) {
		return registration.Optional[int]{}
	}
	return registration.Optional[int]{Set: true, Value: v}
}

// activitySeries is the id of a series, or "" for none.
func activitySeries(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// activityInputTime is t as a datetime-local input's value in tz ("" for nil).
func activityInputTime(t *time.Time, tz *time.Location) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.In(tz).Format(activityTimeLayout)
}

// activityFormOf is the form of an activity's settings, to edit them.
func activityFormOf(a registration.Activity, r *request) activityForm {
	f := newActivityForm()
	f.ID, f.Title = a.ID, a.Title
	itoa := strconv.Itoa
	optional := func(n *int) string {
		if n == nil {
			return ""
		}
		return itoa(*n)
	}
	check := func(b bool) string {
		if b {
			return "on"
		}
		return ""
	}
	for name, v := range map[string]string{
		"title": a.Title, "capacity": itoa(a.Capacity), "hold_seconds": itoa(a.HoldSeconds), "waitlist": check(a.Waitlist),
		"waitlist_policy": string(a.Policy), "max_seats_per_registration": itoa(a.MaxSeats),
		"pools": strings.Join(a.Pools, ", "), "series_id": activitySeries(a.SeriesID),
		"opens_at": activityInputTime(a.OpensAt, r.tz), "closes_at": activityInputTime(a.ClosesAt, r.tz), "queue": check(a.Queue != nil),
		"starts_at": activityInputTime(a.StartsAt, r.tz), "ends_at": activityInputTime(a.EndsAt, r.tz), "confirm_by": activityInputTime(a.ConfirmBy, r.tz),
		"attendance_percent": optional(a.AttendancePercent), "release_no_shows_after_minutes": optional(a.ReleaseNoShowsAfterMinutes),
	} {
		f.values[name] = v
	}
	if q := a.Queue; q != nil {
		f.values["queue.admit_per_second"], f.values["queue.max_admitted"] = itoa(q.AdmitPerSecond), itoa(q.MaxAdmitted)
		f.values["queue.token_seconds"], f.values["queue.absent_seconds"] = itoa(q.TokenSeconds), itoa(q.AbsentSeconds)
	}
	return f
}
