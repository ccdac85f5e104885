package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// readRest reads what the commands need beyond the first round trip: the
// counts of activities and pools changed by another instance since this
// one last counted them (a round trip), then the parts of the waiting
// lists the commands may promote from (registration.LineNeeds, which
// needs the counts and the named registrations; a round trip when the
// read-ahead head does not cover them).
func readRest(ctx context.Context, conn *pgx.Conn, work []*activityWork, byAID map[int64]*activityWork,
	pools []*poolWork, byPID map[int64]*poolWork,
) error {
	var stale, stalePools []int64
	for _, w := range work {
		if !w.counted {
			stale = append(stale, w.aid)
		}
	}
	for _, p := range pools {
		if !p.counted {
			stalePools = append(stalePools, p.pid)
		}
	}
	if len(stale)+len(stalePools) > 0 {
		b := &pgx.Batch{}
		if len(stale) > 0 {
			batchCounts(b, stale, byAID)
		}
		if len(stalePools) > 0 {
			batchPoolCounts(b, stalePools, byPID)
		}
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	b := &pgx.Batch{}
	needs := registration.LineNeeds(changeOf(work, pools, txnRead{}))
	for i, w := range work {
		need := needs[i]
		head := 0
		if need.Strict {
			head = min(need.Head(), w.state.Activity.Waiting)
		}
		if head > w.headRead {
			// The read-ahead was too short: read the head again.
			w.state.Line = nil
			batchHead(b, w, head)
		}
		if need.Fill {
			batchBySize(b, w, need)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return conn.SendBatch(ctx, b).Close()
}

// batchHead adds to b the read of the first n registrations on w's
// waiting list, appended to w.state.Line.
func batchHead(b *pgx.Batch, w *activityWork, n int) {
	b.Queue(`SELECT `+registrationColumns+`, r.activity_id FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.activity_id = $1 AND r.status = 'waitlisted' ORDER BY r.waitlist_seq LIMIT $2`, w.aid, n).
		Query(func(rows pgx.Rows) error {
			return scanEach(rows, func(_ int64, r registration.Registration) {
				w.state.Line = append(w.state.Line, r)
			})
		})
}

// batchBySize adds to b the read of a fill activity's waiting list as its
// commands may need it: for each party size s from 1 to need.Seats, the
// first need.BySize(s) registrations of s seats in join order, each an
// index range of registration_waitlist_seats_idx, appended to
// w.state.Line (Decide orders them and drops a registration read twice).
func batchBySize(b *pgx.Batch, w *activityWork, need registration.LineNeed) {
	b.Queue(`SELECT `+registrationColumns+`, r.activity_id
		FROM generate_series(1, $2::int) AS s(n)
		CROSS JOIN LATERAL (SELECT * FROM registration x
			WHERE x.activity_id = $1 AND x.status = 'waitlisted' AND x.seats = s.n
			ORDER BY x.waitlist_seq LIMIT $3::int / s.n + $4::int) r
		JOIN activity a ON a.id = r.activity_id`,
		w.aid, min(need.Seats, registration.MaxSeatsLimit), need.Seats, need.Removals).
		Query(func(rows pgx.Rows) error {
			return scanEach(rows, func(_ int64, r registration.Registration) {
				w.state.Line = append(w.state.Line, r)
			})
		})
}

// batchCounts adds the authority counts of activities to b: their
// occupying and waitlisted registrations, over the (activity_id, status)
// index.
func batchCounts(b *pgx.Batch, aids []int64, byAID map[int64]*activityWork) {
	b.Queue(countActiveSQL, aids).Query(func(rows pgx.Rows) error {
		for _, aid := range aids {
			w := byAID[aid]
			w.state.Activity.Taken, w.state.Activity.Waiting, w.counted = 0, 0, true
		}
		var aid, taken, waiting int64
		_, err := pgx.ForEachRow(rows, []any{&aid, &taken, &waiting}, func() error {
			w := byAID[aid]
			w.state.Activity.Taken, w.state.Activity.Waiting = int(taken), int(waiting)
			return nil
		})
		return err
	})
}

// countActiveSQL counts the occupied seats and the waitlisted
// registrations of activities (by internal id): for each, the authority
// (the seats of the occupying registrations) and the waiting list's
// length, each an index-only scan of its partial index.
const countActiveSQL = `SELECT k.id,
		(SELECT coalesce(sum(seats), 0) FROM registration WHERE activity_id = k.id AND status IN ` + occupying + `),
		(SELECT count(*) FROM registration WHERE activity_id = k.id AND status = 'waitlisted')
	FROM unnest($1::bigint[]) AS k(id)`
