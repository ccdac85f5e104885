package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

const registrationColumns = `r.id, r.public_id, a.public_id, r.user_id, r.status, r.metadata, r.created_at, r.updated_at, r.expires_at`

func scanRegistration(row pgx.Row) (registration.Registration, error) {
	var r registration.Registration
	var meta []byte
	err := row.Scan(&r.Seq, &r.ID, &r.ActivityID, &r.UserID, &r.Status, &meta, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt)
	r.Metadata = meta
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if r.ExpiresAt != nil {
		t := r.ExpiresAt.UTC()
		r.ExpiresAt = &t
	}
	return r, err
}

func (s *Store) getRegistration(ctx context.Context, db DBTX, id string, forUpdate bool) (registration.Registration, error) {
	q := `SELECT ` + registrationColumns + ` FROM registration r JOIN activity a ON a.id = r.activity_id WHERE r.public_id = $1`
	if forUpdate {
		q += ` FOR UPDATE OF r`
	}
	r, err := scanRegistration(db.QueryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, registration.RegistrationNotFound(id)
	}
	return r, interpret(err)
}

// GetRegistration returns a registration by public id.
func (s *Store) GetRegistration(ctx context.Context, id string) (registration.Registration, error) {
	return s.getRegistration(ctx, s.db, id, false)
}

// ListRegistrations returns up to f.Limit registrations of an activity
// created after f.After, in creation order.
func (s *Store) ListRegistrations(ctx context.Context, f registration.ListFilter) ([]registration.Registration, error) {
	aid, err := s.activityID(ctx, f.ActivityID)
	if err != nil {
		return nil, err
	}
	q := `SELECT ` + registrationColumns + ` FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.activity_id = $1 AND r.id > $2`
	args := []any{aid, f.After, f.Limit}
	if f.Status != "" {
		q += ` AND r.status = $4`
		args = append(args, string(f.Status))
	}
	q += ` ORDER BY r.id LIMIT $3`
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Registration, error) {
		return scanRegistration(row)
	})
	return out, interpret(err)
}

// Cancel makes an occupying registration cancelled; one that is cancelled
// or expired already is returned unchanged with changed=false.
func (s *Store) Cancel(ctx context.Context, id string) (registration.Registration, bool, error) {
	for range 3 {
		r, err := scanRegistration(s.db.QueryRow(ctx, `
			UPDATE registration r SET status = 'cancelled', updated_at = now(), expires_at = NULL
			FROM activity a
			WHERE r.public_id = $1 AND r.status IN `+occupying+` AND a.id = r.activity_id
			RETURNING `+registrationColumns, id))
		if err == nil {
			return r, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return r, false, interpret(err)
		}
		cur, err := s.GetRegistration(ctx, id)
		if err != nil || !cur.Status.Occupying() {
			return cur, false, err
		}
		// Re-admitted between the two statements: cancel again.
	}
	return registration.Registration{}, false, capacityd.Unavailable(nil, "registration %s keeps changing; retry", id)
}

// Transition moves a registration from one of from to to.
func (s *Store) Transition(ctx context.Context, id string, from []registration.Status, to registration.Status, now time.Time) (registration.Registration, error) {
	fromText := make([]string, len(from))
	for i, f := range from {
		fromText[i] = string(f)
	}
	r, err := scanRegistration(s.db.QueryRow(ctx, `
		UPDATE registration r SET status = $2, updated_at = now(),
			expires_at = CASE WHEN $2 = 'awaiting_payment'
				THEN $3::timestamptz + a.hold_seconds * interval '1 second' END
		FROM activity a
		WHERE r.public_id = $1 AND r.status = ANY($4::text[]) AND a.id = r.activity_id
		RETURNING `+registrationColumns, id, string(to), now, fromText))
	if !errors.Is(err, pgx.ErrNoRows) {
		return r, interpret(err)
	}
	cur, err := s.GetRegistration(ctx, id)
	if err != nil {
		return cur, err
	}
	return cur, invalidTransition(cur, to)
}

func invalidTransition(r registration.Registration, to registration.Status) error {
	return capacityd.Errorf(capacityd.EInvalidTransition, "registration %s cannot move from %s to %s", r.ID, r.Status, to)
}

// Readmit approves an expired registration again if its activity has a free
// seat, deciding under the activity's admission lock like a signup.
func (s *Store) Readmit(ctx context.Context, id string) (registration.Registration, error) {
	var r registration.Registration
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var aid int64
		err := tx.QueryRow(ctx, `SELECT activity_id FROM registration WHERE public_id = $1`, id).Scan(&aid)
		if errors.Is(err, pgx.ErrNoRows) {
			return registration.RegistrationNotFound(id)
		}
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		lockActivity(b, aid)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		cur, err := s.getRegistration(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if cur.Status != registration.Expired {
			return invalidTransition(cur, registration.Approved)
		}
		var capacity int
		var taken int64
		var holder *string
		err = tx.QueryRow(ctx, `
			SELECT a.capacity, (`+CountOccupyingSQL+`),
				(SELECT public_id FROM registration WHERE activity_id = $1 AND user_id = $2 AND status IN `+occupying+`)
			FROM activity a WHERE a.id = $1`, aid, cur.UserID).Scan(&capacity, &taken, &holder)
		if err != nil {
			return err
		}
		if holder != nil {
			return registration.AlreadyRegistered(cur.ActivityID, *holder)
		}
		if int(taken) >= capacity {
			return registration.ActivityFull(cur.ActivityID)
		}
		r, err = scanRegistration(tx.QueryRow(ctx, `
			UPDATE registration r SET status = 'approved', updated_at = now(), expires_at = NULL
			FROM activity a WHERE r.public_id = $1 AND a.id = r.activity_id
			RETURNING `+registrationColumns, id))
		if err != nil {
			return err
		}
		_, err = bumpAdmissionEpoch(ctx, tx, aid)
		return err
	})
	return r, err
}

// ExpireHolds expires up to limit awaiting_payment registrations due at
// now, skipping rows locked by other instances.
func (s *Store) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]registration.Registration, error) {
	rows, err := s.db.Query(ctx, `
		UPDATE registration r SET status = 'expired', updated_at = now()
		FROM activity a
		WHERE r.id IN (
			SELECT id FROM registration
			WHERE status = 'awaiting_payment' AND expires_at <= $1
			ORDER BY expires_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED)
		AND r.status = 'awaiting_payment' AND a.id = r.activity_id
		RETURNING `+registrationColumns, now, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Registration, error) {
		return scanRegistration(row)
	})
	return out, interpret(err)
}
