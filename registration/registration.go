// Package registration is the signup domain: activities with a fixed number
// of seats, registrations that occupy them, the rules for moving between
// statuses, and the Service that admits signups exactly through the
// authority (PostgreSQL) while keeping the display tier (capacity) in step.
package registration

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

	"github.com/physiciansnet/capacityd"
)

// Status is a registration's state.
type Status string

// Registration statuses. Pending, AwaitingPayment and Approved occupy a seat.
const (
	Pending         Status = "pending"
	AwaitingPayment Status = "awaiting_payment"
	Approved        Status = "approved"
	Cancelled       Status = "cancelled"
	Expired         Status = "expired"
)

// Occupying reports whether a registration in status s holds a seat.
func (s Status) Occupying() bool {
	return s == Pending || s == AwaitingPayment || s == Approved
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	return s.Occupying() || s == Cancelled || s == Expired
}

// Limits on activity fields, mirrored by the schema's check constraints.
const (
	MaxTitleLen        = 200
	MaxCapacity        = 1_000_000
	MinHoldSeconds     = 60
	MaxHoldSeconds     = 86400
	DefaultHoldSeconds = 900
	MaxUserIDLen       = 128
	MaxMetadataBytes   = 4096
	MaxIdempotencyKey  = 255
	DefaultListLimit   = 100
	MaxListLimit       = 500
)

// Activity is an event with a fixed number of seats.
type Activity struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	Capacity    int       `json:"capacity"`
	HoldSeconds int       `json:"hold_seconds"`
	Taken       int       `json:"taken"`
	Remaining   int       `json:"remaining"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Remaining returns max(0, capacity - taken).
func Remaining(capacity, taken int) int { return max(0, capacity-taken) }

// NewActivity is what an admin sends to create an activity.
type NewActivity struct {
	Title       string
	Capacity    int
	HoldSeconds int
}

// ActivityPatch changes the fields that are set.
type ActivityPatch struct {
	Title       *string
	Capacity    *int
	HoldSeconds *int
}

// Registration is one user's claim on a seat of an activity.
type Registration struct {
	ID         string          `json:"id"`
	ActivityID string          `json:"activity_id"`
	UserID     string          `json:"user_id"`
	Status     Status          `json:"status"`
	Metadata   json.RawMessage `json:"metadata"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	ExpiresAt  *time.Time      `json:"expires_at"`

	// Seq orders registrations by creation for keyset pagination.
	Seq int64 `json:"-"`
}

// Page is one page of a registration listing.
type Page struct {
	Items      []Registration `json:"items"`
	NextCursor *string        `json:"next_cursor"`
}

// ListFilter selects registrations of one activity.
type ListFilter struct {
	ActivityID string
	Status     Status // empty: all statuses
	After      int64  // Seq of the last item of the previous page
	Limit      int
}

// EncodeCursor returns the opaque cursor for the page after seq.
func EncodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("r" + strconv.FormatInt(seq, 10)))
}

// DecodeCursor parses a cursor made by EncodeCursor.
func DecodeCursor(s string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != 'r' {
		return 0, capacityd.Errorf(capacityd.EInvalid, "malformed cursor")
	}
	seq, err := strconv.ParseInt(string(b[1:]), 10, 64)
	if err != nil || seq < 0 {
		return 0, capacityd.Errorf(capacityd.EInvalid, "malformed cursor")
	}
	return seq, nil
}

// Validate checks a new activity against the API's ranges and fills
// defaults.
func (n *NewActivity) Validate() error {
	if n.HoldSeconds == 0 {
		n.HoldSeconds = DefaultHoldSeconds
	}
	return validateFields(&n.Title, &n.Capacity, &n.HoldSeconds)
}

// Validate checks the fields a patch sets.
func (p ActivityPatch) Validate() error {
	if p.Title == nil && p.Capacity == nil && p.HoldSeconds == nil {
		return capacityd.Errorf(capacityd.EInvalid, "nothing to change: set title, capacity or hold_seconds")
	}
	return validateFields(p.Title, p.Capacity, p.HoldSeconds)
}

func validateFields(title *string, capacity, holdSeconds *int) error {
	if title != nil {
		if n := len([]rune(*title)); n < 1 || n > MaxTitleLen {
			return capacityd.Errorf(capacityd.EInvalid, "title must be 1 to %d characters", MaxTitleLen)
		}
	}
	if capacity != nil && (*capacity < 0 || *capacity > MaxCapacity) {
		return capacityd.Errorf(capacityd.EInvalid, "capacity must be between 0 and %d", MaxCapacity)
	}
	if holdSeconds != nil && (*holdSeconds < MinHoldSeconds || *holdSeconds > MaxHoldSeconds) {
		return capacityd.Errorf(capacityd.EInvalid, "hold_seconds must be between %d and %d", MinHoldSeconds, MaxHoldSeconds)
	}
	return nil
}

// RegistrationNotFound returns the not_found error for a registration that
// does not exist or that the caller may not see; both read the same.
func RegistrationNotFound(id string) error {
	return capacityd.Errorf(capacityd.ENotFound, "registration %s not found", id)
}

// ActivityNotFound returns the not_found error for a missing activity.
func ActivityNotFound(id string) error {
	return capacityd.Errorf(capacityd.ENotFound, "activity %s not found", id)
}

// ActivityFull returns the activity_full error.
func ActivityFull(id string) error {
	return capacityd.Errorf(capacityd.EActivityFull, "activity %s has no seats left", id)
}

// AlreadyRegistered returns the already_registered error naming the
// registration the user holds.
func AlreadyRegistered(activityID, registrationID string) error {
	return &capacityd.Error{
		Code:           capacityd.EAlreadyRegistered,
		Message:        "user already holds registration " + registrationID + " for activity " + activityID,
		RegistrationID: registrationID,
	}
}
