package registration

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
)

// The MemStore refuses what the schema (migrations/) refuses, with the
// errors the store translates PostgreSQL's refusals into.

// memOutOfRange is the error of a value the schema refuses (a check
// constraint, text that is not valid UTF-8 or holds NUL), as the store
// translates it.
func memOutOfRange(format string, args ...any) error {
	return &capacityd.Error{Code: capacityd.EInvalid, Message: "a value is out of range", Err: fmt.Errorf(format, args...)}
}

// memDatabaseError is the error of any other refusal of the database (a
// unique violation), as the store translates it.
func memDatabaseError(format string, args ...any) error {
	return &capacityd.Error{Code: capacityd.EInternal, Message: "database error", Err: fmt.Errorf(format, args...)}
}

// memText checks that PostgreSQL stores s as text.
func memText(column, s string) error {
	if !storable(s) {
		return memOutOfRange("%s: %q is not valid UTF-8 without NUL", column, s)
	}
	return nil
}

func memCheckActivityRow(a Activity) error {
	if n := utf8.RuneCountInString(a.Title); n < 1 || n > MaxTitleLen {
		return memOutOfRange("activity title of %d characters", n)
	}
	if a.Capacity < 0 || a.Capacity > MaxCapacity {
		return memOutOfRange("activity capacity %d", a.Capacity)
	}
	if a.HoldSeconds < MinHoldSeconds || a.HoldSeconds > MaxHoldSeconds {
		return memOutOfRange("activity hold_seconds %d", a.HoldSeconds)
	}
	return memText("activity title", a.Title)
}

// memCheckRegistrationRow applies the registration table's checks.
func memCheckRegistrationRow(r Registration) error {
	for _, c := range []struct{ column, value string }{{"public_id", r.ID}, {"user_id", r.UserID}, {"status", string(r.Status)}} {
		if err := memText("registration "+c.column, c.value); err != nil {
			return err
		}
	}
	switch {
	case !ValidUserIDLength(r.UserID):
		return memOutOfRange("registration user_id %q", r.UserID)
	case !r.Status.Valid():
		return memOutOfRange("registration status %q", r.Status)
	case r.Status == AwaitingPayment && r.ExpiresAt == nil:
		return memOutOfRange("awaiting_payment registration %s without expires_at", r.ID)
	case r.Status == Waitlisted && r.WaitlistSeq == 0:
		return memOutOfRange("waitlisted registration %s without waitlist_seq", r.ID)
	case !storable(string(r.Metadata)) || !json.Valid(r.Metadata):
		return memOutOfRange("registration metadata %q is not JSON", r.Metadata)
	}
	return nil
}

func memCheckEventRow(e Event) error {
	if e.Seq <= 0 {
		return memOutOfRange("event seq %d", e.Seq)
	}
	if !slices.Contains(EventTypes, e.Type) {
		return memOutOfRange("event type %q", e.Type)
	}
	for _, c := range []struct{ column, value string }{{"registration_id", e.RegistrationID}, {"user_id", e.UserID},
		{"to_status", string(e.To)}, {"actor", e.Actor}, {"request_id", e.RequestID}} {
		if err := memText("event "+c.column, c.value); err != nil {
			return err
		}
	}
	if e.From != nil {
		return memText("event from_status", string(*e.From))
	}
	return nil
}

func memCheckRecordRow(o IdempotentOutcome) error {
	if n := utf8.RuneCountInString(o.Key); n < 1 || n > MaxIdempotencyKey {
		return memOutOfRange("idempotency key of %d characters", n)
	}
	for _, c := range []struct{ column, value string }{{"user_id", o.UserID}, {"key", o.Key},
		{"outcome", o.Outcome}, {"registration_id", o.RegistrationID}} {
		if err := memText("idempotency_key "+c.column, c.value); err != nil {
			return err
		}
	}
	return nil
}
