package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// Export limits: a whole export may take exportTimeout; each write to the
// client gets streamWriteTimeout.
const (
	exportTimeout    = 10 * time.Minute
	exportFlushEvery = 500
)

// exportHeader is the CSV's columns. block_id is empty for a registration
// made from the public seats.
var exportHeader = []string{"id", "user_id", "status", "created_at", "updated_at", "expires_at", "metadata", "seats", "block_id"}

// exportRegistrations serves an activity's registrations as CSV in
// creation order, streamed as the store reads them a chunk at a time:
// memory does not grow with the number of rows, and no statement or
// connection is held while a slow client reads. A failure after the first
// row aborts the connection, so a client never takes a cut file for a
// whole one.
func (s *Server) exportRegistrations(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	status := registration.Status(q.Get("status"))
	ctx, cancel := context.WithTimeout(c.Request().Context(), exportTimeout)
	defer cancel()
	x := csvExport{filename: "registrations-" + id + ".csv", what: "registration export", activityID: id, header: exportHeader}
	return s.streamCSV(c, x, func(row func([]string) error) error {
		return s.regs.ExportRegistrations(ctx, id, status, func(r registration.Registration) error { return row(csvRow(r)) })
	})
}

func csvRow(r registration.Registration) []string {
	expires := ""
	if r.ExpiresAt != nil {
		expires = r.ExpiresAt.Format(time.RFC3339Nano)
	}
	block := ""
	if r.BlockID != nil {
		block = *r.BlockID
	}
	row := []string{r.ID, r.UserID, string(r.Status), r.CreatedAt.Format(time.RFC3339Nano),
		r.UpdatedAt.Format(time.RFC3339Nano), expires, string(r.Metadata), strconv.Itoa(r.Seats), block}
	for i, f := range row {
		row[i] = inert(f)
	}
	return row
}

// inert returns a CSV field that a spreadsheet would run as a formula
// (one starting with =, +, -, @, a tab or a carriage return) with a
// leading ', which spreadsheets show as text; any other field as it is.
func inert(field string) string {
	if field != "" && strings.ContainsRune("=+-@\t\r", rune(field[0])) {
		return "'" + field
	}
	return field
}

func (s *Server) listActivities(c echo.Context) error {
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	limit, before, err := pageQuery(q, registration.ActivityCursor)
	if err != nil {
		return err
	}
	page, err := s.regs.ListActivities(c.Request().Context(), before, limit)
	if err != nil {
		return err
	}
	for i, a := range page.Items {
		page.Items[i] = activityAnswer(a)
	}
	return writeJSON(c, http.StatusOK, page)
}
