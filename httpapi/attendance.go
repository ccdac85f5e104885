package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/attendance"
	"github.com/physiciansnet/capacityd/registration"
)

// AttendanceService is what the edge asks of the attendance reads.
type AttendanceService interface {
	Activity(ctx context.Context, activityID, after string, limit int) (attendance.Sheet, error)
	Export(ctx context.Context, activityID string, emit func(attendance.Item) error) error
	Registration(ctx context.Context, registrationID string, c registration.Caller) (attendance.Personal, error)
	Series(ctx context.Context, seriesID string, room int, risk float64) (attendance.SeriesReport, error)
}

// registerAttendanceRoutes mounts the attendance reads.
func (s *Server) registerAttendanceRoutes(v1 *echo.Group, admin []echo.MiddlewareFunc) {
	v1.GET("/activities/:id/attendance", s.activityAttendance, admin...)
	v1.GET("/activities/:id/attendance.csv", s.exportAttendance, admin...)
	v1.GET("/registrations/:id/attendance", s.registrationAttendance, s.authenticate)
	v1.GET("/series/:id/attendance", s.seriesAttendance, admin...)
}

func (s *Server) activityAttendance(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	limit, after, err := pageQuery(q, registration.RegistrationCursor)
	if err != nil {
		return err
	}
	sheet, err := s.cfg.Attendance.Activity(c.Request().Context(), id, after, limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, sheet)
}

func (s *Server) registrationAttendance(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	p, err := s.cfg.Attendance.Registration(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "private, no-store")
	return writeJSON(c, http.StatusOK, p)
}

func (s *Server) seriesAttendance(c echo.Context) error {
	id, err := seriesID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	room, risk := 0, attendance.DefaultRisk
	if v, ok := q["room"]; ok {
		if room, err = intParam("room", v[0], 1, attendance.MaxRoom); err != nil {
			return err
		}
	}
	if v, ok := q["risk"]; ok {
		if risk, err = strconv.ParseFloat(v[0], 64); err != nil || attendance.ValidEstimate(0, risk) != nil {
			return capacityd.Errorf(capacityd.EInvalid, "risk must be a number greater than 0 and less than 1")
		}
	}
	rep, err := s.cfg.Attendance.Series(c.Request().Context(), id, room, risk)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, rep)
}

// attendanceHeader is the attendance CSV's columns.
var attendanceHeader = []string{"registration_id", "user_id", "seats", "status", "checked_in", "first_entry_at", "seconds", "percent", "eligible"}

// exportAttendance serves an activity's attendance as CSV, streamed as
// the registration export is (see exportRegistrations): read a chunk at a
// time, flushed every exportFlushEvery rows, and a failure after the first
// row aborts the connection.
func (s *Server) exportAttendance(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), exportTimeout)
	defer cancel()
	x := csvExport{filename: "attendance-" + id + ".csv", what: "attendance export", activityID: id, header: attendanceHeader}
	return s.streamCSV(c, x, func(row func([]string) error) error {
		return s.cfg.Attendance.Export(ctx, id, func(it attendance.Item) error { return row(attendanceRow(it)) })
	})
}

// attendanceRow is an item as a CSV row: an empty cell for null, and
// every field made inert for spreadsheets.
func attendanceRow(it attendance.Item) []string {
	first, secs, pct := "", "", ""
	if it.FirstEntryAt != nil {
		first = it.FirstEntryAt.Format(time.RFC3339Nano)
	}
	if it.Seconds != nil {
		secs = strconv.FormatInt(*it.Seconds, 10)
	}
	if it.Percent != nil {
		pct = strconv.FormatFloat(*it.Percent, 'f', -1, 64)
	}
	row := []string{it.RegistrationID, it.UserID, strconv.Itoa(it.Seats), string(it.Status), strconv.FormatBool(it.CheckedIn),
		first, secs, pct, strconv.FormatBool(it.Eligible)}
	for i, f := range row {
		row[i] = inert(f)
	}
	return row
}
