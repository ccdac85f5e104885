package httpapi

import (
	"bufio"
	"encoding/csv"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// csvExport is one CSV download: its file name, header and what its log
// calls it.
type csvExport struct {
	filename, what, activityID string
	header                     []string
}

// streamCSV answers with the CSV of the rows each passes to its row
// function, in order, streamed: the header and the status are written
// with the first row, the rows flushed every exportFlushEvery and at the
// end, so memory does not grow with the rows and no statement or
// connection is held while a slow client reads. Without any row the
// header alone is the answer; an error before the first row is answered
// as errors are; a failure after it aborts the connection, so a client
// never takes a cut file for a whole one.
func (s *Server) streamCSV(c echo.Context, x csvExport, each func(row func([]string) error) error) error {
	w := c.Response()
	rc := http.NewResponseController(w)
	var out *csv.Writer
	var buf *bufio.Writer
	rows := 0
	flush := func() error {
		out.Flush()
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if err := buf.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := each(func(fields []string) error {
		if out == nil {
			h := w.Header()
			h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
			h.Set(echo.HeaderContentDisposition, `attachment; filename="`+x.filename+`"`)
			w.WriteHeader(http.StatusOK)
			buf = bufio.NewWriterSize(w, 32<<10)
			out = csv.NewWriter(buf)
			if err := out.Write(x.header); err != nil {
				return err
			}
		}
		if err := out.Write(fields); err != nil {
			return err
		}
		if rows++; rows%exportFlushEvery == 0 {
			return flush()
		}
		return nil
	})
	if out == nil {
		if err != nil {
			return err
		}
		w.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
		return c.String(http.StatusOK, strings.Join(x.header, ",")+"\n")
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		s.log.Error(x.what+" aborted", "activity_id", x.activityID, "rows", rows, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}
