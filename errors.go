// Package capacityd holds what every part of the service shares: the domain
// error type with its stable machine-readable codes. Domain packages
// (registration, capacity, note) build on it, store translates database
// failures into it once, and httpapi maps its codes to HTTP statuses in one
// table.
package capacityd

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. They are part of the HTTP contract (docs/api.md) and never
// change.
const (
	EInvalid             = "invalid_request"
	EUnauthenticated     = "unauthenticated"
	EForbidden           = "forbidden"
	ENotFound            = "not_found"
	EActivityFull        = "activity_full"
	EAlreadyRegistered   = "already_registered"
	EInvalidTransition   = "invalid_transition"
	EIdempotencyConflict = "idempotency_conflict"
	ELimitReached        = "limit_reached"
	ERegistrationClosed  = "registration_closed"
	EAdmissionRequired   = "admission_required"
	EInvalidTicket       = "invalid_ticket"
	ETicketRevoked       = "ticket_revoked"
	EWrongList           = "wrong_list"
	ECheckinClosed       = "checkin_closed"
	EAlreadyCheckedIn    = "already_checked_in"
	ENotInside           = "not_inside"
	ERoomFull            = "room_full"
	EConfirmationClosed  = "confirmation_closed"
	EMethodNotAllowed    = "method_not_allowed"
	EPayloadTooLarge     = "payload_too_large"
	ERateLimited         = "rate_limited"
	EUnavailable         = "unavailable"
	EInternal            = "internal"
)

// Error is a domain error with a stable code and a message safe to show to
// clients. Optional fields carry what some codes add to the response.
type Error struct {
	Code    string
	Message string

	// RegistrationID is set with EAlreadyRegistered: the registration the
	// user already holds.
	RegistrationID string
	// Remaining is set with EActivityFull: the seats a signup could get
	// at that moment.
	Remaining *int
	// RegistrationIDs is set with ELimitReached: the active registrations
	// the user holds in the series.
	RegistrationIDs []string
	// OpensAt and ClosesAt are set with ERegistrationClosed: the
	// activity's signup window (nil: open on that side).
	OpensAt, ClosesAt *time.Time
	// Previous is set with EAlreadyCheckedIn: the accepted entry that the
	// entry rule does not allow again.
	Previous *PreviousEntry
	// Inside and MaxInside are set with ERoomFull: the seats inside the
	// list's room and its limit.
	Inside, MaxInside *int
	// RetryAfter is set with EUnavailable and ERateLimited.
	RetryAfter time.Duration
	// Err is the underlying cause, for logs; it is never shown to clients.
	Err error
}

// PreviousEntry is the accepted entry an already_checked_in refusal names.
type PreviousEntry struct {
	At     time.Time `json:"at"`
	Device string    `json:"device"`
	ListID string    `json:"list_id"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unavailable returns an EUnavailable error wrapping cause, telling clients
// to retry after a second.
func Unavailable(cause error, format string, args ...any) *Error {
	return &Error{Code: EUnavailable, Message: fmt.Sprintf(format, args...), RetryAfter: time.Second, Err: cause}
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code string) bool { return ErrorCode(err) == code }
