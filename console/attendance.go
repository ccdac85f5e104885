package console

import (
	"context"
	"net/http"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/attendance"
	"github.com/physiciansnet/capacityd/registration"
)

// AttendanceService is what the console asks of the attendance reads.
type AttendanceService interface {
	Activity(ctx context.Context, activityID, after string, limit int) (attendance.Sheet, error)
}

// attendancePageSize is how many registrations a page of the attendance
// shows.
const attendancePageSize = 100

// attendanceRoutes registers an activity's attendance page.
func (h *Handler) attendanceRoutes(r router) {
	r.page("GET "+Prefix+"/activities/{id}/attendance", adminOnly, h.activityAttendance)
}

// attendanceData is the data of an activity's attendance page: its
// summary and one page of its registrations that hold a seat.
type attendanceData struct {
	ActivityID string
	Summary    attendance.Summary
	Rows       []attendanceRow
	// Next is the cursor of the next page ("" on the last); Paged is true
	// past the first.
	Next  string
	Paged bool
	// CSV is the export's address, through the console's way into the API.
	CSV string
}

// attendanceRow is one registration's attendance as the table shows it.
type attendanceRow struct {
	attendance.Item
}

// Measured reports whether the activity's times let its time inside be
// measured.
func (a attendanceRow) Measured() bool { return a.Seconds != nil && a.Percent != nil }

// Minutes is the time inside in whole minutes, rounded.
func (a attendanceRow) Minutes() int64 {
	if a.Seconds == nil {
		return 0
	}
	return (*a.Seconds + 30) / 60
}

// Share is the time inside's share of the activity, in percent.
func (a attendanceRow) Share() float64 {
	if a.Percent == nil {
		return 0
	}
	return *a.Percent
}

// NoShowPercent is the summary's no-show rate in percent.
func (d attendanceData) NoShowPercent() float64 { return d.Summary.NoShowRate * 100 }

// activityAttendance shows an activity's attendance: the summary, a page
// of the table, and the link to its CSV export.
func (h *Handler) activityAttendance(w http.ResponseWriter, r *request) {
	id := r.PathValue("id")
	after := ""
	cursor := r.URL.Query().Get("cursor")
	if cursor != "" {
		var err error
		if after, err = registration.DecodeCursor(cursor, registration.RegistrationCursor); err != nil {
			h.renderError(w, r, http.StatusBadRequest, "attendance.bad_cursor")
			return
		}
	}
	sheet, err := h.cfg.Services.Attendance.Activity(r.Context(), id, after, attendancePageSize)
	if capacityd.IsCode(err, capacityd.EInvalid) {
		h.renderError(w, r, http.StatusBadRequest, "attendance.bad_cursor")
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := attendanceData{ActivityID: id, Summary: sheet.Summary, Paged: cursor != "",
		CSV: Prefix + "/api/v1/activities/" + id + "/attendance.csv"}
	for _, it := range sheet.Items {
		data.Rows = append(data.Rows, attendanceRow{Item: it})
	}
	if sheet.NextCursor != nil {
		data.Next = *sheet.NextCursor
	}
	h.render(w, r, http.StatusOK, "attendance", data)
}
