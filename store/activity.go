package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// occupying is the SQL list of occupying statuses. It must stay textually
// equal to the predicate of registration_one_occupying_per_user_idx so that
// the planner can prove the partial index applies.
const occupying = `('pending', 'awaiting_payment', 'approved')`

// CountOccupyingSQL is the authority: the number of occupying registrations
// of an activity (by internal id), counted over an index.
const CountOccupyingSQL = `SELECT count(*) FROM registration WHERE activity_id = $1 AND status IN ` + occupying

const activityColumns = `a.public_id, a.title, a.capacity, a.hold_seconds, a.created_at, a.updated_at,
	(SELECT count(*) FROM registration r WHERE r.activity_id = a.id AND r.status IN ` + occupying + `)`

func scanActivity(row pgx.Row) (registration.Activity, error) {
	var a registration.Activity
	var taken int64
	err := row.Scan(&a.ID, &a.Title, &a.Capacity, &a.HoldSeconds, &a.CreatedAt, &a.UpdatedAt, &taken)
	a.Taken = int(taken)
	a.Remaining = registration.Remaining(a.Capacity, a.Taken)
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return a, err
}

// CreateActivity inserts an activity with public id id.
func (s *Store) CreateActivity(ctx context.Context, id string, in registration.NewActivity) (registration.Activity, error) {
	row := s.db.QueryRow(ctx, `
		INSERT INTO activity AS a (public_id, title, capacity, hold_seconds)
		VALUES ($1, $2, $3, $4)
		RETURNING `+activityColumns, id, in.Title, in.Capacity, in.HoldSeconds)
	a, err := scanActivity(row)
	return a, interpret(err)
}

// GetActivity returns an activity with its authoritative taken count.
func (s *Store) GetActivity(ctx context.Context, id string) (registration.Activity, error) {
	a, err := scanActivity(s.db.QueryRow(ctx, `SELECT `+activityColumns+` FROM activity a WHERE a.public_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, registration.ActivityNotFound(id)
	}
	return a, interpret(err)
}

// UpdateActivity applies p under the activity's admission lock, so a
// capacity change is ordered with admission batches.
func (s *Store) UpdateActivity(ctx context.Context, id string, p registration.ActivityPatch) (registration.Activity, error) {
	aid, err := s.activityID(ctx, id)
	if err != nil {
		return registration.Activity{}, err
	}
	var a registration.Activity
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		lockActivity(b, aid)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		a, err = scanActivity(tx.QueryRow(ctx, `
			UPDATE activity AS a SET
				title = coalesce($2, title),
				capacity = coalesce($3, capacity),
				hold_seconds = coalesce($4, hold_seconds),
				updated_at = now()
			WHERE a.id = $1
			RETURNING `+activityColumns, aid, p.Title, p.Capacity, p.HoldSeconds))
		return err
	})
	return a, err
}

// SeatCount returns an activity's capacity and its COUNT of occupying
// registrations.
func (s *Store) SeatCount(ctx context.Context, activityID string) (capacity, taken int, err error) {
	aid, err := s.activityID(ctx, activityID)
	if err != nil {
		return 0, 0, err
	}
	var n int64
	err = s.db.QueryRow(ctx, `SELECT a.capacity, (`+CountOccupyingSQL+`) FROM activity a WHERE a.id = $1`, aid).Scan(&capacity, &n)
	return capacity, int(n), interpret(err)
}
