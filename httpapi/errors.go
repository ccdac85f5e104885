package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
)

// statusOf is the one table from domain error codes to HTTP statuses.
var statusOf = map[string]int{
	capacityd.EInvalid:             http.StatusBadRequest,
	capacityd.EUnauthenticated:     http.StatusUnauthorized,
	capacityd.EForbidden:           http.StatusForbidden,
	capacityd.ENotFound:            http.StatusNotFound,
	capacityd.EActivityFull:        http.StatusConflict,
	capacityd.EAlreadyRegistered:   http.StatusConflict,
	capacityd.ELimitReached:        http.StatusConflict,
	capacityd.ERegistrationClosed:  http.StatusConflict,
	capacityd.EAdmissionRequired:   http.StatusForbidden,
	capacityd.EInvalidTransition:   http.StatusConflict,
	capacityd.EIdempotencyConflict: http.StatusConflict,
	capacityd.EInvalidTicket:       http.StatusBadRequest,
	capacityd.ETicketRevoked:       http.StatusConflict,
	capacityd.EWrongList:           http.StatusConflict,
	capacityd.ECheckinClosed:       http.StatusConflict,
	capacityd.EAlreadyCheckedIn:    http.StatusConflict,
	capacityd.ENotInside:           http.StatusConflict,
	capacityd.ERoomFull:            http.StatusConflict,
	capacityd.EConfirmationClosed:  http.StatusConflict,
	capacityd.EMethodNotAllowed:    http.StatusMethodNotAllowed,
	capacityd.EPayloadTooLarge:     http.StatusRequestEntityTooLarge,
	capacityd.ERateLimited:         http.StatusTooManyRequests,
	capacityd.EUnavailable:         http.StatusServiceUnavailable,
	capacityd.EInternal:            http.StatusInternalServerError,
}

// errorBody is the one shape of every error response. RegistrationID is
// set only with already_registered.
type errorBody struct {
	Error struct {
		Code           string `json:"code"`
		Message        string `json:"message"`
		RegistrationID string `json:"registration_id,omitempty"`
		Remaining      *int   `json:"remaining,omitempty"`
		// RegistrationIDs is set only with limit_reached.
		RegistrationIDs []string `json:"registration_ids,omitempty"`
		// OpensAt and ClosesAt are set (each a time or null) only with
		// registration_closed.
		OpensAt  any `json:"opens_at,omitempty"`
		ClosesAt any `json:"closes_at,omitempty"`
		// Previous is set only with already_checked_in; Inside and
		// MaxInside only with room_full.
		Previous  *capacityd.PreviousEntry `json:"previous,omitempty"`
		Inside    *int                     `json:"inside,omitempty"`
		MaxInside *int                     `json:"max_inside,omitempty"`
	} `json:"error"`
}

// fromEcho turns echo's own errors (routing, body limit) into domain errors.
func fromEcho(he *echo.HTTPError, c echo.Context) *capacityd.Error {
	msg := http.StatusText(he.Code)
	if m, ok := he.Message.(string); ok {
		msg = m
	}
	switch he.Code {
	case http.StatusNotFound:
		return capacityd.Errorf(capacityd.ENotFound, "no such resource")
	case http.StatusMethodNotAllowed:
		// echo's router has set the Allow header already.
		return capacityd.Errorf(capacityd.EMethodNotAllowed, "method %s is not allowed here; allowed: %s",
			safeForMessage(c.Request().Method), c.Response().Header().Get(echo.HeaderAllow))
	case http.StatusRequestEntityTooLarge:
		return capacityd.Errorf(capacityd.EPayloadTooLarge, "request body is larger than 64 KiB")
	case http.StatusUnauthorized:
		return capacityd.Errorf(capacityd.EUnauthenticated, "%s", msg)
	case http.StatusForbidden:
		return capacityd.Errorf(capacityd.EForbidden, "%s", msg)
	case http.StatusServiceUnavailable:
		return capacityd.Unavailable(he, "%s", msg)
	}
	if he.Code >= 400 && he.Code < 500 {
		return capacityd.Errorf(capacityd.EInvalid, "%s", msg)
	}
	return &capacityd.Error{Code: capacityd.EInternal, Message: "internal error", Err: he}
}

// handleError is echo's HTTPErrorHandler: it writes every error in the
// documented shape, with the status from statusOf, and logs only 5xx
// (those of a request its client abandoned at debug level).
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var e *capacityd.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &he):
		e = fromEcho(he, c)
	default:
		e = &capacityd.Error{Code: capacityd.EInternal, Message: "internal error", Err: err}
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	switch {
	case status >= 500 && errors.Is(err, context.Canceled):
		// Cut short because the client went away (a closed tab, a long
		// poll given up): no failure of the service's. (The request's own
		// deadline ends a request with DeadlineExceeded.)
		s.log.Debug("request abandoned by the client", "method", c.Request().Method, "path", c.Path(),
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID), "err", err)
	case status >= 500:
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Path(),
			"status", status, "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "err", err)
	}
	s.writeError(c, status, e)
}

func (s *Server) writeError(c echo.Context, status int, e *capacityd.Error) {
	var body errorBody
	body.Error.Code, body.Error.Message = e.Code, e.Message
	if status >= 500 && e.Code == capacityd.EInternal {
		body.Error.Message = "internal error"
	}
	if e.Code == capacityd.EAlreadyRegistered {
		body.Error.RegistrationID = e.RegistrationID
	}
	if e.Code == capacityd.EActivityFull {
		body.Error.Remaining = e.Remaining
	}
	if e.Code == capacityd.ELimitReached {
		body.Error.RegistrationIDs = e.RegistrationIDs
	}
	if e.Code == capacityd.ERegistrationClosed {
		body.Error.OpensAt, body.Error.ClosesAt = e.OpensAt, e.ClosesAt
	}
	if e.Code == capacityd.EAlreadyCheckedIn {
		body.Error.Previous = e.Previous
	}
	if e.Code == capacityd.ERoomFull {
		body.Error.Inside, body.Error.MaxInside = e.Inside, e.MaxInside
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		secs := max(1, int(e.RetryAfter.Seconds()))
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = writeJSON(c, status, body)
}
