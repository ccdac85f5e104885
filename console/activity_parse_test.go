package console

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

// TestAnActivityFormPatchesWhatChanged: the edit form of an activity,
// sent back as shown, changes nothing (a time set to the second through
// the API included); an emptied optional field is removed, a changed one
// set, an unchecked queue removed; a value that is not a number is the
// form's message beside its field.
func TestAnActivityFormPatchesWhatChanged(t *testing.T) {
	t.Parallel()
	locales, err := loadCatalogue()
	require.NoError(t, err)
	h := &Handler{locales: locales}
	tz, err := time.LoadLocation("Asia/Taipei")
	require.NoError(t, err)
	r := &request{Request: httptest.NewRequest("POST", "/console/activities/a_1", nil), lang: "zh-TW", tz: tz}
	starts := time.Date(2030, 3, 1, 1, 0, 30, 0, time.UTC)
	percent, series := 80, "s_1"
	a := registration.Activity{ID: "a_1", Title: "晨會", Capacity: 10, HoldSeconds: 900, Waitlist: true, MaxSeats: 2,
		Policy: registration.PolicyFill, Pools: []string{"p_1", "p_2"}, SeriesID: &series,
		Queue:    &registration.QueueSettings{AdmitPerSecond: 5, MaxAdmitted: 50, TokenSeconds: 120, AbsentSeconds: 60},
		Schedule: registration.Schedule{StartsAt: &starts, AttendancePercent: &percent}}

	f := activityFormOf(a, r)
	require.Equal(t, "2030-03-01T09:00", f.values["starts_at"])
	require.Equal(t, "p_1, p_2", f.values["pools"])
	_, changed, ok := h.parseActivity(r, &f).patchOf(a, r)
	require.True(t, ok)
	require.False(t, changed, "the form as shown changes nothing")

	f = activityFormOf(a, r)
	f.values["attendance_percent"], f.values["queue"], f.values["pools"] = "", "", "p_2,p_1"
	f.values["confirm_by"], f.values["series_id"], f.values["waitlist"] = "2030-02-28T18:00", "", ""
	p, changed, ok := h.parseActivity(r, &f).patchOf(a, r)
	require.True(t, ok)
	require.True(t, changed)
	require.Equal(t, registration.Optional[int]{Set: true}, p.AttendancePercent)
	require.Equal(t, registration.Optional[registration.QueueSettings]{Set: true}, p.Queue)
	require.True(t, p.ConfirmBy.Set)
	require.True(t, time.Date(2030, 2, 28, 10, 0, 0, 0, time.UTC).Equal(*p.ConfirmBy.Value))
	require.Equal(t, "", *p.SeriesID)
	require.False(t, *p.Waitlist)
	require.Nil(t, p.Pools, "the same pools in another order")
	require.False(t, p.StartsAt.Set)
	require.Nil(t, p.Capacity)
	require.NoError(t, p.Validate())

	f = activityFormOf(a, r)
	f.values["capacity"], f.values["ends_at"] = "ten", "tomorrow"
	_, _, ok = h.parseActivity(r, &f).patchOf(a, r)
	require.False(t, ok)
	require.Equal(t, "請輸入整數。", f.errors["capacity"])
	require.Equal(t, "請輸入日期與時間。", f.errors["ends_at"])

	// A new activity's hold typed as 0 is refused as the API refuses it,
	// not taken for the default.
	f = newActivityForm()
	f.values["title"], f.values["capacity"], f.values["hold_seconds"] = "x", "3", "0"
	_, ok = h.parseActivity(r, &f).newActivity()
	require.False(t, ok)
	require.Contains(t, f.errors["hold_seconds"], "hold_seconds must be between 60 and 86400")
}
