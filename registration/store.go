package registration

import (
	"context"
	"errors"
	"time"
)

// Store is what the registration domain needs from the authority
// (PostgreSQL). Every method returns *capacityd.Error values for expected
// failures: not_found, unavailable.
type Store interface {
	CreateActivity(ctx context.Context, id string, in NewActivity) (Activity, error)
	// GetActivity returns the activity with its authoritative Taken and
	// Waiting.
	GetActivity(ctx context.Context, id string) (Activity, error)
	// ListActivities returns up to limit activities created before the one
	// of public id before ("": from the newest), newest first, or
	// UnknownCursor when before names no activity.
	ListActivities(ctx context.Context, before string, limit int) ([]Activity, error)

	// CreateSeries inserts a series with public id id.
	CreateSeries(ctx context.Context, id string, in NewSeries) (Series, error)
	// GetSeries returns the series, or not_found.
	GetSeries(ctx context.Context, id string) (Series, error)
	// ListSeries returns up to limit series created before the one of
	// public id before ("": from the newest), newest first, or
	// UnknownCursor when before names no series.
	ListSeries(ctx context.Context, before string, limit int) ([]Series, error)
	// UpdateSeries changes a series and returns it, or not_found.
	UpdateSeries(ctx context.Context, id string, p SeriesPatch) (Series, error)

	// CreatePool inserts a pool with public id id.
	CreatePool(ctx context.Context, id string, in NewPool) (Pool, error)
	// GetPool returns the pool with its authoritative Taken, or not_found.
	GetPool(ctx context.Context, id string) (Pool, error)
	// ListPools returns up to limit pools created before the one of
	// public id before ("": from the newest), newest first, or
	// UnknownCursor when before names no pool.
	ListPools(ctx context.Context, before string, limit int) ([]Pool, error)

	// Apply runs one change transaction for the queued commands of one or
	// more activities (and pools): it takes their admission locks, and
	// those of their pools, in one global order (so that instances never
	// deadlock), reads their states, decides with DecideAll, writes every
	// plan (rows, events, idempotency records) and commits. The results
	// are in batch order, one per batch, followed by one per activity
	// that the transaction changed without commands of its own (waiting
	// registrations promoted across a pool); a batch whose activity (or
	// pool) does not exist gets a not_found Applied.Err.
	Apply(ctx context.Context, batches []CommandBatch, now time.Time) ([]Applied, error)
	// CheckFull answers FullChecks, each from one snapshot of the
	// authority, without taking any lock.
	CheckFull(ctx context.Context, checks []FullCheck) ([]FullAnswer, error)
	// ListBlocks returns the live blocks of an activity, oldest first, with
	// their exact Used, or not_found for an unknown activity.
	ListBlocks(ctx context.Context, activityID string) ([]Block, error)
	// GetBlock returns a live block, or not_found.
	GetBlock(ctx context.Context, id string) (Block, error)
	// ClaimDueBlocks returns up to limit live blocks whose expiry is due at
	// now, skipping those other instances are claiming at the moment.
	ClaimDueBlocks(ctx context.Context, now time.Time, limit int) ([]DueBlock, error)
	// ClaimDueHolds returns up to limit awaiting_payment registrations due
	// at now, skipping those other instances are claiming at the moment.
	ClaimDueHolds(ctx context.Context, now time.Time, limit int) ([]DueHold, error)
	// ClaimDueReleases claims activities whose release moment has come,
	// with the registrations to release; ReleaseDone records one done.
	ClaimDueReleases(ctx context.Context, now time.Time, limit int) ([]DueRelease, error)
	ReleaseDone(ctx context.Context, activityID string, reason CancelReason) error
	// NextDueRelease returns the earliest release moment (a confirm_by,
	// or a start plus the minutes of the release at the door) of a release
	// not done that is after after and no later than until.
	NextDueRelease(ctx context.Context, after, until time.Time) (time.Time, bool, error)

	// FindOutcome returns the stored outcome of an idempotency key, or
	// ok=false.
	FindOutcome(ctx context.Context, activityID, userID, key string) (o IdempotentOutcome, ok bool, err error)
	// PurgeOutcomes deletes idempotency records created before t.
	PurgeOutcomes(ctx context.Context, before time.Time) (int64, error)

	// GetRegistrations returns the registrations of ids that exist, with
	// their waiting-list positions, in any order.
	GetRegistrations(ctx context.Context, ids []string) ([]Registration, error)
	ListRegistrations(ctx context.Context, f ListFilter) ([]Registration, error)
	UserRegistrations(ctx context.Context, f UserFilter) ([]Registration, error)
	// ActivityUserRegistrations returns up to f.Limit of the user's
	// registrations of the activity created after the one of public id
	// f.After, in creation order, with their waiting-list positions, or
	// not_found for an unknown activity, or UnknownCursor when f.After
	// names no registration of the activity.
	ActivityUserRegistrations(ctx context.Context, f ActivityUserFilter) ([]Registration, error)
	// SearchActivities returns up to limit activities whose title
	// contains query (case-insensitively), created before the activity of
	// public id before ("": from the newest), newest first.
	SearchActivities(ctx context.Context, query, before string, limit int) ([]Activity, error)
	// SeriesActivities returns up to limit activities of the series
	// created before the one of public id before ("": from the newest),
	// newest first.
	SeriesActivities(ctx context.Context, seriesID, before string, limit int) ([]Activity, error)
	// ExportRegistrations calls emit for each of an activity's
	// registrations (of the status, when set) once, in creation order,
	// reading them as it goes: memory does not grow with their number, and
	// neither a statement nor a connection is held while emit runs (a
	// client may read an export slowly).
	ExportRegistrations(ctx context.Context, activityID string, status Status, emit func(Registration) error) error

	// RegistrationEvents returns a registration's events in seq order.
	RegistrationEvents(ctx context.Context, registrationID string) ([]Event, error)
	// ActivityEvents returns up to f.Limit events of an activity with seq
	// above f.After, in seq order, or not_found for an unknown activity.
	ActivityEvents(ctx context.Context, f EventFilter) ([]Event, error)
}

// Gate is the display tier's fast gate in front of the authority. It
// holds a seat for a signup in flight, or says that none is left.
type Gate interface {
	// Reserve holds seats of the activity for a signup for seats when
	// Admit, on the display's counts (taken + held as Taken), gives the
	// signup its seats. It returns
	// ErrGateFull when Admit refuses it (the authority is asked before
	// anyone is refused), ErrGateWaitlist when the signup will join the
	// waiting list (no hold is needed), and any
	// other error when the display cannot answer (no counter yet, or the
	// display tier is down): the authority then decides alone.
	Reserve(ctx context.Context, activityID string, seats int) (Hold, error)
}

// Gate answers that are not holds.
var (
	ErrGateFull     = errors.New("registration: the display says every seat is taken or held")
	ErrGateWaitlist = errors.New("registration: the display says the signup joins the waiting list")
)

// Observer reacts to committed changes: the display counter, the seat
// streams and webhooks follow the commits, in the order the Service was
// given its observers.
type Observer interface {
	// Committed is called once per change transaction, after its commit
	// (or failure), before the commands' callers are answered.
	Committed(ctx context.Context, commits []Commit)
}

// Changes tells when an activity changes, on any instance.
type Changes interface {
	// Watch returns a channel that receives after each announced change of
	// the activity (and, while announcements may be missed, now and
	// then), and a function that ends the watch.
	Watch(activityID string) (changed <-chan struct{}, stop func())
}
