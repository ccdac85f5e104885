package client

import (
	"encoding/json"
	"time"
)

// Activity is an event with a fixed number of seats. Read with
// GetActivity by an admin, Capacity, Taken, Remaining and Waiting are
// authoritative (Source "database"); read by anyone else, they are the live
// seat display's, like Seats (Source "cache" or "database").
type Activity struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Capacity    int    `json:"capacity"`
	HoldSeconds int    `json:"hold_seconds"`
	Waitlist    bool   `json:"waitlist"`
	// MaxSeatsPerRegistration is the most seats one registration may
	// hold; WaitlistPolicy is "strict" or "fill".
	MaxSeatsPerRegistration int    `json:"max_seats_per_registration"`
	WaitlistPolicy          string `json:"waitlist_policy"`
	// Pools are the ids of the pools the activity belongs to, sorted;
	// empty when none.
	Pools []string `json:"pools"`
	// SeriesID is the id of the series the activity belongs to; nil when
	// none.
	SeriesID *string `json:"series_id"`
	// OpensAt and ClosesAt bound when signups are taken (nil: no bound);
	// Queue is the admission queue signups go through (nil: none).
	OpensAt  *time.Time     `json:"opens_at"`
	ClosesAt *time.Time     `json:"closes_at"`
	Queue    *QueueSettings `json:"queue"`
	// StartsAt and EndsAt are when the activity takes place (nil: not
	// set); AttendancePercent the share of that time inside that makes
	// attendance eligible (nil: any entry does); ConfirmBy when the
	// registrations that hold a seat must be confirmed by (nil: no
	// confirmation asked); ReleaseNoShowsAfterMinutes the minutes after
	// StartsAt when those with no entry are released (nil: never).
	StartsAt                   *time.Time `json:"starts_at"`
	EndsAt                     *time.Time `json:"ends_at"`
	AttendancePercent          *int       `json:"attendance_percent"`
	ConfirmBy                  *time.Time `json:"confirm_by"`
	ReleaseNoShowsAfterMinutes *int       `json:"release_no_shows_after_minutes"`
	// Taken counts seats: a registration for 3 occupies 3.
	Taken int `json:"taken"`
	// Reserved is the unused seats of its blocks, held for their
	// audiences.
	Reserved int `json:"reserved"`
	// Remaining is what a new signup could get: the activity's own free
	// seats (not counting Reserved), or fewer when one of its pools has
	// fewer left.
	Remaining int `json:"remaining"`
	Waiting   int `json:"waiting"`
	// LineBlockedBy is set in an admin's read while the head of a strict
	// waiting list asks for more seats than the activity can hold since a
	// capacity was lowered.
	LineBlockedBy *BlockedLine `json:"line_blocked_by,omitempty"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
	// Source is set by GetActivity only: where the seat numbers come from,
	// "cache" (the Redis display) or "database".
	Source string `json:"source,omitempty"`
}

// NewActivity is what CreateActivity sends. HoldSeconds 0 takes the
// service's default (900).
type NewActivity struct {
	Title       string `json:"title"`
	Capacity    int    `json:"capacity"`
	HoldSeconds int    `json:"hold_seconds,omitempty"`
	Waitlist    bool   `json:"waitlist,omitempty"`
	// MaxSeatsPerRegistration is 0 for the default (1); WaitlistPolicy
	// "" for the default ("strict").
	MaxSeatsPerRegistration int    `json:"max_seats_per_registration,omitempty"`
	WaitlistPolicy          string `json:"waitlist_policy,omitempty"`
	// Pools are the ids of the pools the activity joins (at most 4).
	Pools []string `json:"pools,omitempty"`
	// SeriesID is the id of the series the activity joins; "" for none.
	SeriesID string `json:"series_id,omitempty"`
	// OpensAt and ClosesAt bound when signups are taken; Queue makes
	// signups go through an admission queue. nil sends none.
	OpensAt  *time.Time     `json:"opens_at,omitempty"`
	ClosesAt *time.Time     `json:"closes_at,omitempty"`
	Queue    *QueueSettings `json:"queue,omitempty"`
	// StartsAt, EndsAt, AttendancePercent, ConfirmBy and
	// ReleaseNoShowsAfterMinutes are the attendance settings (see
	// Activity). nil sends none.
	StartsAt                   *time.Time `json:"starts_at,omitempty"`
	EndsAt                     *time.Time `json:"ends_at,omitempty"`
	AttendancePercent          *int       `json:"attendance_percent,omitempty"`
	ConfirmBy                  *time.Time `json:"confirm_by,omitempty"`
	ReleaseNoShowsAfterMinutes *int       `json:"release_no_shows_after_minutes,omitempty"`
}

// QueueSettings are an activity's admission queue. In a NewActivity or an
// ActivityPatch, TokenSeconds and AbsentSeconds 0 send none (the
// service's defaults, 120 and 60).
type QueueSettings struct {
	AdmitPerSecond int `json:"admit_per_second"`
	MaxAdmitted    int `json:"max_admitted"`
	TokenSeconds   int `json:"token_seconds,omitempty"`
	AbsentSeconds  int `json:"absent_seconds,omitempty"`
}

// ActivityPatch is what UpdateActivity sends: the fields that are set.
type ActivityPatch struct {
	Title                   *string `json:"title,omitempty"`
	Capacity                *int    `json:"capacity,omitempty"`
	HoldSeconds             *int    `json:"hold_seconds,omitempty"`
	Waitlist                *bool   `json:"waitlist,omitempty"`
	MaxSeatsPerRegistration *int    `json:"max_seats_per_registration,omitempty"`
	WaitlistPolicy          *string `json:"waitlist_policy,omitempty"`
	// Pools replaces the activity's pools when set: a pointer to an
	// empty list takes it out of every pool.
	Pools *[]string `json:"pools,omitempty"`
	// SeriesID puts the activity in that series when set: a pointer to ""
	// takes it out of its series (sent as null).
	SeriesID *string `json:"-"`
	// OpensAt, ClosesAt and Queue replace the window's bounds and the
	// admission queue when set; the Clear fields remove them (sent as
	// null).
	OpensAt                                 *time.Time     `json:"opens_at,omitempty"`
	ClosesAt                                *time.Time     `json:"closes_at,omitempty"`
	Queue                                   *QueueSettings `json:"queue,omitempty"`
	ClearOpensAt, ClearClosesAt, ClearQueue bool           `json:"-"`
	// StartsAt, EndsAt, AttendancePercent, ConfirmBy and
	// ReleaseNoShowsAfterMinutes replace the attendance settings when
	// set; their Clear fields remove them (sent as null).
	StartsAt                   *time.Time `json:"starts_at,omitempty"`
	EndsAt                     *time.Time `json:"ends_at,omitempty"`
	AttendancePercent          *int       `json:"attendance_percent,omitempty"`
	ConfirmBy                  *time.Time `json:"confirm_by,omitempty"`
	ReleaseNoShowsAfterMinutes *int       `json:"release_no_shows_after_minutes,omitempty"`
	ClearStartsAt, ClearEndsAt, ClearAttendancePercent,
	ClearConfirmBy, ClearReleaseNoShowsAfterMinutes bool `json:"-"`
}

// MarshalJSON encodes the patch with "series_id" null when SeriesID
// points to "", and without it when SeriesID is nil; and with each field
// that has a Clear field null when that is set.
func (p ActivityPatch) MarshalJSON() ([]byte, error) {
	type fields ActivityPatch // without the method
	body := struct {
		fields
		SeriesID                   any `json:"series_id,omitempty"`
		OpensAt                    any `json:"opens_at,omitempty"`
		ClosesAt                   any `json:"closes_at,omitempty"`
		Queue                      any `json:"queue,omitempty"`
		StartsAt                   any `json:"starts_at,omitempty"`
		EndsAt                     any `json:"ends_at,omitempty"`
		AttendancePercent          any `json:"attendance_percent,omitempty"`
		ConfirmBy                  any `json:"confirm_by,omitempty"`
		ReleaseNoShowsAfterMinutes any `json:"release_no_shows_after_minutes,omitempty"`
	}{fields: fields(p)}
	body.OpensAt, body.ClosesAt, body.Queue = orNull(p.OpensAt, p.ClearOpensAt), orNull(p.ClosesAt, p.ClearClosesAt), orNull(p.Queue, p.ClearQueue)
	body.StartsAt, body.EndsAt, body.ConfirmBy = orNull(p.StartsAt, p.ClearStartsAt), orNull(p.EndsAt, p.ClearEndsAt), orNull(p.ConfirmBy, p.ClearConfirmBy)
	body.AttendancePercent = orNull(p.AttendancePercent, p.ClearAttendancePercent)
	body.ReleaseNoShowsAfterMinutes = orNull(p.ReleaseNoShowsAfterMinutes, p.ClearReleaseNoShowsAfterMinutes)
	if p.SeriesID != nil {
		body.SeriesID = json.RawMessage("null")
		if *p.SeriesID != "" {
			body.SeriesID = *p.SeriesID
		}
	}
	return json.Marshal(body)
}

// orNull returns v when set, null when clear, and nothing (an omitted
// field) otherwise.
func orNull[T any](v *T, clear bool) any {
	switch {
	case v != nil:
		return v
	case clear:
		return json.RawMessage("null")
	}
	return nil
}

// Page is one page of a list. Pass NextCursor as the Cursor of the next
// call; it is nil on the last page.
type Page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// ActivityPage is one page of ListActivities.
type ActivityPage = Page[Activity]

// Pool is a number of seats shared by several activities: a signup must
// fit its activity and every pool the activity belongs to. Read with
// GetPool by an admin, Capacity, Taken and Remaining are authoritative
// (Source "database"); read by anyone else, they are the live seat
// display's (Source "cache" or "database").
type Pool struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Capacity int    `json:"capacity"`
	// Taken is the seats of the occupying registrations of all its
	// activities.
	Taken int `json:"taken"`
	// Reserved is the unused seats of its activities' blocks, held for
	// their audiences in the pool too.
	Reserved  int `json:"reserved"`
	Remaining int `json:"remaining"`
	// Activities are the ids of the activities that belong to it, sorted.
	Activities []string  `json:"activities"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Source is set by GetPool only: where the seat numbers come from,
	// "cache" (the Redis display) or "database".
	Source string `json:"source,omitempty"`
}

// NewPool is what CreatePool sends.
type NewPool struct {
	Title    string `json:"title"`
	Capacity int    `json:"capacity"`
}

// PoolPatch is what UpdatePool sends: the fields that are set.
type PoolPatch struct {
	Title    *string `json:"title,omitempty"`
	Capacity *int    `json:"capacity,omitempty"`
}

// PoolPage is one page of ListPools.
type PoolPage = Page[Pool]

// Series is a set of activities of which one user may hold at most
// MaxPerUser active (occupying or waitlisted) registrations; a signup over
// it is refused with limit_reached (see Error.RegistrationIDs).
type Series struct {
	ID         string    `json:"id"`
	Title      string    `json:"title"`
	MaxPerUser int       `json:"max_per_user"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// NewSeries is what CreateSeries sends.
type NewSeries struct {
	Title      string `json:"title"`
	MaxPerUser int    `json:"max_per_user"`
}

// SeriesPatch is what UpdateSeries sends: the fields that are set.
type SeriesPatch struct {
	Title      *string `json:"title,omitempty"`
	MaxPerUser *int    `json:"max_per_user,omitempty"`
}

// SeriesPage is one page of ListSeries.
type SeriesPage = Page[Series]

// Seats is the seats display of an activity.
type Seats struct {
	ActivityID string `json:"activity_id"`
	Capacity   int    `json:"capacity"`
	Taken      int    `json:"taken"`
	// Reserved is the unused seats of the activity's blocks.
	Reserved  int `json:"reserved"`
	Remaining int `json:"remaining"`
	Waiting   int `json:"waiting"`
	// Source is "cache" (the Redis display) or "database".
	Source string    `json:"source"`
	AsOf   time.Time `json:"as_of"`
}

// Status is a registration's status.
type Status string

// Registration statuses. Pending, AwaitingPayment and Approved occupy a
// seat.
const (
	Pending         Status = "pending"
	AwaitingPayment Status = "awaiting_payment"
	Approved        Status = "approved"
	Waitlisted      Status = "waitlisted"
	Cancelled       Status = "cancelled"
	Expired         Status = "expired"
)

// Registration is one user's claim on a seat of an activity.
type Registration struct {
	ID         string `json:"id"`
	ActivityID string `json:"activity_id"`
	UserID     string `json:"user_id"`
	Status     Status `json:"status"`
	// Seats is how many seats it holds (or waits for).
	Seats int `json:"seats"`
	// BlockID is the block whose seats it took; nil for public seats.
	BlockID   *string         `json:"block_id"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// ExpiresAt is when an awaiting_payment hold runs out; else nil.
	ExpiresAt *time.Time `json:"expires_at"`
	// WaitlistPosition is the place in the waiting list (1 = next) while
	// waitlisted; else nil.
	WaitlistPosition *int `json:"waitlist_position"`
	// ConfirmedAt is when it was confirmed (or, after its activity's
	// ConfirmBy, when it got its seat); nil while not confirmed.
	ConfirmedAt *time.Time `json:"confirmed_at"`
	// CancelReason says why it was cancelled (CancelReason* constants); nil
	// while it is not cancelled.
	CancelReason *string `json:"cancel_reason"`
	// CheckedIn is true once any check-in list accepted an entry of it.
	CheckedIn bool `json:"checked_in"`
}

// RegistrationPage is one page of a registration list.
type RegistrationPage = Page[Registration]

// Event is one recorded change of a registration or, in an activity's
// feed only, of a block (Type "block.created", "block.deleted" or
// "block.expired"): a block event has BlockID, Seats (the block's seats,
// or the unused seats it returned), Actor, RequestID and At, and no
// registration, user or status.
type Event struct {
	ID string `json:"id"`
	// Seq numbers the activity's events 1, 2, 3, … without gaps.
	Seq            int64  `json:"seq"`
	ActivityID     string `json:"activity_id"`
	RegistrationID string `json:"registration_id"`
	UserID         string `json:"user_id"`
	// Type is e.g. "registration.promoted".
	Type string `json:"type"`
	// From is nil for registration.created and registration.waitlisted.
	From *Status `json:"from"`
	To   Status  `json:"to"`
	// Seats is the registration's seats after the change; SeatsFrom is
	// set on registration.seats_changed only: its seats before.
	Seats     int  `json:"seats"`
	SeatsFrom *int `json:"seats_from,omitempty"`
	// Actor is "admin:<sub>", "user:<sub>" or "system".
	Actor     string    `json:"actor"`
	RequestID *string   `json:"request_id"`
	At        time.Time `json:"at"`
	// BlockID is the block of a block event, or of a registration that
	// took its seats from a block; else nil.
	BlockID *string `json:"block_id,omitempty"`
	// ListID, Device, Forced and Conflict are set on check-in events
	// (registration.checked_in and registration.checked_out) only: the
	// check-in list, the device that scanned, whether the scan was forced
	// (an offline device's upload) and the rule it broke (nil: none).
	ListID   string  `json:"list_id,omitempty"`
	Device   string  `json:"device,omitempty"`
	Forced   bool    `json:"forced,omitempty"`
	Conflict *string `json:"conflict,omitempty"`
	// Reason is set on registration.released only: CancelReasonUnconfirmed
	// or CancelReasonNoShow, the rule that released the registration's seat.
	Reason string `json:"reason,omitempty"`
}

// EventFeed is one answer of ActivityEvents: pass NextAfter as After next
// time.
type EventFeed struct {
	Items     []Event `json:"items"`
	NextAfter int64   `json:"next_after"`
}

// Webhook is a URL that receives registration events. Secret is set only
// in the answer of CreateWebhook.
type Webhook struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// ActivityID limits the webhook to one activity; nil: all.
	ActivityID *string   `json:"activity_id"`
	Secret     string    `json:"secret,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// NewWebhook is what CreateWebhook sends. Events are event types, or "*"
// for all; ActivityID nil means every activity.
type NewWebhook struct {
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	ActivityID *string  `json:"activity_id"`
}

// Delivery is the state of one event's delivery to a webhook.
type Delivery struct {
	EventID  string `json:"event_id"`
	Attempts int    `json:"attempts"`
	// LastStatusCode is the receiver's status on the last attempt.
	LastStatusCode *int `json:"last_status_code"`
	// LastError says why the last attempt got no answer.
	LastError     *string    `json:"last_error"`
	DeliveredAt   *time.Time `json:"delivered_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	// State is "pending", "delivered" or "failed".
	State string `json:"state"`
}

// DeliveryAttempt is one attempt of a delivery.
type DeliveryAttempt struct {
	// Attempt numbers the delivery's attempts from 1.
	Attempt int `json:"attempt"`
	// At is when the attempt started.
	At time.Time `json:"at"`
	// StatusCode is the receiver's status; nil when it gave no answer, and
	// then Error says why.
	StatusCode *int    `json:"status_code"`
	Error      *string `json:"error"`
	// DurationMS is how long the attempt took, in milliseconds.
	DurationMS float64 `json:"duration_ms"`
}

// NoteStats are a note's view and water counts.
type NoteStats struct {
	NoteID string `json:"note_id"`
	Views  int64  `json:"views"`
	Waters int64  `json:"waters"`
}

// Readiness is the answer of /readyz: Postgres "ok" or "unavailable",
// Redis "ok" or "degraded".
type Readiness struct {
	Postgres string `json:"postgres"`
	Redis    string `json:"redis"`
}

// BlockedLine is the head of a strict waiting list that no capacity of the
// activity can hold now.
type BlockedLine struct {
	RegistrationID string `json:"registration_id"`
	Seats          int    `json:"seats"`
}
