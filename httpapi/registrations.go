package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// headerIdempotencyKey and headerReplayed are the idempotency headers.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerAdmissionToken = "Admission-Token"
	headerReplayed       = "Idempotent-Replayed"
)

// idempotencyKey returns the request's Idempotency-Key ("" for none),
// refusing an empty one or one sent twice.
func idempotencyKey(c echo.Context) (string, error) {
	vs, ok := c.Request().Header[headerIdempotencyKey]
	if !ok {
		return "", nil
	}
	if vs[0] == "" || len(vs) > 1 {
		return "", capacityd.Errorf(capacityd.EInvalid, "Idempotency-Key must be 1 to 255 printable ASCII characters, sent once")
	}
	return vs[0], nil
}

type signupRequest struct {
	Metadata json.RawMessage `json:"metadata"`
	Seats    *int            `json:"seats"`
	// Code is a block's code: the block's seats serve the signup first.
	Code *string `json:"code"`
}

// compactMetadata checks that metadata is a JSON object of at most 4 KiB
// and returns it compacted; absent or null metadata is {}.
func compactMetadata(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return []byte("{}"), nil
	}
	if raw[0] != '{' {
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "metadata" must be an object`)
	}
	if !utf8.Valid(raw) {
		// PostgreSQL would refuse it, failing the whole admission batch.
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "metadata" must be valid UTF-8`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "metadata" is malformed JSON`)
	}
	if buf.Len() > registration.MaxMetadataBytes {
		return nil, capacityd.Errorf(capacityd.EInvalid, "metadata must be at most %d bytes", registration.MaxMetadataBytes)
	}
	if !pairedSurrogates(buf.Bytes()) {
		// It is returned as stored, and strict JSON parsers refuse it.
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "metadata" has a \u escape of half a surrogate pair without the other half`)
	}
	return buf.Bytes(), nil
}

func (s *Server) signup(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	var req signupRequest
	if err := decodeJSON(c, &req, true); err != nil {
		return err
	}
	meta, err := compactMetadata(req.Metadata)
	if err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	if len(c.Request().Header[headerAdmissionToken]) > 1 {
		return capacityd.Errorf(capacityd.EInvalid, "Admission-Token must be sent once")
	}
	seats, err := signupSeats(req.Seats)
	if err != nil {
		return err
	}
	code := ""
	if req.Code != nil {
		if *req.Code == "" {
			return capacityd.Errorf(capacityd.EInvalid, "code must not be empty")
		}
		code = *req.Code
		if err := s.takeCodeAttempt(c); err != nil {
			return err
		}
	}
	reg, replayed, err := s.regs.Signup(c.Request().Context(), registration.SignupInput{
		ActivityID: id, Caller: callerOf(c), Metadata: meta, Seats: seats, IdempotencyKey: key, Code: code,
		AdmissionToken: c.Request().Header.Get(headerAdmissionToken),
	})
	if replayed {
		c.Response().Header().Set(headerReplayed, "true")
	}
	if err != nil {
		s.forgetRefusedPlace(c, id, err)
		return err
	}
	return writeSignup(c, reg)
}

// forgetRefusedPlace drops the caller's cached place in the activity's
// admission queue when a signup with an Admission-Token was refused for
// it (used on another instance, or expired), so that the place's next
// read here asks the authority instead of answering "admitted".
func (s *Server) forgetRefusedPlace(c echo.Context, activityID string, err error) {
	if s.cfg.Queues == nil || c.Request().Header.Get(headerAdmissionToken) == "" ||
		capacityd.ErrorCode(err) != capacityd.EAdmissionRequired {
		return
	}
	s.cfg.Queues.Forget(activityID, callerOf(c).UserID)
}

// signupSeats returns the seats a signup body asks for: 1 when absent. More
// than MaxSeatsLimit is refused here; more than the activity's
// max_seats_per_registration by the service.
func signupSeats(seats *int) (int, error) {
	if seats == nil {
		return 1, nil
	}
	if *seats < 1 || *seats > registration.MaxSeatsLimit {
		return 0, capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and the activity's max_seats_per_registration")
	}
	return *seats, nil
}

// writeSignup answers a signup: 201 with a registration that took a seat,
// 202 with one that joined the waiting list.
func writeSignup(c echo.Context, reg registration.Registration) error {
	c.Response().Header().Set(echo.HeaderLocation, "/v1/registrations/"+reg.ID)
	status := http.StatusCreated
	if reg.Status == registration.Waitlisted {
		status = http.StatusAccepted
	}
	return writeJSON(c, status, reg)
}

func registrationID(c echo.Context) (string, error) {
	return pathID(c, "id", "r", registration.RegistrationNotFound)
}

func (s *Server) getRegistration(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	r, err := s.regs.GetRegistration(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, r)
}

func (s *Server) cancelRegistration(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	if err := decodeJSON(c, &struct{}{}, true); err != nil {
		return err
	}
	r, err := s.regs.Cancel(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, r)
}

// confirmRegistration serves POST /v1/registrations/{id}/confirm.
func (s *Server) confirmRegistration(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	if err := decodeJSON(c, &struct{}{}, true); err != nil {
		return err
	}
	r, err := s.regs.Confirm(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, r)
}

// reduceSeats serves POST /v1/registrations/{id}/seats: the registration
// keeps the seats asked for, giving the rest back.
func (s *Server) reduceSeats(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	var req struct {
		Seats *int `json:"seats"`
	}
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	if req.Seats == nil {
		return capacityd.Errorf(capacityd.EInvalid, `field "seats" is required`)
	}
	r, err := s.regs.ReduceSeats(c.Request().Context(), id, *req.Seats, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, r)
}

func (s *Server) setStatus(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	var req struct {
		Status *string `json:"status"`
	}
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	if req.Status == nil {
		return capacityd.Errorf(capacityd.EInvalid, `field "status" is required`)
	}
	r, err := s.regs.SetStatus(c.Request().Context(), id, registration.Status(*req.Status), callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, r)
}

func (s *Server) listRegistrations(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	f := registration.ListFilter{ActivityID: id, Status: registration.Status(q.Get("status"))}
	if f.Limit, f.After, err = pageQuery(q, registration.RegistrationCursor); err != nil {
		return err
	}
	page, err := s.regs.ListRegistrations(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, page)
}

// pageQuery reads the limit and cursor of a listing whose items' ids start
// with prefix (registration.ActivityCursor or RegistrationCursor): the
// cursor is returned as the public id it names.
func pageQuery(q url.Values, prefix string) (limit int, after string, err error) {
	if v, ok := q["limit"]; ok {
		if limit, err = intParam("limit", v[0], 1, registration.MaxListLimit); err != nil {
			return 0, "", err
		}
	}
	if v, ok := q["cursor"]; ok {
		if after, err = registration.DecodeCursor(v[0], prefix); err != nil {
			return 0, "", err
		}
	}
	return limit, after, nil
}

// intParam parses a query parameter as an integer from lo to hi.
func intParam(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, capacityd.Errorf(capacityd.EInvalid, "%s must be an integer between %d and %d", name, lo, hi)
	}
	return n, nil
}

func (s *Server) myRegistrations(c echo.Context) error {
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	f := registration.UserFilter{UserID: callerOf(c).UserID}
	if f.Limit, f.Before, err = pageQuery(q, registration.RegistrationCursor); err != nil {
		return err
	}
	page, err := s.regs.UserRegistrations(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, page)
}
