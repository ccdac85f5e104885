package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/attendance"
	"github.com/physiciansnet/capacityd/registration"
)

// The attendance reads. An activity's check-ins over every list are read
// through checkin_activity_idx (activity_id, registration_id, at), never
// scanning another activity's; its registrations that hold a seat through
// registration_activity_status_idx (activity_id, status, id).

var _ attendance.Store = (*Store)(nil)

// checkinArrays aggregates, per registration r, its check-ins of every
// list as four arrays in the order (at, list, seq): one row per
// registration however many check-ins it has.
const checkinArrays = `LEFT JOIN LATERAL (
		SELECT array_agg(c.list_id ORDER BY c.at, c.list_id, c.seq) AS lists,
			array_agg(c.seq ORDER BY c.at, c.list_id, c.seq) AS seqs,
			array_agg(c.type ORDER BY c.at, c.list_id, c.seq) AS types,
			array_agg(c.at ORDER BY c.at, c.list_id, c.seq) AS ats
		FROM checkin c WHERE c.activity_id = r.activity_id AND c.registration_id = r.id) c ON true`

// attendanceRowColumns are a row's columns over registration r and
// checkinArrays.
const attendanceRowColumns = `r.id, r.public_id, r.user_id, r.status, r.seats,
	coalesce(c.lists, '{}'), coalesce(c.seqs, '{}'), coalesce(c.types, '{}'), coalesce(c.ats, '{}')`

// attendancePageSQL reads up to $3 registrations of the activity $1 that
// hold a seat, created after the internal id $2, with their check-ins.
const attendancePageSQL = `SELECT ` + attendanceRowColumns + `
	FROM registration r ` + checkinArrays + `
	WHERE r.activity_id = $1 AND r.status IN ` + occupying + ` AND r.id > $2
	ORDER BY r.id LIMIT $3`

// attendanceCountsSQL counts the registrations of the activity $1 that
// hold a seat, and those of them with an entry on any list.
const attendanceCountsSQL = `SELECT count(*), count(*) FILTER (WHERE EXISTS (
		SELECT 1 FROM checkin c WHERE c.activity_id = r.activity_id AND c.registration_id = r.id AND c.type = 'entry'))
	FROM registration r WHERE r.activity_id = $1 AND r.status IN ` + occupying

// scheduleColumns are an activity a's attendance columns.
const scheduleColumns = `a.public_id, a.starts_at, a.ends_at, a.attendance_percent`

// AttendanceSheet reads an activity's schedule, its counts when q.Counts,
// and up to q.Limit of its registrations that hold a seat, after q.After
// (a public id) or q.AfterSeq, with their check-ins: one round trip (two
// with a cursor). The statements run one after the other, each on its own
// snapshot: a registration that changes between them may show in the
// counts as it was a moment before or after the page.
func (s *Store) AttendanceSheet(ctx context.Context, q attendance.SheetQuery) (attendance.SheetRows, error) {
	var out attendance.SheetRows
	aid, err := s.activityID(ctx, q.ActivityID)
	if err != nil {
		return out, err
	}
	after := q.AfterSeq
	if q.After != "" {
		if after, err = s.registrationAfterInActivity(ctx, q.After, aid); err != nil {
			return out, err
		}
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+scheduleColumns+` FROM activity a WHERE a.id = $1`, aid).QueryRow(func(row pgx.Row) error {
		var err error
		out.Activity, err = scanSchedule(row)
		return err
	})
	if q.Counts {
		b.Queue(attendanceCountsSQL, aid).QueryRow(func(row pgx.Row) error {
			return row.Scan(&out.Counts.Registered, &out.Counts.CheckedIn)
		})
	}
	b.Queue(attendancePageSQL, aid, after, q.Limit).Query(func(rows pgx.Rows) error {
		var err error
		out.Rows, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (attendance.Row, error) {
			return scanAttendanceRow(row)
		})
		return err
	})
	return out, interpret(s.db.SendBatch(ctx, b).Close())
}

// RegistrationAttendance reads a registration with its check-ins and its
// activity's schedule, in one statement.
func (s *Store) RegistrationAttendance(ctx context.Context, registrationID string) (attendance.Activity, attendance.Row, error) {
	var act attendance.Activity
	var percent *int32
	row, err := scanAttendanceRow(s.db.QueryRow(ctx, `SELECT `+attendanceRowColumns+`, `+scheduleColumns+`
		FROM registration r JOIN activity a ON a.id = r.activity_id `+checkinArrays+`
		WHERE r.public_id = $1`, registrationID), &act.ID, &act.StartsAt, &act.EndsAt, &percent)
	if errors.Is(err, pgx.ErrNoRows) {
		return act, row, registration.RegistrationNotFound(registrationID)
	}
	if err != nil {
		return act, row, interpret(err)
	}
	return fillSchedule(act, percent), row, nil
}

// SeriesAttendance counts, over the series' activities that ended at or
// before now, the registrations that hold a seat and those of them with
// an entry, in one statement (activity_series_idx, then each activity's
// counts as AttendanceSheet reads them).
func (s *Store) SeriesAttendance(ctx context.Context, seriesID string, now time.Time) (attendance.SeriesCounts, error) {
	var out attendance.SeriesCounts
	err := s.db.QueryRow(ctx, `SELECT count(a.id), coalesce(sum(n.registered), 0), coalesce(sum(n.checked_in), 0)
		FROM series x
		LEFT JOIN activity a ON a.series_id = x.id AND a.ends_at <= $2
		LEFT JOIN LATERAL (SELECT count(*) AS registered, count(*) FILTER (WHERE EXISTS (
				SELECT 1 FROM checkin c WHERE c.activity_id = r.activity_id AND c.registration_id = r.id AND c.type = 'entry')) AS checked_in
			FROM registration r WHERE r.activity_id = a.id AND r.status IN `+occupying+`) n ON true
		WHERE x.public_id = $1
		GROUP BY x.id`, seriesID, now).Scan(&out.Activities, &out.Registered, &out.CheckedIn)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, registration.SeriesNotFound(seriesID)
	}
	return out, interpret(err)
}

// scanSchedule scans scheduleColumns.
func scanSchedule(row pgx.Row, extra ...any) (attendance.Activity, error) {
	var a attendance.Activity
	var percent *int32
	err := row.Scan(append([]any{&a.ID, &a.StartsAt, &a.EndsAt, &percent}, extra...)...)
	return fillSchedule(a, percent), err
}

// fillSchedule sets a's attendance percent and puts its times in UTC.
func fillSchedule(a attendance.Activity, percent *int32) attendance.Activity {
	if percent != nil {
		p := int(*percent)
		a.AttendancePercent = &p
	}
	a.StartsAt, a.EndsAt = utc(a.StartsAt), utc(a.EndsAt)
	return a
}

// scanAttendanceRow scans attendanceRowColumns followed by extra.
func scanAttendanceRow(row pgx.Row, extra ...any) (attendance.Row, error) {
	var r attendance.Row
	var lists, seqs []int64
	var types []string
	var ats []time.Time
	err := row.Scan(append([]any{&r.Seq, &r.RegistrationID, &r.UserID, &r.Status, &r.Seats, &lists, &seqs, &types, &ats}, extra...)...)
	if err != nil {
		return r, err
	}
	r.Checks = make([]attendance.Check, len(lists))
	for i := range lists {
		r.Checks[i] = attendance.Check{List: lists[i], Seq: seqs[i], Type: attendance.Type(types[i]), At: ats[i].UTC()}
	}
	return r, nil
}
