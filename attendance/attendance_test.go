package attendance_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/attendance"
	"github.com/physiciansnet/capacityd/registration"
)

var start = time.Date(2025, 3, 4, 9, 0, 0, 0, time.UTC)

// at is start plus minutes.
func at(minutes float64) time.Time {
	return start.Add(time.Duration(minutes * float64(time.Minute)))
}

func in(list int64, minutes float64) attendance.Check {
	return attendance.Check{List: list, Type: attendance.Entry, At: at(minutes)}
}

func out(list int64, minutes float64) attendance.Check {
	return attendance.Check{List: list, Type: attendance.Exit, At: at(minutes)}
}

func ptr[T any](v T) *T { return &v }

// hour is a 60-minute activity; with percent, its threshold.
func hour(percent *int) attendance.Activity {
	return attendance.Activity{ID: "a_1", StartsAt: ptr(start), EndsAt: ptr(at(60)), AttendancePercent: percent}
}

func TestAttendanceEvaluate(t *testing.T) {
	cases := []struct {
		name     string
		act      attendance.Activity
		checks   []attendance.Check
		seconds  int64
		percent  float64
		eligible bool
	}{
		{"25 and 25 minutes of 60, eligible at 80", hour(ptr(80)),
			[]attendance.Check{in(1, 0), out(1, 25), in(1, 30), out(1, 55)}, 3000, 83.3, true},
		{"5 minutes, not eligible", hour(ptr(80)), []attendance.Check{in(1, 10), out(1, 15)}, 300, 8.3, false},
		{"a no-show", hour(ptr(80)), nil, 0, 0, false},
		{"two lists overlapping count once", hour(ptr(50)),
			[]attendance.Check{in(1, 0), in(2, 10), out(1, 20), out(2, 30)}, 1800, 50, true},
		{"an entry without exit counts until the end", hour(ptr(80)), []attendance.Check{in(1, 12)}, 2880, 80, true},
		{"time before the start is clipped", hour(ptr(80)), []attendance.Check{in(1, -30), out(1, 30)}, 1800, 50, false},
		{"time after the end is clipped", hour(nil), []attendance.Check{in(1, 50), out(1, 90)}, 600, 16.7, true},
		{"an exit without entry is ignored", hour(ptr(10)), []attendance.Check{out(1, 5), in(1, 40), out(1, 45)}, 300, 8.3, false},
		{"repeated entries while inside do not restart", hour(ptr(40)),
			[]attendance.Check{in(1, 0), in(1, 20), out(1, 30), out(1, 50)}, 1800, 50, true},
		{"an exit on another list does not close the stretch", hour(nil),
			[]attendance.Check{in(1, 0), out(2, 10), out(1, 30)}, 1800, 50, true},
		{"fractions of a second are rounded down", hour(nil),
			[]attendance.Check{in(1, 0), {List: 1, Type: attendance.Exit, At: start.Add(90*time.Second + 999*time.Millisecond)}}, 90, 2.5, true},
		{"without a threshold, an entry after the end is still a check-in", hour(nil), []attendance.Check{in(1, 70)}, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			it := attendance.Evaluate(c.act, attendance.Row{RegistrationID: "r_1", UserID: "u", Seats: 1, Status: registration.Approved, Checks: c.checks})
			require.NotNil(t, it.Seconds)
			require.NotNil(t, it.Percent)
			assert.Equal(t, c.seconds, *it.Seconds)
			assert.InDelta(t, c.percent, *it.Percent, 1e-9)
			assert.Equal(t, c.eligible, it.Eligible)
			assert.Equal(t, len(c.checks) > 0 && hasEntry(c.checks), it.CheckedIn)
		})
	}
}

func hasEntry(cs []attendance.Check) bool {
	for _, c := range cs {
		if c.Type == attendance.Entry {
			return true
		}
	}
	return false
}

func TestAttendanceUntimedActivity(t *testing.T) {
	act := attendance.Activity{ID: "a_1", StartsAt: ptr(start), AttendancePercent: ptr(80)}
	it := attendance.Evaluate(act, attendance.Row{RegistrationID: "r_1", Checks: []attendance.Check{out(1, 3), in(2, 5), in(1, 2)}})
	assert.Nil(t, it.Seconds, "no end: no time inside")
	assert.Nil(t, it.Percent)
	assert.True(t, it.CheckedIn)
	assert.True(t, it.Eligible, "without seconds, an entry is eligible")
	require.NotNil(t, it.FirstEntryAt)
	assert.Equal(t, at(2), *it.FirstEntryAt, "the earliest entry of any list")

	none := attendance.Evaluate(act, attendance.Row{Checks: []attendance.Check{out(1, 3)}})
	assert.False(t, none.CheckedIn, "an exit alone is no check-in")
	assert.False(t, none.Eligible)
	assert.Nil(t, none.FirstEntryAt)
}

func TestAttendanceMergeAndClip(t *testing.T) {
	iv := func(a, b float64) attendance.Interval { return attendance.Interval{From: at(a), To: at(b)} }
	merged := attendance.Merge([]attendance.Interval{iv(30, 40), iv(0, 10), iv(5, 20), iv(20, 25), iv(50, 50), iv(45, 42)})
	assert.Equal(t, []attendance.Interval{iv(0, 25), iv(30, 40)}, merged, "overlapping and touching stretches join; empty ones go")
	assert.Equal(t, []attendance.Interval{iv(5, 25), iv(30, 35)}, attendance.Clip(merged, at(5), at(35)))
	assert.Empty(t, attendance.Clip(merged, at(26), at(29)))
}

func TestAttendanceIntervalsPerList(t *testing.T) {
	got := attendance.Intervals([]attendance.Check{in(2, 10), in(1, 0), out(1, 5), out(2, 20), in(1, 50)}, at(60))
	assert.Equal(t, []attendance.Interval{{From: at(0), To: at(5)}, {From: at(50), To: at(60)}, {From: at(10), To: at(20)}}, got)
	// The same instant: the list's seq decides.
	same := attendance.Intervals([]attendance.Check{
		{List: 1, Seq: 2, Type: attendance.Exit, At: at(10)}, {List: 1, Seq: 1, Type: attendance.Entry, At: at(10)}, in(1, 20)}, time.Time{})
	assert.Equal(t, []attendance.Interval{{From: at(10), To: at(10)}}, same,
		"entry then exit by seq; an open stretch without an end is left out")
}

func TestAttendanceSummary(t *testing.T) {
	s := attendance.Summarize(attendance.Counts{Registered: 120, CheckedIn: 83})
	assert.Equal(t, attendance.Summary{Registered: 120, CheckedIn: 83, NoShow: 37, NoShowRate: 0.308}, s)
	assert.Equal(t, attendance.Summary{}, attendance.Summarize(attendance.Counts{}), "nobody registered: rate 0")
	assert.Equal(t, 0.333, attendance.Summarize(attendance.Counts{Registered: 3, CheckedIn: 2}).NoShowRate)
}

func TestAttendanceStatementClaims(t *testing.T) {
	it := attendance.Evaluate(hour(ptr(80)), attendance.Row{RegistrationID: "r_1", UserID: "alice",
		Checks: []attendance.Check{in(1, 0), out(1, 25), in(1, 30), out(1, 55)}})
	now := at(61)
	c := attendance.NewStatement(hour(ptr(80)), it, now)
	assert.Equal(t, attendance.StatementClaims{Reg: "r_1", Act: "a_1", Sub: "alice", StartsAt: "2025-03-04T09:00:00Z",
		EndsAt: "2025-03-04T10:00:00Z", Seconds: 3000, Percent: 83.3, Eligible: true, Iat: now.Unix()}, c)
	sub, err := c.GetSubject()
	require.NoError(t, err)
	assert.Equal(t, "alice", sub)
}

func TestEndingNamesAttendedNoShowOrNeither(t *testing.T) {
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	pct := 80
	a := attendance.Activity{ID: "a_1", StartsAt: &start, EndsAt: &end, AttendancePercent: &pct}
	entry := func(at time.Time) attendance.Check {
		return attendance.Check{List: 1, Type: attendance.Entry, At: at}
	}
	exit := func(at time.Time) attendance.Check {
		return attendance.Check{List: 1, Type: attendance.Exit, At: at}
	}
	for name, tc := range map[string]struct {
		checks []attendance.Check
		want   registration.EventType
	}{
		"stayed to the end":  {[]attendance.Check{entry(start)}, registration.EventAttended},
		"never came":         {nil, registration.EventNoShow},
		"came for 5 minutes": {[]attendance.Check{entry(start), exit(start.Add(5 * time.Minute))}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, attendance.Ending(a, attendance.Row{RegistrationID: "r_1", Seats: 1, Checks: tc.checks}))
		})
	}
}
