// Package registration is the signup domain: activities with a fixed number
// of seats and an optional waiting list, registrations that occupy seats or
// wait for one, the one rule (Decide) by which every change of an activity's
// seats is made, the events those changes record, and the Service that puts
// every change on its activity's queue and applies it in one transaction at
// the authority (PostgreSQL).
package registration

import (
	"encoding/json"
	"fmt"
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
	// MaxSeatsLimit is the most max_seats_per_registration may be, and
	// DefaultMaxSeats its default: one seat per registration.
	MaxSeatsLimit   = 100
	DefaultMaxSeats = 1
)

// WaitlistPolicy is how an activity's waiting list serves parties of
// several seats.
type WaitlistPolicy string

// Waiting-list policies.
const (
	// PolicyStrict: first come, first served without exception. Freed
	// seats go to the head of the line while it fits; a head that does not
	// fit waits, and everyone behind it waits too.
	PolicyStrict WaitlistPolicy = "strict"
	// PolicyFill: freed seats go through the line oldest first, to every
	// waiting registration that fits in what is left; one that does not
	// fit keeps its place.
	PolicyFill WaitlistPolicy = "fill"
)

// Valid reports whether p is a policy.
func (p WaitlistPolicy) Valid() bool { return p == PolicyStrict || p == PolicyFill }

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

	ID          string `json:"id"`
	Title       string `json:"title"`
	Capacity    int    `json:"capacity"`
	HoldSeconds int    `json:"hold_seconds"`
	Waitlist    bool   `json:"waitlist"`
	// MaxSeats is the most seats one registration may hold
	// (max_seats_per_registration), Policy how the waiting list serves
	// parties (waitlist_policy).
	MaxSeats int            `json:"max_seats_per_registration"`
	Policy   WaitlistPolicy `json:"waitlist_policy"`
	// Pools are the ids of the pools the activity belongs to, sorted
	// (never nil in an answer).
	Pools []string `json:"pools"`
	// SeriesID is the series the activity belongs to, if any.
	SeriesID *string `json:"series_id"`
	// OpensAt and ClosesAt bound when signups are taken (nil: no bound);
	// Queue is the admission queue signups go through, if any.
	OpensAt  *time.Time     `json:"opens_at"`
	ClosesAt *time.Time     `json:"closes_at"`
	Queue    *QueueSettings `json:"queue"`
	// Schedule is when the activity takes place, what attendance earns
	// credit, and when the seats of people who will not come go back.
	Schedule
	Taken int `json:"taken"`
	// Reserved is the unused seats of the activity's blocks, held for
	// their audiences.
	Reserved int `json:"reserved"`
	// Remaining is what a new signup could get: the activity's own free
	// seats (capacity - taken - reserved), or fewer when one of its pools
	// has fewer left.
	Remaining int `json:"remaining"`
	Waiting   int `json:"waiting"`
	// LineBlockedBy is set, in an admin's read, while the head of a
	// strict waiting list asks for more seats than the activity (or one of
	// its pools) can ever hold after a capacity was lowered: everyone
	// behind it waits until a raise holds it or it leaves.
	LineBlockedBy *BlockedLine `json:"line_blocked_by,omitempty"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

// Schedule is when an activity takes place and its rules for attendance
// and for the seats of people who will not come.
type Schedule struct {
	// StartsAt and EndsAt are when the activity takes place (nil: not
	// set); EndsAt is after StartsAt.
	StartsAt *time.Time `json:"starts_at"`
	EndsAt   *time.Time `json:"ends_at"`
	// AttendancePercent is the share of the activity's time inside that
	// makes attendance eligible (1-100; nil: any accepted entry).
	AttendancePercent *int `json:"attendance_percent"`
	// ConfirmBy is when the registrations that hold a seat must be
	// confirmed by; at that moment the unconfirmed are released.
	ConfirmBy *time.Time `json:"confirm_by"`
	// ReleaseNoShowsAfterMinutes releases, that many minutes after
	// StartsAt, the registrations that hold a seat and have no accepted
	// entry (0-240; nil: never).
	ReleaseNoShowsAfterMinutes *int `json:"release_no_shows_after_minutes"`
}

// SeatRoom returns the activity's own room (its pools aside).
func (a Activity) SeatRoom() Room {
	return Room{Capacity: a.Capacity, Taken: a.Taken, Reserved: a.Reserved}
}

// NewActivity is what an admin sends to create an activity.
type NewActivity struct {
	Title       string
	Capacity    int
	HoldSeconds int
	Waitlist    bool
	// MaxSeats is 0 for the default (DefaultMaxSeats), Policy "" for
	// PolicyStrict.
	MaxSeats int
	Policy   WaitlistPolicy
	// Pools are the pools the activity joins (0 to MaxPoolsPerActivity).
	Pools []string
	// SeriesID is the series the activity joins; "" for none.
	SeriesID string
	// OpensAt, ClosesAt and Queue are the signup window and the admission
	// queue (nil: none).
	OpensAt, ClosesAt *time.Time
	Queue             *QueueSettings
	Schedule
}

// ActivityPatch changes the fields that are set.
type ActivityPatch struct {
	Title       *string
	Capacity    *int
	HoldSeconds *int
	Waitlist    *bool
	MaxSeats    *int
	Policy      *WaitlistPolicy
	// Pools replaces the activity's pools when set.
	Pools *[]string
	// SeriesID, when set, puts the activity in that series ("": in none).
	SeriesID *string
	// OpensAt, ClosesAt and Queue, when set, replace the window's bounds
	// and the admission queue (a nil Value removes them).
	OpensAt, ClosesAt Optional[time.Time]
	Queue             Optional[QueueSettings]
	// The schedule's fields, each set, removed (a nil Value) or unchanged.
	StartsAt, EndsAt, ConfirmBy                   Optional[time.Time]
	AttendancePercent, ReleaseNoShowsAfterMinutes Optional[int]
}

// Optional is a patch's change of a field that may be removed: Set says
// whether the patch changes the field at all, and Value is then its new
// value, nil to remove it.
type Optional[T any] struct {
	Set   bool
	Value *T
}

// OptionalOf returns the change that a decoded field says: nil (the field
// absent) changes nothing; a nil inner value (null) removes the field.
func OptionalOf[T any](p **T) Optional[T] {
	if p == nil {
		return Optional[T]{}
	}
	return Optional[T]{Set: true, Value: *p}
}

// Or returns the new value when the change is set, else current.
func (o Optional[T]) Or(current *T) *T {
	if o.Set {
		return o.Value
	}
	return current
}

// CancelReason says why a registration was cancelled.
type CancelReason string

// Cancel reasons.
const (
	CancelUser        CancelReason = "user"
	CancelAdmin       CancelReason = "admin"
	CancelUnconfirmed CancelReason = "unconfirmed"
	CancelNoShow      CancelReason = "no_show"
)

// Registration is one user's claim on a seat of an activity.
type Registration struct {
	ID         string `json:"id"`
	ActivityID string `json:"activity_id"`
	UserID     string `json:"user_id"`
	Status     Status `json:"status"`
	// Seats is how many seats the registration holds (or waits for).
	Seats int `json:"seats"`
	// BlockID is the block whose seats it took, if any.
	BlockID   *string         `json:"block_id"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	ExpiresAt *time.Time      `json:"expires_at"`
	// WaitlistPosition is the registration's place in its activity's
	// waiting list (1 = next to be admitted) while it is waitlisted.
	WaitlistPosition *int `json:"waitlist_position"`
	// ConfirmedAt is when it was confirmed (nil: not confirmed).
	ConfirmedAt *time.Time `json:"confirmed_at"`
	// CancelReason says why it was cancelled: CancelUser, CancelAdmin,
	// CancelUnconfirmed or CancelNoShow (nil while not cancelled).
	CancelReason *CancelReason `json:"cancel_reason"`
	// CheckedIn is true once any check-in list accepted an entry of it.
	CheckedIn bool `json:"checked_in"`

	// Seq orders registrations by creation for keyset pagination.
	Seq int64 `json:"-"`
	// WaitlistSeq is the seq of the registration's waitlisted event: its
	// place in the join order of the waiting list. Zero if it never waited.
	WaitlistSeq int64 `json:"-"`
	// Joined orders the registration's joining of a waiting list among
	// those of every activity (see DecideAll); zero if it never waited.
	Joined int64 `json:"-"`
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
	if n.MaxSeats == 0 {
		n.MaxSeats = DefaultMaxSeats
	}
	if n.Policy == "" {
		n.Policy = PolicyStrict
	}
	if err := validateFields(&n.Title, &n.Capacity, &n.HoldSeconds); err != nil {
		return err
	}
	if err := validatePools(n.Pools); err != nil {
		return err
	}
	if err := validSeriesID(n.SeriesID); err != nil {
		return err
	}
	if err := validateOnSale(OptionalOf(&n.OpensAt), OptionalOf(&n.ClosesAt), OptionalOf(&n.Queue)); err != nil {
		return err
	}
	if err := n.Schedule.validate(); err != nil {
		return err
	}
	return validateGroups(&n.MaxSeats, &n.Policy)
}

// Validate checks the fields a patch sets.
func (p ActivityPatch) Validate() error {
	if p.Title == nil && p.Capacity == nil && p.HoldSeconds == nil && p.Waitlist == nil && p.MaxSeats == nil && p.Policy == nil &&
		p.Pools == nil && p.SeriesID == nil && !p.OpensAt.Set && !p.ClosesAt.Set && !p.Queue.Set && !p.changesSchedule() {
		return capacityd.Errorf(capacityd.EInvalid,
			"nothing to change: set title, capacity, hold_seconds, waitlist, max_seats_per_registration, waitlist_policy, pools, series_id, opens_at, closes_at, queue, starts_at, ends_at, attendance_percent, confirm_by or release_no_shows_after_minutes")
	}
	if err := p.schedule(Schedule{}).validate(); err != nil {
		return err
	}
	if err := validateOnSale(p.OpensAt, p.ClosesAt, p.Queue); err != nil {
		return err
	}
	if p.SeriesID != nil {
		if err := validSeriesID(*p.SeriesID); err != nil {
			return err
		}
	}
	if err := validateFields(p.Title, p.Capacity, p.HoldSeconds); err != nil {
		return err
	}
	if p.Pools != nil {
		if err := validatePools(*p.Pools); err != nil {
			return err
		}
	}
	return validateGroups(p.MaxSeats, p.Policy)
}

// validateOnSale checks the signup window and the queue settings that are
// set.
func validateOnSale(opensAt, closesAt Optional[time.Time], queue Optional[QueueSettings]) error {
	if queue.Value != nil {
		if err := queue.Value.Validate(); err != nil {
			return err
		}
	}
	if opensAt.Set && closesAt.Set {
		return ValidateWindow(opensAt.Value, closesAt.Value)
	}
	return nil
}

func validateGroups(maxSeats *int, policy *WaitlistPolicy) error {
	if maxSeats != nil && (*maxSeats < 1 || *maxSeats > MaxSeatsLimit) {
		return capacityd.Errorf(capacityd.EInvalid, "max_seats_per_registration must be between 1 and %d", MaxSeatsLimit)
	}
	if policy != nil && !policy.Valid() {
		return capacityd.Errorf(capacityd.EInvalid, "waitlist_policy must be %q or %q", PolicyStrict, PolicyFill)
	}
	return nil
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

// ActivityFull returns the activity_full error of a signup for c.Seats
// seats refused on the counts c, with the seats a signup could get
// (remaining). Its message names what refused it: the activity, or the
// pool with the fewest seats left; a capacity too small ever to hold the
// party; or the waiting line that goes first.
func ActivityFull(id string, c Counts) error {
	seats, remaining := max(c.Seats, 1), c.Remaining()
	where := "activity " + id
	if c.Pooled && c.Shared < c.Room().Free() {
		where = "pool " + c.SharedPool + " of activity " + id
	}
	var msg string
	switch {
	case !holds(c.Capacity, seats):
		msg = fmt.Sprintf("activity %s holds no more than %s: %d can never fit", id, seatCount(c.Capacity), seats)
	case c.Pooled && !holds(c.PoolCapacity, seats):
		msg = fmt.Sprintf("pool %s of activity %s holds no more than %s: %d can never fit", c.SmallestPool, id,
			seatCount(c.PoolCapacity), seats)
	case remaining == 0:
		msg = where + " has no seats left"
	case remaining < seats:
		msg = fmt.Sprintf("%s has only %d of the %d seats asked left", where, remaining, seats)
	default:
		msg = fmt.Sprintf("activity %s has %s left, for its waiting line first", id, seatCount(remaining))
	}
	return &capacityd.Error{Code: capacityd.EActivityFull, Message: msg, Remaining: &remaining}
}

// seatCount returns "1 seat" or "n seats".
func seatCount(n int) string {
	if n == 1 {
		return "1 seat"
	}
	return fmt.Sprintf("%d seats", n)
}

// TooManySeats returns the invalid_request error of a signup for more
// seats than the activity allows in one registration.
func TooManySeats(a Activity, seats int) error {
	return capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and %d for activity %s (asked for %d)",
		a.MaxSeats, a.ID, seats)
}

// SeatsNotReducible returns the invalid_transition error of a change of a
// registration's seats that is not a reduction of an active registration.
func SeatsNotReducible(r Registration, to int) error {
	if !r.Status.Active() {
		return capacityd.Errorf(capacityd.EInvalidTransition, "registration %s is %s: its seats cannot change", r.ID, r.Status)
	}
	return capacityd.Errorf(capacityd.EInvalidTransition, "registration %s holds %s: seats can only be given back, not added (asked for %d)",
		r.ID, seatCount(r.Seats), to)
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
