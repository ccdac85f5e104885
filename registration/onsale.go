package registration

import (
	"fmt"
	"time"

	"github.com/physiciansnet/capacityd"
)

// QueueSettings are an activity's admission queue: while an activity has
// one, a signup needs an admission token that the queue hands out in
// position order (see package onsale).
type QueueSettings struct {
	// AdmitPerSecond is how many places are admitted per second on
	// average, over all instances.
	AdmitPerSecond int `json:"admit_per_second"`
	// MaxAdmitted is the most admission tokens out, unused and unexpired,
	// at once.
	MaxAdmitted int `json:"max_admitted"`
	// TokenSeconds is how long an admission token stays valid.
	TokenSeconds int `json:"token_seconds"`
	// AbsentSeconds is how long a waiting place lasts without its holder
	// asking about it.
	AbsentSeconds int `json:"absent_seconds"`
}

// Validate checks the settings against the API's ranges.
func (q QueueSettings) Validate() error {
	for _, f := range []struct {
		name      string
		v, lo, hi int
	}{
		{"admit_per_second", q.AdmitPerSecond, 1, 100_000},
		{"max_admitted", q.MaxAdmitted, 1, 100_000},
		{"token_seconds", q.TokenSeconds, 10, 3_600},
		{"absent_seconds", q.AbsentSeconds, 10, 3_600},
	} {
		if f.v < f.lo || f.v > f.hi {
			return capacityd.Errorf(capacityd.EInvalid, "queue.%s must be %d to %d", f.name, f.lo, f.hi)
		}
	}
	return nil
}

// ValidateWindow checks that a signup window closes after it opens.
func ValidateWindow(opensAt, closesAt *time.Time) error {
	if opensAt != nil && closesAt != nil && !closesAt.After(*opensAt) {
		return capacityd.Errorf(capacityd.EInvalid, "closes_at must be after opens_at")
	}
	return nil
}

// Open reports whether the activity takes signups at at: from its opens_at
// (inclusive) until its closes_at (exclusive).
func (a Activity) Open(at time.Time) bool {
	return (a.OpensAt == nil || !at.Before(*a.OpensAt)) && (a.ClosesAt == nil || at.Before(*a.ClosesAt))
}

// RegistrationClosed is the refusal of a signup outside the activity's
// window.
func RegistrationClosed(a Activity) error {
	return &capacityd.Error{Code: capacityd.ERegistrationClosed,
		Message: fmt.Sprintf("activity %s does not take signups now%s", a.ID, windowText(a)),
		OpensAt: a.OpensAt, ClosesAt: a.ClosesAt}
}

func windowText(a Activity) string {
	switch {
	case a.OpensAt != nil && a.ClosesAt != nil:
		return fmt.Sprintf(" (open from %s until %s)", a.OpensAt.UTC().Format(time.RFC3339), a.ClosesAt.UTC().Format(time.RFC3339))
	case a.OpensAt != nil:
		return fmt.Sprintf(" (opens at %s)", a.OpensAt.UTC().Format(time.RFC3339))
	case a.ClosesAt != nil:
		return fmt.Sprintf(" (closed at %s)", a.ClosesAt.UTC().Format(time.RFC3339))
	}
	return ""
}

// AdmissionRequired is the refusal of a signup on an activity with an
// admission queue without a valid admission token for its user.
func AdmissionRequired(activityID string) error {
	return capacityd.Errorf(capacityd.EAdmissionRequired,
		"activity %s admits signups from its queue: an unused, unexpired Admission-Token of this user is required", activityID)
}

// AdmittedPlace is an admitted queue place, as a change transaction reads it
// for a signup carrying its token.
type AdmittedPlace struct {
	UserID    string
	Token     string
	ExpiresAt time.Time
}
