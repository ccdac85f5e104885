package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/note"
)

// registerNoteRoutes adds the public note routes.
func (s *Server) registerNoteRoutes(v1 *echo.Group) {
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
	st, err := s.cfg.Notes.Increment(c.Request().Context(), id, kind)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, st)
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
