package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/registration"
)

// ActivityRows returns the activities among ids that exist, in no
// particular order, in one statement: their settings only, without the
// seat counts (Taken, Remaining and Waiting are zero) but with their
// pools, for the public
// reads that take their seats from the display tier.
func (s *Store) ActivityRows(ctx context.Context, ids []string) ([]registration.Activity, error) {
	rows, err := s.db.Query(ctx, `
		SELECT a.id, a.public_id, a.title, a.capacity, a.hold_seconds, a.waitlist, a.max_seats_per_registration, a.waitlist_policy,
			a.created_at, a.updated_at,
			ARRAY(SELECT p.public_id FROM activity_pool m JOIN pool p ON p.id = m.pool_id WHERE m.activity_id = a.id
				ORDER BY p.public_id),
			(SELECT x.public_id FROM series x WHERE x.id = a.series_id), a.opens_at, a.closes_at, a.queue, `+activityScheduleColumns+`
		FROM activity a WHERE a.public_id = ANY($1)`, ids)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Activity, error) {
		var a registration.Activity
		err := row.Scan(append([]any{&a.Seq, &a.ID, &a.Title, &a.Capacity, &a.HoldSeconds, &a.Waitlist, &a.MaxSeats, &a.Policy,
			&a.CreatedAt, &a.UpdatedAt, &a.Pools, &a.SeriesID, &a.OpensAt, &a.ClosesAt, &a.Queue}, activityScheduleDest(&a)...)...)
		a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
		utcWindow(&a)
		return a, err
	})
	return out, interpret(err)
}

// PoolRows returns the pools among ids that exist, with their settings
// and activities (Taken, Remaining and Reserved zero), in one statement.
func (s *Store) PoolRows(ctx context.Context, ids []string) ([]registration.Pool, error) {
	rows, err := s.db.Query(ctx, `SELECT `+poolColumns+`, 0, 0 FROM pool p WHERE p.public_id = ANY($1)`, ids)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Pool, error) {
		p, err := scanPool(row)
		p.Remaining = 0
		return p, err
	})
	return out, interpret(err)
}

// NotesStats returns the counters of the notes among ids that were ever
// counted, in one statement; a note never seen has no entry.
func (s *Store) NotesStats(ctx context.Context, ids []string) ([]note.Stats, error) {
	rows, err := s.db.Query(ctx, `SELECT note_id, views, waters FROM note_stats WHERE note_id = ANY($1)`, ids)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (note.Stats, error) {
		var st note.Stats
		err := row.Scan(&st.NoteID, &st.Views, &st.Waters)
		return st, err
	})
	return out, interpret(err)
}
