package store

import (
	"context"
	"errors"

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
	(SELECT count(*) FROM queue_ticket t WHERE t.activity_id = q.activity_id AND t.state = 'admitted'),
	(SELECT count(*) FROM queue_ticket t WHERE t.activity_id = q.activity_id AND t.state = 'used'), q.advanced_at`

func scanLine(row pgx.Row) (onsale.Line, error) {
	var l onsale.Line
	var settings *registration.QueueSettings
	err := row.Scan(&l.ActivityID, &settings, &l.OpensAt, &l.Shuffled, &l.Head, &l.Waiting, &l.AdmittedThrough, &l.SoldOut,
		&l.TokensOut, &l.Used, &l.AsOf)
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
