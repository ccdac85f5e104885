package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
)

// lockedLine is a line's row and its activity's on-sale settings, as read
// under the row's lock.
type lockedLine struct {
	aid, next         int64
	shuffled          bool
	waitlist          bool
	credit            onsale.Credit
	now               time.Time
	settings          *registration.QueueSettings
	opensAt, closesAt *time.Time
}

// AdvanceQueue implements onsale.Authority, in one transaction under the
// line's row lock: the store reads and writes, onsale.DecideAdvance
// decides whom to admit.
func (s *Store) AdvanceQueue(ctx context.Context, activityID string, shuffle func(n int) []int) (onsale.Advance, error) {
	var adv onsale.Advance
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		ll, err := lockLine(ctx, tx, activityID)
		if errors.Is(err, pgx.ErrNoRows) {
			l, _, err := s.QueueLine(ctx, activityID)
			adv.Line = l
			return err
		}
		if err != nil || ll.settings == nil {
			return err
		}
		adv.Locked = true
		if ll.opensAt == nil || !ll.now.Before(*ll.opensAt) {
			if ll.next, err = placeUnpositioned(ctx, tx, ll.aid, ll.next, ll.opensAt, !ll.shuffled, shuffle); err != nil {
				return err
			}
			ll.shuffled = true
		}
		if adv.Lapsed, adv.TokensExpired, err = lapsePlaces(ctx, tx, ll); err != nil {
			return err
		}
		in, err := advanceInput(ctx, tx, ll)
		if err != nil {
			return err
		}
		d := onsale.DecideAdvance(in)
		if d.SoldOut {
			if _, err := tx.Exec(ctx, `UPDATE queue_ticket SET state = 'sold_out' WHERE activity_id = $1 AND state = 'waiting'`, ll.aid); err != nil {
				return err
			}
		}
		var through int64
		if d.Admit > 0 {
			var admitted int64
			if admitted, through, err = admitFirst(ctx, tx, ll, d.Admit); err != nil {
				return err
			}
			// The places counted waiting are under the line's lock, so
			// all are admitted; any not given back its allowance.
			d.Credit.Allowance += float64(d.Admit - admitted)
			adv.Admitted = int(admitted)
		}
		adv.Line, err = saveLine(ctx, tx, ll, d, through)
		return err
	})
	return adv, err
}

// lockLine reads the line's row under its lock, skipping a row another
// advance holds (pgx.ErrNoRows). The time is read once the row is locked:
// an advance that began first may lock the line after another, and its
// clock must not run backwards against the credit that one left.
func lockLine(ctx context.Context, tx pgx.Tx, activityID string) (lockedLine, error) {
	var ll lockedLine
	err := tx.QueryRow(ctx, `SELECT q.activity_id, q.next_position, q.shuffled, q.credit, q.credited_at, clock_timestamp(),
			a.queue, a.opens_at, a.closes_at, a.waitlist
		FROM admission_queue q JOIN activity a ON a.id = q.activity_id
		WHERE a.public_id = $1 FOR UPDATE OF q SKIP LOCKED`, activityID).Scan(&ll.aid, &ll.next, &ll.shuffled,
		&ll.credit.Allowance, &ll.credit.At, &ll.now, &ll.settings, &ll.opensAt, &ll.closesAt, &ll.waitlist)
	return ll, err
}

// lapsePlaces expires the waiting places whose holders were not seen for
// absent_seconds and the tokens past their deadline, and returns how many
// of each.
func lapsePlaces(ctx context.Context, tx pgx.Tx, ll lockedLine) (lapsed, tokens int, err error) {
	absent := time.Duration(ll.settings.AbsentSeconds) * time.Second
	tag, err := tx.Exec(ctx, `UPDATE queue_ticket SET state = 'expired'
		WHERE activity_id = $1 AND state = 'waiting' AND last_seen_at < $2`, ll.aid, ll.now.Add(-absent))
	if err != nil {
		return 0, 0, err
	}
	lapsed = int(tag.RowsAffected())
	if tag, err = tx.Exec(ctx, `UPDATE queue_ticket SET state = 'expired'
		WHERE activity_id = $1 AND state = 'admitted' AND token_expires_at <= $2`, ll.aid, ll.now); err != nil {
		return lapsed, 0, err
	}
	return lapsed, int(tag.RowsAffected()), nil
}

// lineCountsSQL counts, for the activity $1, the tokens out and the
// waiting places with a position.
const lineCountsSQL = `(SELECT count(*) FILTER (WHERE state = 'admitted') FROM queue_ticket WHERE activity_id = $1),
	(SELECT count(*) FILTER (WHERE state = 'waiting' AND position IS NOT NULL) FROM queue_ticket WHERE activity_id = $1)`

// advanceInput reads what the admission rule needs. Without a waiting list
// the activity's remaining seats are read in the same statement as the
// tokens out, from one snapshot: a signup committing meanwhile lowers both
// or neither, so the seats are never counted twice.
func advanceInput(ctx context.Context, tx pgx.Tx, ll lockedLine) (onsale.AdvanceInput, error) {
	in := onsale.AdvanceInput{Now: ll.now, Settings: *ll.settings, OpensAt: ll.opensAt, ClosesAt: ll.closesAt,
		Shuffled: ll.shuffled, Credit: ll.credit, Waitlist: ll.waitlist}
	if ll.waitlist {
		err := tx.QueryRow(ctx, `SELECT `+lineCountsSQL, ll.aid).Scan(&in.TokensOut, &in.Waiting)
		return in, err
	}
	a, err := scanActivity(withExtra{tx.QueryRow(ctx, `SELECT `+activityColumns+`, `+lineCountsSQL+` FROM activity a WHERE a.id = $1`, ll.aid),
		[]any{&in.TokensOut, &in.Waiting}})
	in.Remaining, in.MaxSeats = a.Remaining, a.MaxSeats
	return in, err
}

// withExtra is a row scanned by a function that knows its first columns:
// the columns after them go to extra.
type withExtra struct {
	pgx.Row
	extra []any
}

// Scan scans the row's first columns into dest and the rest into extra.
func (r withExtra) Scan(dest ...any) error {
	return r.Row.Scan(append(dest, r.extra...)...)
}

// admitFirst admits the first n waiting places in position order, each
// with its own token, and returns how many it admitted and the highest
// position among them.
func admitFirst(ctx context.Context, tx pgx.Tx, ll lockedLine, n int64) (admitted, through int64, err error) {
	var last *int64
	err = tx.QueryRow(ctx, `WITH s AS (SELECT id FROM queue_ticket WHERE activity_id = $1 AND state = 'waiting'
			AND position IS NOT NULL ORDER BY position LIMIT $2),
		u AS (UPDATE queue_ticket t SET state = 'admitted', admitted_at = $3::timestamptz,
			token = 'adm_' || replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
			token_expires_at = $3::timestamptz + make_interval(secs => $4::int)
			FROM s WHERE t.id = s.id RETURNING t.position)
		SELECT count(*), max(position) FROM u`, ll.aid, n, ll.now, ll.settings.TokenSeconds).Scan(&admitted, &last)
	if last != nil {
		through = *last
	}
	return admitted, through, err
}

// saveLine writes the line's row after an advance (its positions, credit
// and summary) and returns the line.
func saveLine(ctx context.Context, tx pgx.Tx, ll lockedLine, d onsale.AdvanceDecision, through int64) (onsale.Line, error) {
	return scanLine(tx.QueryRow(ctx, `
		WITH w AS (SELECT min(position) AS head, count(*) AS waiting FROM queue_ticket WHERE activity_id = $1 AND state = 'waiting')
		UPDATE admission_queue q SET next_position = $2, shuffled = $3, credit = $4, credited_at = $8,
			head = w.head, waiting = w.waiting, admitted_through = greatest(q.admitted_through, $6),
			sold_out = $7, advanced_at = $5
		FROM w, activity a WHERE q.activity_id = $1 AND a.id = q.activity_id
		RETURNING `+lineColumns, ll.aid, ll.next, ll.shuffled, d.Credit.Allowance, ll.now, through, d.SoldOut, d.Credit.At))
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
