package registration

import (
	"context"
	"time"
)

// Store is what the registration domain needs from the authority
// (PostgreSQL). Every method returns *capacityd.Error values for expected
// failures: not_found, invalid_transition, already_registered, unavailable.
type Store interface {
	CreateActivity(ctx context.Context, id string, in NewActivity) (Activity, error)
	// GetActivity returns the activity with its authoritative taken count.
	GetActivity(ctx context.Context, id string) (Activity, error)
	// UpdateActivity applies p under the activity's admission lock.
	UpdateActivity(ctx context.Context, id string, p ActivityPatch) (Activity, error)
	// SeatCount returns capacity and the COUNT of occupying registrations.
	SeatCount(ctx context.Context, activityID string) (capacity, taken int, err error)

	// Admit runs one admission transaction for a batch of signups of one
	// activity: under the activity's admission lock it reads the
	// AdmissionState, applies Decide, inserts the admitted registrations
	// and the idempotency records, and commits. Results are in request
	// order.
	Admit(ctx context.Context, activityID string, reqs []AdmissionRequest) ([]AdmissionResult, error)
	// FindOutcome returns the stored outcome of an idempotency key, or
	// ok=false.
	FindOutcome(ctx context.Context, activityID, userID, key string) (o IdempotentOutcome, ok bool, err error)
	// PurgeOutcomes deletes idempotency records created before t.
	PurgeOutcomes(ctx context.Context, before time.Time) (int64, error)

	GetRegistration(ctx context.Context, id string) (Registration, error)
	ListRegistrations(ctx context.Context, f ListFilter) ([]Registration, error)
	// Cancel makes an occupying registration cancelled. changed is false
	// when it was already cancelled or expired (returned unchanged).
	Cancel(ctx context.Context, id string) (r Registration, changed bool, err error)
	// Transition moves a registration from one of from to to, setting
	// expires_at to now+hold_seconds when to is AwaitingPayment and
	// clearing it otherwise. It returns invalid_transition when the
	// registration's status is not in from.
	Transition(ctx context.Context, id string, from []Status, to Status, now time.Time) (Registration, error)
	// Readmit moves an expired registration to approved under the
	// activity's admission lock if a seat is free (else activity_full).
	Readmit(ctx context.Context, id string) (Registration, error)
	// ExpireHolds expires up to limit awaiting_payment registrations whose
	// expires_at is at or before now, skipping rows other instances hold,
	// and returns them.
	ExpireHolds(ctx context.Context, now time.Time, limit int) ([]Registration, error)
}
