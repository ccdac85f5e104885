package httpapi

import (
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/note"
)

// registerNoteRoutes adds the public note routes and the admin's
// registration of a note.
func (s *Server) registerNoteRoutes(v1 *echo.Group, admin []echo.MiddlewareFunc) {
	v1.PUT("/notes/:noteId", s.registerNote, admin...)
	v1.POST("/notes/:noteId/views", s.noteView, s.limitPublicWrites)
	v1.POST("/notes/:noteId/waters", s.noteWater, s.limitPublicWrites)
	v1.GET("/notes/:noteId/stats", s.noteStats, s.limitPublicReads)
}

// noteID returns the note id of the path, validated: 1-128 characters of
// [A-Za-z0-9_-], else invalid_request. A percent-encoded id is decoded
// first, so an encoded valid character names the same note.
func noteID(c echo.Context) (string, error) {
	id := c.Param("noteId")
	if strings.IndexByte(id, '%') >= 0 {
		dec, err := url.PathUnescape(id)
		if err != nil {
			return "", capacityd.Errorf(capacityd.EInvalid, "note id is not a valid path segment")
		}
		id = dec
	}
	if err := note.ValidateID(id); err != nil {
		return "", err
	}
	return id, nil
}

func (s *Server) noteView(c echo.Context) error  { return s.noteIncrement(c, note.View) }
func (s *Server) noteWater(c echo.Context) error { return s.noteIncrement(c, note.Water) }

// noteIncrement records one view or water. The body may be empty or an
// empty JSON object.
func (s *Server) noteIncrement(c echo.Context, kind note.Kind) error {
	id, err := noteID(c)
	if err != nil {
		return err
	}
	if err := decodeJSON(c, &struct{}{}, true); err != nil {
		return err
	}
	if kind == note.Water && s.waters != nil {
		addr := clientKey(c)
		at, ok, wait := s.waters.take(addr, id)
		if !ok {
			return &capacityd.Error{
				Code:       capacityd.ERateLimited,
				Message:    "this address watered note " + id + " less than " + s.waters.window.String() + " ago; retry later",
				RetryAfter: max(time.Second, time.Duration(math.Ceil(wait.Seconds()))*time.Second),
			}
		}
		st, err := s.cfg.Notes.Increment(c.Request().Context(), id, kind)
		if err != nil {
			// Not counted (an unknown note, or the authority unreachable):
			// the address may try again at once.
			s.waters.give(addr, id, at)
			return err
		}
		return writeJSON(c, http.StatusOK, st)
	}
	st, err := s.cfg.Notes.Increment(c.Request().Context(), id, kind)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, st)
}

// registerNote creates a note (admin), idempotently: 201 with its zero
// counters when it is new, 200 with its counters when it existed. In the
// registered notes mode only registered notes count views and waters.
func (s *Server) registerNote(c echo.Context) error {
	id, err := noteID(c)
	if err != nil {
		return err
	}
	if err := decodeJSON(c, &struct{}{}, true); err != nil {
		return err
	}
	st, created, err := s.cfg.Notes.Register(c.Request().Context(), id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(c, status, st)
}

func (s *Server) noteStats(c echo.Context) error {
	id, err := noteID(c)
	if err != nil {
		return err
	}
	st, err := s.cfg.Notes.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, st)
}
