package checkin

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// CheckIn is one recorded scan of a list.
type CheckIn struct {
	ID string `json:"id"`
	// Seq numbers the list's check-ins 1, 2, 3, … in commit order.
	Seq            int64     `json:"seq"`
	ListID         string    `json:"list_id"`
	RegistrationID string    `json:"registration_id"`
	ActivityID     string    `json:"activity_id"`
	UserID         string    `json:"user_id"`
	Seats          int       `json:"seats"`
	Type           Type      `json:"type"`
	At             time.Time `json:"at"`
	Device         string    `json:"device"`
	Forced         bool      `json:"forced"`
	// Conflict is the rule a forced check-in broke, or nil.
	Conflict *string `json:"conflict"`
}

// CheckInID returns the id of a list's check-in seq: named by its list
// and seq, it needs no storage of its own.
func CheckInID(listID string, seq int64) string {
	return "ci_" + strings.TrimPrefix(listID, "cl_") + "_" + strconv.FormatInt(seq, 10)
}

// MaxForcedAge is how old a forced scan's time may be.
const MaxForcedAge = 7 * 24 * time.Hour

// maxClockSkew is how far in the future a device's clock may put a forced
// scan.
const maxClockSkew = time.Minute

// RedeemInput is a scan as a door sends it.
type RedeemInput struct {
	// Ticket is the scanned ticket, or RegistrationID the registration
	// found by search: exactly one of them.
	Ticket         string
	RegistrationID string
	Type           Type
	Device         string
	Force          bool
	// At is when a forced scan happened (nil: now); only with Force.
	At             *time.Time
	IdempotencyKey string
}

// Validate checks the scan's fields and fills its defaults.
func (in *RedeemInput) Validate(now time.Time) error {
	if (in.Ticket == "") == (in.RegistrationID == "") {
		return capacityd.Errorf(capacityd.EInvalid, "give either ticket or registration_id")
	}
	if in.Type == "" {
		in.Type = TypeEntry
	}
	if in.Type != TypeEntry && in.Type != TypeExit {
		return capacityd.Errorf(capacityd.EInvalid, `type must be "entry" or "exit"`)
	}
	if err := ValidDevice(in.Device); err != nil {
		return err
	}
	if in.At != nil {
		if !in.Force {
			return capacityd.Errorf(capacityd.EInvalid, "at is for forced uploads only (with force: true)")
		}
		if in.At.Before(now.Add(-MaxForcedAge)) {
			return capacityd.Errorf(capacityd.EInvalid, "at must be at most 7 days old")
		}
		if in.At.After(now.Add(maxClockSkew)) {
			return capacityd.Errorf(capacityd.EInvalid, "at must not be in the future")
		}
	}
	return registration.ValidateIdempotencyKey(in.IdempotencyKey)
}

// ValidDevice checks a device name: 1 to MaxDeviceLen printable
// characters.
func ValidDevice(d string) error {
	if n := utf8.RuneCountInString(d); n < 1 || n > MaxDeviceLen || !utf8.ValidString(d) {
		return capacityd.Errorf(capacityd.EInvalid, "device must be 1 to %d printable characters", MaxDeviceLen)
	}
	for _, r := range d {
		if !unicode.IsPrint(r) {
			return capacityd.Errorf(capacityd.EInvalid, "device must be 1 to %d printable characters", MaxDeviceLen)
		}
	}
	return nil
}

// hash identifies a scan's request for idempotency conflicts.
func (in RedeemInput) hash() []byte {
	at := ""
	if in.At != nil {
		at = in.At.UTC().Format(time.RFC3339Nano)
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s\x00%t\x00%s", in.Ticket, in.RegistrationID, in.Type, in.Device, in.Force, at))
	return h[:]
}

// Redemption is a scan ready for the list's transaction: its registration
// found, its caller known.
type Redemption struct {
	ListID         string
	RegistrationID string
	// ByTicket is true when the registration came from a ticket: a
	// registration that does not exist is then invalid_ticket, not
	// not_found.
	ByTicket bool
	// TicketActivity is the activity the ticket names ("" without one):
	// a registration of another activity makes the ticket invalid.
	TicketActivity string
	Scan           Scan
	Origin         registration.Origin
	IdempotencyKey string
	RequestHash    []byte
	// Allowed says whether the caller may scan at the list (read under
	// its lock); an error refuses the scan.
	Allowed func(List) error
}

// Redeemed is what the list's transaction did with a scan.
type Redeemed struct {
	Result       string
	Registration registration.Registration
	CheckIn      CheckIn
	List         List
	// Event is the check-in's event in its activity's history.
	Event registration.Event
	// Replayed is true when the answer is the first one of the same
	// Idempotency-Key.
	Replayed bool
}

// RedeemOutcome is one scan's answer in a batch: what was recorded (or
// replayed), or its refusal.
type RedeemOutcome struct {
	Redeemed
	Err error
}

// Answer is a scan's answer.
type Answer struct {
	Result       string                    `json:"result"`
	Registration registration.Registration `json:"registration"`
	CheckIn      *CheckIn                  `json:"checkin"`
	Inside       int                       `json:"inside"`
	MaxInside    *int                      `json:"max_inside"`
}

// Answer returns the scan's answer.
func (r Redeemed) Answer() Answer {
	ci := r.CheckIn
	return Answer{Result: r.Result, Registration: r.Registration, CheckIn: &ci, Inside: r.List.Inside, MaxInside: r.List.MaxInside}
}

// EventOf returns the event a recorded check-in adds to its activity's
// history (its Seq is the store's to give).
func EventOf(ci CheckIn, reg registration.Registration, o registration.Origin) registration.Event {
	typ := registration.EventCheckedIn
	if ci.Type == TypeExit {
		typ = registration.EventCheckedOut
	}
	from := reg.Status
	return registration.Event{ActivityID: reg.ActivityID, RegistrationID: reg.ID, UserID: reg.UserID, Type: typ,
		From: &from, To: reg.Status, Seats: max(reg.Seats, 1), Actor: o.Actor, RequestID: o.RequestID, At: ci.At,
		BlockID: reg.BlockID, Door: &registration.Door{ListID: ci.ListID, Device: ci.Device, Forced: ci.Forced, Conflict: ci.Conflict}}
}
