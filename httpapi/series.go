package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// seriesRequest is the body of POST /v1/series and PATCH /v1/series/{id}.
type seriesRequest struct {
	Title      *string `json:"title"`
	MaxPerUser *int    `json:"max_per_user"`
}

func seriesID(c echo.Context) (string, error) {
	return pathID(c, "id", "s", registration.SeriesNotFound)
}

func (s *Server) createSeries(c echo.Context) error {
	var req seriesRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	if req.Title == nil || req.MaxPerUser == nil {
		return capacityd.Errorf(capacityd.EInvalid, "title and max_per_user are required")
	}
	sr, err := s.regs.CreateSeries(c.Request().Context(), registration.NewSeries{Title: *req.Title, MaxPerUser: *req.MaxPerUser})
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/series/"+sr.ID)
	return writeJSON(c, http.StatusCreated, sr)
}

func (s *Server) getSeries(c echo.Context) error {
	id, err := seriesID(c)
	if err != nil {
		return err
	}
	sr, err := s.regs.GetSeries(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, sr)
}

// listSeries serves one page of the series, newest first.
func (s *Server) listSeries(c echo.Context) error {
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	limit, before, err := pageQuery(q, registration.SeriesCursor)
	if err != nil {
		return err
	}
	page, err := s.regs.ListSeries(c.Request().Context(), before, limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, page)
}

// patchSeries changes a series' title or limit. A lower limit removes
// nobody: it refuses the signups that would go over it.
func (s *Server) patchSeries(c echo.Context) error {
	id, err := seriesID(c)
	if err != nil {
		return err
	}
	var req seriesRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	sr, err := s.regs.UpdateSeries(c.Request().Context(), id,
		registration.SeriesPatch{Title: req.Title, MaxPerUser: req.MaxPerUser})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, sr)
}

// seriesField reads the "series_id" of an activity's body: nil when the
// field is absent, a pointer to "" when it is null (no series), else a
// pointer to the id.
func seriesField(raw json.RawMessage) (*string, error) {
	if raw == nil {
		return nil, nil
	}
	none := ""
	if bytes.Equal(raw, []byte("null")) {
		return &none, nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "series_id" must be a string or null`)
	}
	if id == "" {
		return nil, capacityd.Errorf(capacityd.EInvalid, "series_id must be a series id (s_…) or null, not an empty string")
	}
	return &id, nil
}
