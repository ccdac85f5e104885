package registration

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
)

// EventType names a change of a registration.
type EventType string

// Event types: every change of a registration is exactly one event.
const (
	// EventCreated: a signup took a seat (→ pending).
	EventCreated EventType = "registration.created"
	// EventWaitlisted: a signup joined the waiting list (→ waitlisted).
	EventWaitlisted EventType = "registration.waitlisted"
	// EventPromoted: a freed seat went to the first in line (waitlisted →
	// pending).
	EventPromoted EventType = "registration.promoted"
	// EventStatusChanged: an admin moved a registration to
	// awaiting_payment or approved.
	EventStatusChanged EventType = "registration.status_changed"
	// EventCancelled: the owner or an admin cancelled it.
	EventCancelled EventType = "registration.cancelled"
	// EventExpired: an awaiting_payment hold ran out.
	EventExpired EventType = "registration.expired"
	// EventReadmitted: a late payment admitted an expired registration
	// again (expired → approved).
	EventReadmitted EventType = "registration.readmitted"
	// EventSeatsChanged: the owner or an admin gave some of the
	// registration's seats back (its status stays).
	EventSeatsChanged EventType = "registration.seats_changed"
	// EventCheckedIn: a check-in list accepted (or, offline, forced) an
	// entry of the registration (its status stays).
	EventCheckedIn EventType = "registration.checked_in"
	// EventCheckedOut: a check-in list recorded its exit (its status
	// stays).
	EventCheckedOut EventType = "registration.checked_out"
	// EventConfirmed: its owner (or an admin) confirmed it (its status
	// stays).
	EventConfirmed EventType = "registration.confirmed"
	// EventReleased: a rule of the activity cancelled it (Reason says
	// which: unconfirmed at confirm_by, or no_show at the door).
	EventReleased EventType = "registration.released"
	// EventAttended: the activity ended and its attendance is eligible
	// (its status stays).
	EventAttended EventType = "registration.attended"
	// EventNoShow: the activity ended and it never entered (its status
	// stays).
	EventNoShow EventType = "registration.no_show"
)

// EventTypes lists every event type.
var EventTypes = []EventType{EventCreated, EventWaitlisted, EventPromoted, EventStatusChanged,
	EventCancelled, EventExpired, EventReadmitted, EventSeatsChanged, EventCheckedIn, EventCheckedOut, EventConfirmed,
	EventReleased, EventAttended, EventNoShow}

// ActorSystem is the actor of changes the service makes on its own: expiry
// and promotion.
const ActorSystem = "system"

// Event is one recorded change of a registration. Seq numbers an
// activity's events 1, 2, 3, … with no gap, in commit order.
type Event struct {
	ID             string    `json:"id"`
	Seq            int64     `json:"seq"`
	ActivityID     string    `json:"activity_id"`
	RegistrationID string    `json:"registration_id"`
	UserID         string    `json:"user_id"`
	Type           EventType `json:"type"`
	From           *Status   `json:"from"`
	To             Status    `json:"to"`
	// Seats is the registration's seats after the change; SeatsFrom, set
	// only on EventSeatsChanged, its seats before.
	Seats     int       `json:"seats"`
	SeatsFrom *int      `json:"seats_from,omitempty"`
	Actor     string    `json:"actor"`
	RequestID string    `json:"request_id"`
	At        time.Time `json:"at"`
	// BlockID is the block of a block event, or of the registration of a
	// registration event that took its seats from a block.
	BlockID *string `json:"block_id,omitempty"`
	// Reason is set on EventReleased only: the rule that released it.
	Reason *CancelReason `json:"reason,omitempty"`
	// Door is set on check-in events only: the list, the device, whether
	// the scan was an offline upload and the rule it broke.
	*Door

	// Registration is the registration as the change left it, for those
	// who deliver the event as it happened (webhooks). Set by Decide; not
	// stored with the event.
	Registration *Registration `json:"-"`
}

// Door is what a check-in event records of its scan.
type Door struct {
	ListID string `json:"list_id"`
	Device string `json:"device"`
	Forced bool   `json:"forced"`
	// Conflict is the rule a forced scan broke, or nil.
	Conflict *string `json:"conflict"`
}

// EventID returns the id of an activity's event seq. An event is named by
// its activity and seq, so its id needs no storage of its own and is the
// same wherever it is read (the event feed, webhook deliveries).
func EventID(activityID string, seq int64) string {
	return "ev_" + strings.TrimPrefix(activityID, "a_") + "_" + strconv.FormatInt(seq, 10)
}

// EventPage is one page of an activity's event feed.
type EventPage struct {
	Items     []Event `json:"items"`
	NextAfter int64   `json:"next_after"`
}

// Feed limits of the activity event feed.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 500
	MaxEventWait      = 30 * time.Second
)

// EventFilter selects a page of an activity's event feed.
type EventFilter struct {
	ActivityID string
	After      int64
	Limit      int
	// Wait is how long an empty page waits for the next event (long poll).
	Wait time.Duration
}

// Validate checks the filter's ranges and fills the default limit.
func (f *EventFilter) Validate() error {
	if f.Limit == 0 {
		f.Limit = DefaultEventLimit
	}
	if f.Limit < 1 || f.Limit > MaxEventLimit {
		return capacityd.Errorf(capacityd.EInvalid, "limit must be between 1 and %d", MaxEventLimit)
	}
	if f.After < 0 {
		return capacityd.Errorf(capacityd.EInvalid, "after must be a seq of 0 or more")
	}
	if f.Wait < 0 || f.Wait > MaxEventWait {
		return capacityd.Errorf(capacityd.EInvalid, "wait must be between 0 and %d seconds", int(MaxEventWait.Seconds()))
	}
	return nil
}

// blockEvent is the JSON shape of a block event: no registration, user or
// status; Seats is the block's seats (created) or those it returned.
type blockEvent struct {
	ID         string    `json:"id"`
	Seq        int64     `json:"seq"`
	ActivityID string    `json:"activity_id"`
	BlockID    *string   `json:"block_id"`
	Type       EventType `json:"type"`
	Seats      int       `json:"seats"`
	Actor      string    `json:"actor"`
	RequestID  string    `json:"request_id"`
	At         time.Time `json:"at"`
}

// MarshalJSON writes a registration event with every field, and a block
// event (EventType.IsBlockEvent) as a blockEvent.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Type.IsBlockEvent() {
		return json.Marshal(blockEvent{ID: e.ID, Seq: e.Seq, ActivityID: e.ActivityID, BlockID: e.BlockID, Type: e.Type,
			Seats: e.Seats, Actor: e.Actor, RequestID: e.RequestID, At: e.At})
	}
	type plain Event
	return json.Marshal(plain(e))
}
