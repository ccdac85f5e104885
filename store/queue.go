package store

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
)

const placeColumns = `a.public_id, t.user_id, t.state, t.position, t.token, t.token_expires_at, t.joined_at`

func scanPlace(row pgx.Row) (onsale.Place, error) {
	var p onsale.Place
	err := row.Scan(&p.ActivityID, &p.UserID, &p.State, &p.Position, &p.Token, &p.TokenExpiresAt, &p.JoinedAt)
	p.JoinedAt = p.JoinedAt.UTC()
	if p.TokenExpiresAt != nil {
		t := p.TokenExpiresAt.UTC()
		p.TokenExpiresAt = &t
	}
	return p, err
}

// joinSQL takes a place in a line that exists, of an activity that has a
// queue and is not closed, for a user who holds no place that is not
// expired, in one statement; it returns no row when any of that is not so
// (JoinQueue then finds out which).
const joinSQL = `
	WITH a AS (SELECT id FROM activity WHERE public_id = $1 AND queue IS NOT NULL AND (closes_at IS NULL OR closes_at > now())),
	q AS (UPDATE admission_queue SET next_position = next_position + 1
		WHERE activity_id = (SELECT id FROM a) AND shuffled
			AND NOT EXISTS (SELECT FROM queue_ticket t WHERE t.activity_id = (SELECT id FROM a) AND t.user_id = $2 AND t.state <> 'expired')
		RETURNING next_position),
	t AS (INSERT INTO queue_ticket (activity_id, user_id, joined_at, position, last_seen_at)
		SELECT a.id, $2, now(), (SELECT next_position FROM q), now() FROM a
		WHERE EXISTS (SELECT FROM admission_queue WHERE activity_id = a.id)
		ON CONFLICT (activity_id, user_id) WHERE state <> 'expired' DO NOTHING
		RETURNING *)
	SELECT ` + placeColumns + ` FROM t JOIN activity a ON a.id = t.activity_id`

// JoinQueue implements onsale.Authority: one statement for a first place
// in a line that exists, more for anything else.
func (s *Store) JoinQueue(ctx context.Context, activityID, userID string) (onsale.Place, error) {
	p, err := scanPlace(s.db.QueryRow(ctx, joinSQL, activityID, userID))
	if !errors.Is(err, pgx.ErrNoRows) {
		return p, interpret(err)
	}
	var aid int64
	var queued, closed bool
	var a registration.Activity
	err = s.db.QueryRow(ctx, `SELECT a.id, a.queue IS NOT NULL, a.closes_at IS NOT NULL AND a.closes_at <= now(),
			a.opens_at, a.closes_at
		FROM activity a WHERE a.public_id = $1`, activityID).Scan(&aid, &queued, &closed, &a.OpensAt, &a.ClosesAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return onsale.Place{}, registration.ActivityNotFound(activityID)
	}
	if err != nil {
		return onsale.Place{}, interpret(err)
	}
	a.ID = activityID
	utcWindow(&a)
	if !queued {
		return onsale.Place{}, capacityd.Errorf(capacityd.EInvalid, "activity %s has no admission queue", activityID)
	}
	if p, ok, err := s.QueuePlace(ctx, activityID, userID); err != nil || (ok && p.State != onsale.Expired) {
		return p, err
	}
	if closed {
		return onsale.Place{}, registration.RegistrationClosed(a)
	}
	// The line's row first (a place's position comes from it once the
	// places taken before the opening are shuffled), then the place.
	// A line that opens with its first place needs no shuffle.
	if _, err := s.db.Exec(ctx, `INSERT INTO admission_queue (activity_id, shuffled)
		SELECT id, opens_at IS NULL OR opens_at <= now() FROM activity WHERE id = $1
		ON CONFLICT DO NOTHING`, aid); err != nil {
		return onsale.Place{}, interpret(err)
	}
	p, err = scanPlace(s.db.QueryRow(ctx, joinSQL, activityID, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		// Joined at the same moment by another request of the user.
		p, _, err = s.QueuePlace(ctx, activityID, userID)
	}
	return p, interpret(err)
}

// QueuePlace implements onsale.Authority.
func (s *Store) QueuePlace(ctx context.Context, activityID, userID string) (onsale.Place, bool, error) {
	p, err := scanPlace(s.db.QueryRow(ctx, `SELECT `+placeColumns+` FROM queue_ticket t JOIN activity a ON a.id = t.activity_id
		WHERE a.public_id = $1 AND t.user_id = $2 ORDER BY t.id DESC LIMIT 1`, activityID, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return onsale.Place{}, false, nil
	}
	return p, err == nil, interpret(err)
}

// QueuePlaces implements onsale.Authority.
func (s *Store) QueuePlaces(ctx context.Context, activityID string, users []string) ([]onsale.Place, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (t.user_id) `+placeColumns+` FROM queue_ticket t JOIN activity a ON a.id = t.activity_id
		WHERE a.public_id = $1 AND t.user_id = ANY($2) ORDER BY t.user_id, t.id DESC`, activityID, users)
	if err != nil {
		return nil, interpret(err)
	}
	places, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (onsale.Place, error) { return scanPlace(row) })
	return places, interpret(err)
}

const lineColumns = `a.public_id, a.queue, a.opens_at, q.shuffled, q.head, q.waiting, q.admitted_through, q.sold_out,
	(SELECT count(*) FROM queue_ticket t WHERE t.activity_id = q.activity_id AND t.state = 'admitted'), q.advanced_at`

func scanLine(row pgx.Row) (onsale.Line, error) {
	var l onsale.Line
	var settings *registration.QueueSettings
	err := row.Scan(&l.ActivityID, &settings, &l.OpensAt, &l.Shuffled, &l.Head, &l.Waiting, &l.AdmittedThrough, &l.SoldOut,
		&l.TokensOut, &l.AsOf)
	if settings != nil {
		l.Settings = *settings
	}
	return l, err
}

// QueueLine implements onsale.Authority.
func (s *Store) QueueLine(ctx context.Context, activityID string) (onsale.Line, bool, error) {
	l, err := scanLine(s.db.QueryRow(ctx, `SELECT `+lineColumns+` FROM admission_queue q JOIN activity a ON a.id = q.activity_id
		WHERE a.public_id = $1`, activityID))
	if errors.Is(err, pgx.ErrNoRows) {
		return onsale.Line{}, false, nil
	}
	return l, err == nil, interpret(err)
}

// ActiveQueues implements onsale.Authority: the lines of activities that
// still have a queue and are not closed for more than a minute.
func (s *Store) ActiveQueues(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT a.public_id FROM admission_queue q JOIN activity a ON a.id = q.activity_id
		WHERE a.queue IS NOT NULL AND (a.closes_at IS NULL OR a.closes_at > now() - interval '1 minute')`)
	if err != nil {
		return nil, interpret(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, interpret(err)
}

// TouchPlaces implements onsale.Authority.
func (s *Store) TouchPlaces(ctx context.Context, activityID string, users []string) error {
	_, err := s.db.Exec(ctx, `UPDATE queue_ticket t SET last_seen_at = now() FROM activity a
		WHERE a.public_id = $1 AND t.activity_id = a.id AND t.user_id = ANY($2) AND t.state = 'waiting'`, activityID, users)
	return interpret(err)
}

// AdvanceQueue implements onsale.Authority, in one transaction under the
// line's row lock.
func (s *Store) AdvanceQueue(ctx context.Context, activityID string, shuffle func(n int) []int) (onsale.Advance, error) {
	var adv onsale.Advance
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var aid, next int64
		var shuffled, waitlist bool
		var credit float64
		var creditedAt, now time.Time
		var settings *registration.QueueSettings
		var opensAt, closesAt *time.Time
		// The time is read once the line's row is locked: an advance that
		// began first may lock the line after another, and its clock must
		// not run backwards against the credit that one left.
		err := tx.QueryRow(ctx, `SELECT q.activity_id, q.next_position, q.shuffled, q.credit, q.credited_at, clock_timestamp(),
				a.queue, a.opens_at, a.closes_at, a.waitlist
			FROM admission_queue q JOIN activity a ON a.id = q.activity_id
			WHERE a.public_id = $1 FOR UPDATE OF q SKIP LOCKED`, activityID).Scan(&aid, &next, &shuffled, &credit, &creditedAt, &now,
			&settings, &opensAt, &closesAt, &waitlist)
		if errors.Is(err, pgx.ErrNoRows) {
			l, _, err := s.QueueLine(ctx, activityID)
			adv.Line = l
			return err
		}
		if err != nil || settings == nil {
			return err
		}
		adv.Locked = true
		open := opensAt == nil || !now.Before(*opensAt)
		if open {
			if next, err = placeUnpositioned(ctx, tx, aid, next, opensAt, !shuffled, shuffle); err != nil {
				return err
			}
			shuffled = true
		}
		absent := time.Duration(settings.AbsentSeconds) * time.Second
		tag, err := tx.Exec(ctx, `UPDATE queue_ticket SET state = 'expired'
			WHERE activity_id = $1 AND state = 'waiting' AND last_seen_at < $2`, aid, now.Add(-absent))
		if err != nil {
			return err
		}
		adv.Lapsed = int(tag.RowsAffected())
		if tag, err = tx.Exec(ctx, `UPDATE queue_ticket SET state = 'expired'
			WHERE activity_id = $1 AND state = 'admitted' AND token_expires_at <= $2`, aid, now); err != nil {
			return err
		}
		adv.TokensExpired = int(tag.RowsAffected())
		soldOut := false
		if !waitlist {
			a, err := scanActivity(tx.QueryRow(ctx, `SELECT `+activityColumns+` FROM activity a WHERE a.id = $1`, aid))
			if err != nil {
				return err
			}
			if soldOut = a.Remaining == 0; soldOut {
				if _, err := tx.Exec(ctx, `UPDATE queue_ticket SET state = 'sold_out' WHERE activity_id = $1 AND state = 'waiting'`, aid); err != nil {
					return err
				}
			}
		}
		var out int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM queue_ticket WHERE activity_id = $1 AND state = 'admitted'`, aid).Scan(&out); err != nil {
			return err
		}
		// The rate's allowance accrues while the line is open, up to one
		// second's worth.
		rate := float64(settings.AdmitPerSecond)
		if open && shuffled && (closesAt == nil || now.Before(*closesAt)) {
			credit = math.Min(rate, credit+rate*max(0, now.Sub(creditedAt).Seconds()))
		} else {
			credit = 0
		}
		creditedAt = later(creditedAt, now)
		admitted := int64(0)
		if n := min(int64(credit), int64(settings.MaxAdmitted)-out); n > 0 && !soldOut {
			var through *int64
			if err := tx.QueryRow(ctx, `WITH s AS (SELECT id FROM queue_ticket WHERE activity_id = $1 AND state = 'waiting'
					AND position IS NOT NULL ORDER BY position LIMIT $2),
				u AS (UPDATE queue_ticket t SET state = 'admitted', admitted_at = $3::timestamptz,
					token = 'adm_' || replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
					token_expires_at = $3::timestamptz + make_interval(secs => $4::int)
					FROM s WHERE t.id = s.id RETURNING t.position)
				SELECT count(*), max(position) FROM u`, aid, n, now, settings.TokenSeconds).Scan(&admitted, &through); err != nil {
				return err
			}
			credit -= float64(admitted)
			out += admitted
			if through != nil {
				adv.Line.AdmittedThrough = *through
			}
		}
		adv.Admitted = int(admitted)
		l, err := scanLine(tx.QueryRow(ctx, `
			WITH w AS (SELECT min(position) AS head, count(*) AS waiting FROM queue_ticket WHERE activity_id = $1 AND state = 'waiting')
			UPDATE admission_queue q SET next_position = $2, shuffled = $3, credit = $4, credited_at = $8,
				head = w.head, waiting = w.waiting, admitted_through = greatest(q.admitted_through, $6),
				sold_out = $7, advanced_at = $5
			FROM w, activity a WHERE q.activity_id = $1 AND a.id = q.activity_id
			RETURNING `+lineColumns, aid, next, shuffled, credit, now, adv.Line.AdmittedThrough, soldOut, creditedAt))
		adv.Line = l
		return err
	})
	return adv, err
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// placeUnpositioned gives positions to the waiting places without one,
// after next: when first (the opening), the places taken before opensAt in
// the order shuffle gives them, then the later ones in the order they
// joined. It returns the last position given.
func placeUnpositioned(ctx context.Context, tx pgx.Tx, aid, next int64, opensAt *time.Time, first bool, shuffle func(n int) []int) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT id, $2::timestamptz IS NOT NULL AND joined_at < $2 FROM queue_ticket
		WHERE activity_id = $1 AND state = 'waiting' AND position IS NULL ORDER BY joined_at, id`, aid, opensAt)
	if err != nil {
		return next, err
	}
	var early, late []int64
	var id int64
	var before bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &before}, func() error {
		if first && before {
			early = append(early, id)
		} else {
			late = append(late, id)
		}
		return nil
	}); err != nil {
		return next, err
	}
	order := make([]int64, 0, len(early)+len(late))
	for _, i := range shuffle(len(early)) {
		order = append(order, early[i])
	}
	order = append(order, late...)
	if len(order) == 0 {
		return next, nil
	}
	positions := make([]int64, len(order))
	for i := range order {
		positions[i] = next + int64(i) + 1
	}
	_, err = tx.Exec(ctx, `UPDATE queue_ticket t SET position = u.position FROM unnest($1::bigint[], $2::bigint[]) AS u(id, position)
		WHERE t.id = u.id`, order, positions)
	return next + int64(len(order)), err
}
