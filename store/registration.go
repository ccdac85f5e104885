package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// registrationColumns are a registration's columns, for a query over
// registration r joined with its activity a.
const registrationColumns = `r.id, r.public_id, a.public_id, r.user_id, r.status, r.seats, r.metadata, r.created_at, r.updated_at,
	r.expires_at, coalesce(r.waitlist_seq, 0), coalesce(r.joined, 0), r.block_id, ` + checkedInSQL + `, r.confirmed_at,
	r.cancel_reason`

// checkedInSQL says whether the registration r has an entry on any
// check-in list (its records, by checkin_record_registration_idx). It is
// a scalar subquery, not EXISTS: PostgreSQL may plan an EXISTS as a
// hashed subplan that reads checkin_record whole, which it prefers when
// the table was small at its last ANALYZE, as it is while a door's rush
// fills it; a scalar subquery is probed by the index for each row.
const checkedInSQL = `coalesce((SELECT true FROM checkin_record k WHERE k.registration_id = r.id AND k.entries > 0 LIMIT 1), false)`

// withPosition adds a waitlisted registration's place in line: one more
// than the waitlisted registrations of its activity that joined before it,
// an index-only count over registration_waitlist_idx.
const withPosition = registrationColumns + `,
	CASE WHEN r.status = 'waitlisted' THEN (SELECT count(*) + 1 FROM registration w
		WHERE w.activity_id = r.activity_id AND w.status = 'waitlisted' AND w.waitlist_seq < r.waitlist_seq) END`

func scanRegistration(row pgx.Row, extra ...any) (registration.Registration, error) {
	var r registration.Registration
	var meta []byte
	err := row.Scan(append([]any{&r.Seq, &r.ID, &r.ActivityID, &r.UserID, &r.Status, &r.Seats, &meta, &r.CreatedAt, &r.UpdatedAt,
		&r.ExpiresAt, &r.WaitlistSeq, &r.Joined, &r.BlockID, &r.CheckedIn, &r.ConfirmedAt,
		&r.CancelReason}, extra...)...)
	r.Metadata = meta
	r.ConfirmedAt = utc(r.ConfirmedAt)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if r.ExpiresAt != nil {
		t := r.ExpiresAt.UTC()
		r.ExpiresAt = &t
	}
	return r, err
}

func scanWithPosition(row pgx.Row) (registration.Registration, error) {
	var pos *int64
	r, err := scanRegistration(row, &pos)
	if pos != nil {
		p := int(*pos)
		r.WaitlistPosition = &p
	}
	return r, err
}

// scanEach scans rows of registrationColumns followed by the activity's
// internal id.
func scanEach(rows pgx.Rows, f func(aid int64, r registration.Registration)) error {
	defer rows.Close()
	for rows.Next() {
		var aid int64
		r, err := scanRegistration(rows, &aid)
		if err != nil {
			return err
		}
		f(aid, r)
	}
	return rows.Err()
}

// GetRegistrations returns the registrations of ids that exist, with their
// waiting-list positions, in any order: one statement for the lookups of
// many requests.
//
// PostgreSQL would plan each execution anew for its list of ids (a custom
// plan, which here costs more than the lookup itself); the lookup runs
// with the generic plan instead (see readGeneric), the same index scan.
func (s *Store) GetRegistrations(ctx context.Context, ids []string) ([]registration.Registration, error) {
	var out []registration.Registration
	err := s.readGeneric(ctx, func(b *pgx.Batch) {
		b.Queue(getRegistrationsSQL, ids).Query(func(rows pgx.Rows) error {
			var err error
			out, err = collectRows(rows)
			return err
		})
	})
	return out, err
}

// getRegistrationsSQL reads the registrations of a list of public ids.
const getRegistrationsSQL = `SELECT ` + withPosition + `
	FROM registration r JOIN activity a ON a.id = r.activity_id WHERE r.public_id = ANY($1)`

// ListRegistrations returns up to f.Limit registrations of an activity
// created after the one of public id f.After, in creation order.
func (s *Store) ListRegistrations(ctx context.Context, f registration.ListFilter) ([]registration.Registration, error) {
	aid, err := s.activityID(ctx, f.ActivityID)
	if err != nil {
		return nil, err
	}
	after, err := s.registrationAfterInActivity(ctx, f.After, aid)
	if err != nil {
		return nil, err
	}
	q, args := activityPage(withPosition, aid, after, f.Limit, f.Status)
	return s.collect(ctx, q, args...)
}

// activityPage returns the keyset query of the columns cols of up to limit
// registrations of an activity (by internal id) created after the internal
// id after, in creation order, of the status when it is set, with its
// arguments.
func activityPage(cols string, aid, after int64, limit int, status registration.Status) (string, []any) {
	q := `SELECT ` + cols + ` FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.activity_id = $1 AND r.id > $2`
	args := []any{aid, after, limit}
	if status != "" {
		q += ` AND r.status = $4`
		args = append(args, string(status))
	}
	return q + ` ORDER BY r.id LIMIT $3`, args
}

// exportChunk is how many rows one statement of an export reads.
const exportChunk = 1000

// ExportRegistrations calls emit for each of an activity's registrations
// (of the status, when set) in creation order. It reads them in chunks of
// exportChunk, one short statement each, by keyset on the internal id:
// the statement timeout bounds each chunk, not the whole export; a
// connection is held only while a chunk is read, however slowly emit
// writes the rows out; and memory holds one chunk, whatever the number of
// rows. Each row appears once; a registration that changes during the
// export appears as its chunk read it.
func (s *Store) ExportRegistrations(ctx context.Context, activityID string, status registration.Status, emit func(registration.Registration) error) error {
	aid, err := s.activityID(ctx, activityID)
	if err != nil {
		return err
	}
	chunk := make([]registration.Registration, 0, exportChunk)
	var after int64
	for {
		// Without the waiting-list positions a page carries: a CSV row
		// has none.
		q, args := activityPage(registrationColumns, aid, after, exportChunk, status)
		rows, err := s.db.Query(ctx, q, args...)
		if err != nil {
			return interpret(err)
		}
		chunk, err = pgx.AppendRows(chunk[:0], rows, func(row pgx.CollectableRow) (registration.Registration, error) {
			return scanRegistration(row)
		})
		if err != nil {
			return interpret(err)
		}
		for _, r := range chunk {
			if err := emit(r); err != nil {
				return err
			}
		}
		if len(chunk) < exportChunk {
			return nil
		}
		after = chunk[len(chunk)-1].Seq
	}
}

// UserRegistrations returns up to f.Limit of a user's registrations over
// all activities, newest first, created before the one of public id
// f.Before ("": the newest).
func (s *Store) UserRegistrations(ctx context.Context, f registration.UserFilter) ([]registration.Registration, error) {
	before, err := s.registrationAfterOfUser(ctx, f.Before, f.UserID)
	if err != nil {
		return nil, err
	}
	if before == 0 {
		before = 1<<63 - 1
	}
	return s.collect(ctx, `SELECT `+withPosition+` FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.user_id = $1 AND r.id < $2 ORDER BY r.id DESC LIMIT $3`, f.UserID, before, f.Limit)
}

func (s *Store) collect(ctx context.Context, q string, args ...any) ([]registration.Registration, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := collectRows(rows)
	return out, interpret(err)
}

// collectRows reads rows of withPosition.
func collectRows(rows pgx.Rows) ([]registration.Registration, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Registration, error) {
		return scanWithPosition(row)
	})
}

// ClaimDueHolds returns up to limit awaiting_payment registrations due at
// now, oldest deadline first, skipping rows that another instance's claim
// or change transaction holds at the moment. The claim ends with the
// statement: the expiries themselves are commands on the activities'
// queues, which find a hold already expired (or approved) unchanged.
func (s *Store) ClaimDueHolds(ctx context.Context, now time.Time, limit int) ([]registration.DueHold, error) {
	rows, err := s.db.Query(ctx, `
		SELECT r.public_id, a.public_id FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.status = 'awaiting_payment' AND r.expires_at <= $1
		ORDER BY r.expires_at LIMIT $2
		FOR UPDATE OF r SKIP LOCKED`, now, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[registration.DueHold])
	return out, interpret(err)
}
