// Package registration is the signup domain: activities with a fixed number
// of seats and an optional waiting list, registrations that occupy seats or
// wait for one, the one rule (Decide) by which every change of an activity's
// seats is made, the events those changes record, and the Service that puts
// every change on its activity's queue and applies it in one transaction at
// the authority (PostgreSQL).
package registration

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
)

// Status is a registration's state.
type Status string

// Registration statuses. Pending, AwaitingPayment and Approved occupy a
// seat; Waitlisted waits for one.
const (
	Pending         Status = "pending"
	AwaitingPayment Status = "awaiting_payment"
	Approved        Status = "approved"
	Waitlisted      Status = "waitlisted"
	Cancelled       Status = "cancelled"
	Expired         Status = "expired"
)

// Occupying reports whether a registration in status s holds a seat.
func (s Status) Occupying() bool {
	return s == Pending || s == AwaitingPayment || s == Approved
}

// Active reports whether a registration in status s holds or waits for a
// seat: a user has at most one active registration per activity.
func (s Status) Active() bool { return s.Occupying() || s == Waitlisted }

// Valid reports whether s is one of the six statuses.
func (s Status) Valid() bool {
	return s.Active() || s == Cancelled || s == Expired
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

// ValidUserIDLength reports whether a user id (a token's sub) has 1 to
// MaxUserIDLen characters, counted as the schema counts them (char_length).
func ValidUserIDLength(id string) bool {
	n := utf8.RuneCountInString(id)
	return n >= 1 && n <= MaxUserIDLen
}

// Activity is an event with a fixed number of seats. Taken, Remaining and
// Waiting are the authority's numbers.
type Activity struct {
	// Seq orders activities by creation for keyset pagination.
	Seq int64 `json:"-"`

	ID          string    `json:"id"`
	Title       string    `json:"title"`
	Capacity    int       `json:"capacity"`
	HoldSeconds int       `json:"hold_seconds"`
	Waitlist    bool      `json:"waitlist"`
	Taken       int       `json:"taken"`
	Remaining   int       `json:"remaining"`
	Waiting     int       `json:"waiting"`
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
	Waitlist    bool
}

// ActivityPatch changes the fields that are set.
type ActivityPatch struct {
	Title       *string
	Capacity    *int
	HoldSeconds *int
	Waitlist    *bool
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
	// WaitlistPosition is the registration's place in its activity's
	// waiting list (1 = next to be admitted) while it is waitlisted.
	WaitlistPosition *int `json:"waitlist_position"`

	// Seq orders registrations by creation for keyset pagination.
	Seq int64 `json:"-"`
	// WaitlistSeq is the seq of the registration's waitlisted event: its
	// place in the join order of the waiting list. Zero if it never waited.
	WaitlistSeq int64 `json:"-"`
}

// ActivityPage is one page of the activity listing.
type ActivityPage struct {
	Items      []Activity `json:"items"`
	NextCursor *string    `json:"next_cursor"`
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
	After      string // public id of the last item of the previous page; "": from the first
	Limit      int
}

// UserFilter selects a user's registrations over all activities, newest
// first.
type UserFilter struct {
	UserID string
	Before string // public id of the last item of the previous page; "": from the newest
	Limit  int
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
	if p.Title == nil && p.Capacity == nil && p.HoldSeconds == nil && p.Waitlist == nil {
		return capacityd.Errorf(capacityd.EInvalid, "nothing to change: set title, capacity, hold_seconds or waitlist")
	}
	return validateFields(p.Title, p.Capacity, p.HoldSeconds)
}

func validateFields(title *string, capacity, holdSeconds *int) error {
	if title != nil {
		if n := len([]rune(*title)); n < 1 || n > MaxTitleLen {
			return capacityd.Errorf(capacityd.EInvalid, "title must be 1 to %d characters", MaxTitleLen)
		}
		if !storable(*title) {
			return capacityd.Errorf(capacityd.EInvalid, "title must be valid UTF-8 without NUL characters")
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

// InvalidTransition returns the invalid_transition error of a status change
// that the registration's status does not allow.
func InvalidTransition(r Registration, to Status) error {
	return capacityd.Errorf(capacityd.EInvalidTransition, "registration %s cannot move from %s to %s", r.ID, r.Status, to)
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
