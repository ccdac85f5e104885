package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/attendance"
	"github.com/physiciansnet/capacityd/registration"
)

// ClaimEndedActivities claims (leases, as the releases are claimed) up to
// limit activities whose ends_at is at or before now and whose end is not
// recorded, skipping those another instance holds.
func (s *Store) ClaimEndedActivities(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		WITH due AS (
			SELECT a.id FROM activity a
			WHERE a.ends_at <= $1 AND a.ended_done_at IS NULL AND (a.due_leased_until IS NULL OR a.due_leased_until < now())
			ORDER BY a.ends_at LIMIT $2 FOR UPDATE SKIP LOCKED
		)
		UPDATE activity a SET due_leased_until = now() + $3 * interval '1 millisecond'
		FROM due WHERE a.id = due.id RETURNING a.public_id`, now, limit, dueLease.Milliseconds())
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, interpret(err)
}

// EndActivity records the end of an activity in one transaction under its
// lock: unless it is recorded already, one event per registration that
// holds a seat that ending names (from = to = its status, actor system),
// each with the activity's next seq, and the end as recorded.
func (s *Store) EndActivity(ctx context.Context, activityID string, at time.Time,
	ending func(attendance.Activity, attendance.Row) registration.EventType) ([]registration.Event, error) {
	aid, err := s.activityID(ctx, activityID)
	if err != nil {
		return nil, err
	}
	var evs []registration.Event
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := LockActivity(ctx, tx, aid); err != nil {
			return err
		}
		var done *time.Time
		var lastSeq int64
		a, err := scanSchedule(tx.QueryRow(ctx, `SELECT `+scheduleColumns+`, a.ended_done_at,
			coalesce((SELECT last_seq FROM activity_state WHERE activity_id = a.id), 0) FROM activity a WHERE a.id = $1`, aid),
			&done, &lastSeq)
		if err != nil || done != nil {
			return err
		}
		rows, err := tx.Query(ctx, attendancePageSQL, aid, 0, 1<<31-1)
		if err != nil {
			return err
		}
		regs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (attendance.Row, error) { return scanAttendanceRow(row) })
		if err != nil {
			return err
		}
		var c eventsOf
		for _, r := range regs {
			typ := ending(a, r)
			if typ == "" {
				continue
			}
			lastSeq++
			status := r.Status
			e := registration.Event{ID: registration.EventID(activityID, lastSeq), Seq: lastSeq, ActivityID: activityID,
				RegistrationID: r.RegistrationID, UserID: r.UserID, Type: typ, From: &status, To: status, Seats: r.Seats,
				Actor: registration.ActorSystem, At: at.Truncate(time.Microsecond)}
			c.add(aid, e)
			evs = append(evs, e)
		}
		b := &pgx.Batch{}
		c.batch(b)
		b.Queue(`INSERT INTO activity_state (activity_id, last_seq) VALUES ($1, $2)
			ON CONFLICT (activity_id) DO UPDATE SET last_seq = excluded.last_seq`, aid, lastSeq)
		b.Queue(`UPDATE activity SET ended_done_at = $2, due_leased_until = NULL WHERE id = $1`, aid, at)
		return tx.SendBatch(ctx, b).Close()
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, registration.ActivityNotFound(activityID)
	}
	return evs, err
}
