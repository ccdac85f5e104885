package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// dueLease is how long an instance holds an activity's due work it
// claimed: a claim of an instance that died is taken again after it.
const dueLease = 30 * time.Second

// ClaimDueReleases claims up to limit activities whose confirm_by, or
// release at the door (starts_at + release_no_shows_after_minutes), has
// come and whose release is not done, skipping those another instance
// holds, and returns each with the registrations the rule would release
// now (holding a seat, and unconfirmed or without an accepted entry). The
// change transaction checks each again under the activity's lock.
func (s *Store) ClaimDueReleases(ctx context.Context, now time.Time, limit int) ([]registration.DueRelease, error) {
	rows, err := s.db.Query(ctx, `
		WITH due AS (
			SELECT a.id, CASE WHEN a.confirm_by <= $1 AND a.confirm_done_at IS NULL THEN 'unconfirmed' ELSE 'no_show' END AS reason
			FROM activity a
			WHERE ((a.confirm_by <= $1 AND a.confirm_done_at IS NULL)
				OR (a.release_no_shows_after_minutes IS NOT NULL AND a.no_show_done_at IS NULL
					AND a.starts_at + make_interval(mins => a.release_no_shows_after_minutes) <= $1))
				AND (a.due_leased_until IS NULL OR a.due_leased_until < now())
			LIMIT $2 FOR UPDATE SKIP LOCKED
		), leased AS (
			UPDATE activity a SET due_leased_until = now() + $3 * interval '1 millisecond'
			FROM due WHERE a.id = due.id RETURNING a.id, a.public_id, due.reason
		)
		SELECT l.public_id, l.reason, coalesce(ARRAY(SELECT r.public_id FROM registration r
			WHERE r.activity_id = l.id AND r.status IN `+occupying+`
				AND CASE WHEN l.reason = 'unconfirmed' THEN r.confirmed_at IS NULL ELSE NOT `+checkedInSQL+` END
			ORDER BY r.id), '{}')
		FROM leased l`, now, limit, dueLease.Milliseconds())
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.DueRelease, error) {
		var d registration.DueRelease
		err := row.Scan(&d.ActivityID, &d.Reason, &d.RegistrationIDs)
		return d, err
	})
	return out, interpret(err)
}

// NextDueRelease returns the earliest release moment after after and no
// later than until of a release not done: a confirm_by, or a start plus
// its minutes of the release at the door. It reads the due-work indexes
// (activity_confirm_due_idx, activity_no_show_due_idx): the release at the
// door's moment is found among the starts up to until.
func (s *Store) NextDueRelease(ctx context.Context, after, until time.Time) (time.Time, bool, error) {
	var at *time.Time
	err := s.db.QueryRow(ctx, `
		SELECT least(
			(SELECT min(confirm_by) FROM activity
				WHERE confirm_by IS NOT NULL AND confirm_done_at IS NULL AND confirm_by > $1 AND confirm_by <= $2),
			(SELECT min(starts_at + make_interval(mins => release_no_shows_after_minutes)) FROM activity
				WHERE release_no_shows_after_minutes IS NOT NULL AND starts_at IS NOT NULL AND no_show_done_at IS NULL
					AND starts_at <= $2
					AND starts_at + make_interval(mins => release_no_shows_after_minutes) > $1
					AND starts_at + make_interval(mins => release_no_shows_after_minutes) <= $2))`, after, until).Scan(&at)
	if err != nil || at == nil {
		return time.Time{}, false, interpret(err)
	}
	return *at, true, nil
}

// ReleaseDone records that an activity's release for reason is done and
// ends the claim on it.
func (s *Store) ReleaseDone(ctx context.Context, activityID string, reason registration.CancelReason) error {
	col := "no_show_done_at"
	if reason == registration.CancelUnconfirmed {
		col = "confirm_done_at"
	}
	_, err := s.db.Exec(ctx, `UPDATE activity SET `+col+` = now(), due_leased_until = NULL WHERE public_id = $1`, activityID)
	return interpret(err)
}
