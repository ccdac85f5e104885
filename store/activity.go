package store

import (
	"time"

	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// occupying and active are the SQL lists of occupying and of active
// (occupying or waitlisted) statuses. They must stay textually equal to the
// predicates of registration_occupying_idx and
// registration_one_active_per_user_idx so that the planner can prove the
// partial indexes apply.
const (
	occupying = `('pending', 'awaiting_payment', 'approved')`
	active    = `('pending', 'awaiting_payment', 'approved', 'waitlisted')`
)

// CountOccupyingSQL is the authority: the seats of the occupying
// registrations of an activity (by internal id), summed by an index-only
// scan of registration_occupying_idx (which includes the seats).
const CountOccupyingSQL = `SELECT coalesce(sum(seats), 0) FROM registration WHERE activity_id = $1 AND status IN ` + occupying

// countWaitingSQL is the length of an activity's waiting list.
const countWaitingSQL = `SELECT count(*) FROM registration WHERE activity_id = $1 AND status = 'waitlisted'`

var activityColumns = `a.id, a.public_id, a.title, a.capacity, a.hold_seconds, a.waitlist,
	a.max_seats_per_registration, a.waitlist_policy, a.created_at, a.updated_at,
	(SELECT coalesce(sum(r.seats), 0) FROM registration r WHERE r.activity_id = a.id AND r.status IN ` + occupying + `),
	(SELECT count(*) FROM registration r WHERE r.activity_id = a.id AND r.status = 'waitlisted'),
	ARRAY(SELECT p.public_id FROM activity_pool m JOIN pool p ON p.id = m.pool_id WHERE m.activity_id = a.id ORDER BY p.public_id),
	` + activityPoolsSQL + `,
	(SELECT x.public_id FROM series x WHERE x.id = a.series_id), ` + reservedSQL("a.id") + `,
	a.opens_at, a.closes_at, a.queue, ` + activityScheduleColumns + `,
	(SELECT r.public_id FROM registration r WHERE r.activity_id = a.id AND r.status = 'waitlisted' ORDER BY r.waitlist_seq LIMIT 1),
	(SELECT r.seats FROM registration r WHERE r.activity_id = a.id AND r.status = 'waitlisted' ORDER BY r.waitlist_seq LIMIT 1)`

// activityScheduleColumns are an activity's schedule (registration.Schedule), for
// a query over activity a; activityScheduleDest scans them.
const activityScheduleColumns = `a.starts_at, a.ends_at, a.attendance_percent, a.confirm_by, a.release_no_shows_after_minutes`

func activityScheduleDest(a *registration.Activity) []any {
	return []any{&a.StartsAt, &a.EndsAt, &a.AttendancePercent, &a.ConfirmBy, &a.ReleaseNoShowsAfterMinutes}
}

// activityPoolsSQL reads the inputs of the seat rule for an activity's
// (a.id) pools: their capacities, taken and reserved, three arrays in the
// order of the pools' public ids (poolRooms makes rooms of them).
var activityPoolsSQL = poolArraySQL("p.capacity::bigint") + `,
	` + poolArraySQL(poolTakenSQL("p.id")) + `,
	` + poolArraySQL(poolReservedSQL("p.id"))

// poolArraySQL returns an array of expr over the pools p of the activity
// a.id, in the order of their public ids.
func poolArraySQL(expr string) string {
	return `ARRAY(SELECT ` + expr + ` FROM activity_pool m JOIN pool p ON p.id = m.pool_id
		WHERE m.activity_id = a.id ORDER BY p.public_id)`
}

// poolRooms returns the rooms of pools read as arrays (activityPoolsSQL;
// ids may be nil), for registration.NewCounts.
func poolRooms(ids []string, capacities, taken, reserved []int64) []registration.Room {
	var rooms []registration.Room
	for k := range capacities {
		r := registration.Room{Capacity: int(capacities[k]), Taken: int(taken[k]), Reserved: int(reserved[k])}
		if k < len(ids) {
			r.Pool = ids[k]
		}
		rooms = append(rooms, r)
	}
	return rooms
}

func scanActivity(row pgx.Row) (registration.Activity, error) {
	var a registration.Activity
	var taken, waiting, reserved int64
	var poolCapacities, poolTaken, poolReserved []int64
	var headID *string
	var headSeats *int32
	err := row.Scan(append([]any{&a.Seq, &a.ID, &a.Title, &a.Capacity, &a.HoldSeconds, &a.Waitlist, &a.MaxSeats, &a.Policy,
		&a.CreatedAt, &a.UpdatedAt, &taken, &waiting, &a.Pools, &poolCapacities, &poolTaken, &poolReserved, &a.SeriesID,
		&reserved, &a.OpensAt, &a.ClosesAt, &a.Queue}, append(activityScheduleDest(&a), &headID, &headSeats)...)...)
	utcWindow(&a)
	a.Taken, a.Waiting, a.Reserved = int(taken), int(waiting), int(reserved)
	rooms := poolRooms(a.Pools, poolCapacities, poolTaken, poolReserved)
	a.Remaining = registration.NewCounts(a.SeatRoom(), a.Waiting, a.Waitlist, a.Policy, rooms).Remaining()
	if headID != nil && headSeats != nil {
		a.LineBlockedBy = registration.BlockedBy(a, rooms, *headID, int(*headSeats))
	}
	if a.Pools == nil {
		a.Pools = []string{}
	}
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return a, err
}

// CreateActivity inserts an activity with public id id, in its pools: it
// takes the pools' locks (a new activity changes what their change
// transactions read) and moves their last seq forward.
func (s *Store) CreateActivity(ctx context.Context, id string, in registration.NewActivity) (registration.Activity, error) {
	insert := `INSERT INTO activity AS a (public_id, title, capacity, hold_seconds, waitlist, max_seats_per_registration, waitlist_policy,
			series_id, opens_at, closes_at, queue, starts_at, ends_at, attendance_percent, confirm_by, release_no_shows_after_minutes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		RETURNING `
	var series *int64
	if in.SeriesID != "" {
		ids, err := s.internalIDs(ctx, `SELECT public_id, id FROM series WHERE public_id = ANY($1)`, []string{in.SeriesID})
		if err != nil {
			return registration.Activity{}, err
		}
		sid, ok := ids[in.SeriesID]
		if !ok {
			return registration.Activity{}, registration.UnknownSeries(in.SeriesID)
		}
		series = &sid
	}
	args := []any{id, in.Title, in.Capacity, in.HoldSeconds, in.Waitlist,
		cmp.Or(in.MaxSeats, registration.DefaultMaxSeats), string(cmp.Or(in.Policy, registration.PolicyStrict)), series,
		in.OpensAt, in.ClosesAt, in.Queue, in.StartsAt, in.EndsAt, in.AttendancePercent, in.ConfirmBy, in.ReleaseNoShowsAfterMinutes}
	if len(in.Pools) == 0 {
		a, err := scanActivity(s.db.QueryRow(ctx, insert+activityColumns, args...))
		return a, interpret(err)
	}
	pids, err := s.poolIDs(ctx, in.Pools)
	if err != nil {
		return registration.Activity{}, err
	}
	var ids []int64
	var unknown []string
	for _, p := range in.Pools {
		if pid, ok := pids[p]; ok {
			ids = append(ids, pid)
		} else {
			unknown = append(unknown, p)
		}
	}
	if len(unknown) > 0 {
		return registration.Activity{}, registration.UnknownPools(unknown)
	}
	slices.Sort(ids)
	var a registration.Activity
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+admissionLockTimeout+`'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT count(pg_advisory_xact_lock($1, k.id)) FROM unnest($2::int[]) AS k(id)`,
			int32(poolLockNamespace), ids); err != nil {
			return err
		}
		var aid int64
		if err := tx.QueryRow(ctx, insert+`a.id`, args...).Scan(&aid); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO activity_pool (activity_id, pool_id) SELECT $1, unnest($2::bigint[])`, aid, ids); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE pool SET last_seq = last_seq + 1 WHERE id = ANY($1)`, ids); err != nil {
			return err
		}
		a, err = scanActivity(tx.QueryRow(ctx, `SELECT `+activityColumns+` FROM activity a WHERE a.id = $1`, aid))
		return err
	})
	if err != nil {
		return registration.Activity{}, err
	}
	s.members.forget(nil, ids)
	return a, nil
}

// GetActivity returns an activity with its authoritative taken and waiting
// counts.
func (s *Store) GetActivity(ctx context.Context, id string) (registration.Activity, error) {
	a, err := scanActivity(s.db.QueryRow(ctx, `SELECT `+activityColumns+` FROM activity a WHERE a.public_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, registration.ActivityNotFound(id)
	}
	return a, interpret(err)
}

// ListActivities returns up to limit activities created before the one of
// public id cursor ("": from the newest), newest first.
func (s *Store) ListActivities(ctx context.Context, cursor string, limit int) ([]registration.Activity, error) {
	before, err := s.activityAfter(ctx, cursor)
	if err != nil {
		return nil, err
	}
	if before == 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.Query(ctx, `SELECT `+activityColumns+` FROM activity a WHERE a.id < $1 ORDER BY a.id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Activity, error) { return scanActivity(row) })
	return out, interpret(err)
}

// SeatState returns an activity's seats as of its last event, read in one
// snapshot: capacity, waiting-list setting and updated_at, the authority's
// counts and the last seq, and the seat states of its pools (one statement:
// the activity's part is repeated on a row per pool).
func (s *Store) SeatState(ctx context.Context, activityID string) (registration.SeatState, error) {
	aid, err := s.activityID(ctx, activityID)
	if err != nil {
		return registration.SeatState{}, err
	}
	rows, err := s.db.Query(ctx, `
		WITH s AS (
			SELECT a.capacity, a.waitlist, a.waitlist_policy, a.updated_at, (`+CountOccupyingSQL+`) AS taken,
				(`+countWaitingSQL+`) AS waiting, coalesce((SELECT last_seq FROM activity_state WHERE activity_id = a.id), 0) AS last_seq,
				`+reservedSQL("a.id")+` AS reserved
			FROM activity a WHERE a.id = $1)
		SELECT s.capacity, s.waitlist, s.waitlist_policy, s.updated_at, s.taken, s.waiting, s.last_seq, s.reserved, `+poolStateColumns+`
		FROM s LEFT JOIN activity_pool m ON m.activity_id = $1 LEFT JOIN pool p ON p.id = m.pool_id
		ORDER BY p.public_id`, aid)
	if err != nil {
		return registration.SeatState{}, interpret(err)
	}
	defer rows.Close()
	var st registration.SeatState
	found := false
	for rows.Next() {
		var taken, waiting, reserved int64
		var ps nullablePoolState
		if err := rows.Scan(append([]any{&st.Capacity, &st.Waitlist, &st.Policy, &st.UpdatedAt, &taken, &waiting, &st.LastSeq, &reserved},
			ps.targets()...)...); err != nil {
			return registration.SeatState{}, interpret(err)
		}
		found = true
		st.Taken, st.Waiting, st.Reserved, st.UpdatedAt = int(taken), int(waiting), int(reserved), st.UpdatedAt.UTC()
		if p, ok := ps.state(); ok {
			st.Pools = append(st.Pools, p)
		}
	}
	if err := rows.Err(); err != nil {
		return registration.SeatState{}, interpret(err)
	}
	if !found {
		return registration.SeatState{}, registration.ActivityNotFound(activityID)
	}
	return st, nil
}

// utcWindow gives an activity's window in UTC, as every time of an answer.
func utcWindow(a *registration.Activity) {
	for _, t := range []**time.Time{&a.OpensAt, &a.ClosesAt, &a.StartsAt, &a.EndsAt, &a.ConfirmBy} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
}
