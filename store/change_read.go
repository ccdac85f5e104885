package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// readPlan is what a change transaction's commands name, gathered before
// its first round trip: the keys of the reads it batches.
type readPlan struct {
	byAID map[int64]*activityWork
	aids  []int64
	// pairAIDs and pairUsers are the (activity, user) of the signups;
	// named the registrations the other commands name, readmitted those
	// of status changes (which may re-admit).
	pairAIDs          []int64
	pairUsers         []string
	named, readmitted []string
	// keyAIDs, keyUsers and keys are the signups' idempotency keys.
	keyAIDs        []int64
	keyUsers, keys []string
	uncounted      []int64
	seriesNamed    []string
	tokens         []string
	signups        bool
	withSeries     bool
}

// readStates takes the locks of the activities and pools and reads their
// states. It fails with errLocksMoved when the memberships it reads under
// the locks need a lock it did not take.
func (s *Store) readStates(ctx context.Context, t *txn, work []*activityWork, pools []*poolWork, locked lockSet) (rd txnRead, err error) {
	p := s.planReads(work)
	b := &pgx.Batch{}
	t.begin(b, s.timeouts)
	batchLocks(b, pools, p.aids)
	if p.withSeries && (len(p.pairAIDs) > 0 || len(p.readmitted) > 0) {
		b.Queue(seriesUserLockSQL, p.pairAIDs, p.pairUsers, p.readmitted)
	}
	if p.withSeries {
		batchSeries(b, p.pairAIDs, p.pairUsers, p.readmitted, p.seriesNamed, &rd)
	}
	s.batchActivities(b, p.aids, p.byAID, &rd)
	if len(p.named) > 0 {
		batchNamed(b, p.named, p.byAID)
	}
	if len(p.pairAIDs) > 0 || len(p.readmitted) > 0 {
		batchHolders(b, p.byAID, p.pairAIDs, p.pairUsers, p.readmitted)
	}
	for _, w := range work {
		if w.headRead > 0 {
			batchHead(b, w, w.headRead)
		}
	}
	if len(p.keys) > 0 {
		batchKeyOutcomes(b, p.keyAIDs, p.keyUsers, p.keys, p.byAID)
	}
	if len(p.uncounted) > 0 {
		batchCounts(b, p.uncounted, p.byAID)
	}
	if len(p.tokens) > 0 {
		batchAdmissions(b, p.tokens, p.byAID)
	}
	batchBlocks(b, p.aids, p.byAID)
	byPID := batchPools(b, s, pools, &rd)
	if p.signups {
		b.Queue(`SELECT nextval('registration_join_seq')`).QueryRow(func(row pgx.Row) error { return row.Scan(&rd.joinBase) })
	}
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return rd, err
	}
	if err := s.checkLocks(work, pools, locked); err != nil {
		return rd, err
	}
	if err := s.checkSeries(work, p.withSeries); err != nil {
		return rd, err
	}
	return rd, readRest(ctx, t.conn, work, p.byAID, pools, byPID)
}

// planReads gathers what the commands name, gives every activity an empty
// state, and chooses the reads: the counts this instance does not know,
// the waiting list's head the releases may promote from, and the (series,
// user) locks and reads unless no activity of a signup (or status change)
// may be in a series (checked under the locks, see checkSeries).
func (s *Store) planReads(work []*activityWork) readPlan {
	p := readPlan{byAID: make(map[int64]*activityWork, len(work)), aids: make([]int64, len(work))}
	for i, w := range work {
		p.byAID[w.aid], p.aids[i] = w, w.aid
		w.state = registration.ActivityState{
			Registrations: make(map[string]registration.Registration),
			Holders:       make(map[string]string),
			Outcomes:      make(map[registration.IdempotencyRef]registration.IdempotentOutcome),
			Admissions:    make(map[string]registration.AdmittedPlace),
		}
		for _, c := range w.batch.Commands {
			p.add(w.aid, c)
		}
		s.cacheMu.Lock()
		c, ok := s.cache[w.aid]
		if !ok {
			p.uncounted = append(p.uncounted, w.aid)
		}
		s.cacheMu.Unlock()
		// Read ahead the head the releases may promote from, unless this
		// instance last saw nobody waiting or a fill policy (then the
		// second round trip reads what is needed, once the counts and the
		// named registrations are known).
		if n := registration.Releases(w.batch.Commands); n > 0 && (!ok || (c.waiting > 0 && !c.fill)) {
			w.headRead = n
		}
	}
	p.withSeries = len(p.seriesNamed) > 0
	for _, w := range work {
		if limited(w.batch.Commands) && s.members.maybeInSeries(w.aid) {
			p.withSeries = true
		}
	}
	return p
}

// add records what a command of activity aid names.
func (p *readPlan) add(aid int64, c registration.Command) {
	switch c := c.(type) {
	case registration.SignupCommand:
		p.signups = true
		p.pairAIDs, p.pairUsers = append(p.pairAIDs, aid), append(p.pairUsers, c.UserID)
		if c.IdempotencyKey != "" {
			p.keyAIDs, p.keyUsers, p.keys = append(p.keyAIDs, aid), append(p.keyUsers, c.UserID), append(p.keys, c.IdempotencyKey)
		}
		if c.AdmissionToken != "" {
			p.tokens = append(p.tokens, c.AdmissionToken)
		}
	case registration.CancelCommand:
		p.named = append(p.named, c.RegistrationID)
	case registration.StatusCommand:
		// Only a status change can re-admit a registration, which needs
		// to know whether its user holds another.
		p.named, p.readmitted = append(p.named, c.RegistrationID), append(p.readmitted, c.RegistrationID)
	case registration.ExpireCommand:
		p.named = append(p.named, c.RegistrationID)
	case registration.SeatsCommand:
		p.named = append(p.named, c.RegistrationID)
	case registration.ConfirmCommand:
		p.named = append(p.named, c.RegistrationID)
	case registration.ReleaseCommand:
		p.named = append(p.named, c.RegistrationIDs...)
	case registration.ActivityCommand:
		if id := c.Patch.SeriesID; id != nil && *id != "" {
			p.seriesNamed = append(p.seriesNamed, *id)
		}
	}
}

// batchLocks adds to b the transaction-level locks, waited for at most
// admissionLockTimeout (safe with pools and with PgBouncer in transaction
// mode): one statement takes every lock, one after the other as unnest
// yields the arrays' elements: the pools', then the activities', each in
// ascending order (work and pools are sorted by id).
func batchLocks(b *pgx.Batch, pools []*poolWork, aids []int64) {
	b.Queue("SET LOCAL lock_timeout = '" + admissionLockTimeout + "'")
	b.Queue(genericPlans)
	ns := make([]int32, 0, len(pools)+len(aids))
	keys := make([]int32, 0, len(pools)+len(aids))
	for _, p := range pools {
		ns, keys = append(ns, int32(poolLockNamespace)), append(keys, int32(p.pid))
	}
	for _, aid := range aids {
		ns, keys = append(ns, int32(admissionLockNamespace)), append(keys, int32(aid))
	}
	b.Queue(`SELECT count(pg_advisory_xact_lock(k.ns, k.id)) FROM unnest($1::int[], $2::int[]) AS k(ns, id)`, ns, keys)
}

// batchActivities adds to b the read of the activities under their locks,
// with their last seq, pools and series and the transaction's time; an
// activity whose counts this instance knows at that seq takes them.
func (s *Store) batchActivities(b *pgx.Batch, aids []int64, byAID map[int64]*activityWork, rd *txnRead) {
	b.Queue(`SELECT a.id, a.public_id, a.title, a.capacity, a.hold_seconds, a.waitlist, a.max_seats_per_registration,
			a.waitlist_policy, a.created_at, a.updated_at,
			coalesce((SELECT s.last_seq FROM activity_state s WHERE s.activity_id = a.id), 0), now(),
			(SELECT x.public_id FROM series x WHERE x.id = a.series_id),
			ARRAY(SELECT m.pool_id FROM activity_pool m WHERE m.activity_id = a.id ORDER BY m.pool_id),
			ARRAY(SELECT p.public_id FROM activity_pool m JOIN pool p ON p.id = m.pool_id WHERE m.activity_id = a.id
				ORDER BY p.public_id),
			a.opens_at, a.closes_at, a.queue, `+activityScheduleColumns+`
		FROM activity a WHERE a.id = ANY($1)`, aids).Query(func(rows pgx.Rows) error {
		var aid, seq int64
		var a registration.Activity
		var at time.Time
		var poolIDs []int64
		_, err := pgx.ForEachRow(rows, append([]any{&aid, &a.ID, &a.Title, &a.Capacity, &a.HoldSeconds, &a.Waitlist,
			&a.MaxSeats, &a.Policy, &a.CreatedAt, &a.UpdatedAt, &seq, &at, &a.SeriesID, &poolIDs, &a.Pools,
			&a.OpensAt, &a.ClosesAt, &a.Queue}, activityScheduleDest(&a)...), func() error {
			w := byAID[aid]
			a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
			utcWindow(&a)
			w.state.Activity, w.state.LastSeq, w.state.At, rd.at = a, seq, at.UTC(), at.UTC()
			w.pools, w.batch.ActivityID = poolIDs, a.ID
			// A fresh array and pointers for the next row.
			a.Pools, poolIDs, a.SeriesID, a.OpensAt, a.ClosesAt, a.Queue = nil, nil, nil, nil, nil, nil
			a.Schedule = registration.Schedule{}
			if c, ok := s.cached(aid, seq); ok {
				w.state.Activity.Taken, w.state.Activity.Waiting, w.counted = c.taken, c.waiting, true
			}
			return nil
		})
		return err
	})
}

// batchNamed adds to b the read of the registrations the commands name.
func batchNamed(b *pgx.Batch, named []string, byAID map[int64]*activityWork) {
	b.Queue(`SELECT `+registrationColumns+`, r.activity_id FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.public_id = ANY($1)`, named).Query(func(rows pgx.Rows) error {
		return scanEach(rows, func(aid int64, r registration.Registration) {
			if w := byAID[aid]; w != nil {
				w.state.Registrations[r.ID] = r
			}
		})
	})
}

// batchHolders adds to b the read of the active registrations of the
// signups' users and of the users of the registrations named by status
// changes. (Cancellations and expiries only ever give a place up, and a
// signup of the same user in the same transaction reads its own.)
func batchHolders(b *pgx.Batch, byAID map[int64]*activityWork, aids []int64, users, named []string) {
	b.Queue(`SELECT r.activity_id, r.user_id, r.public_id
		FROM (SELECT * FROM unnest($1::bigint[], $2::text[])
			UNION SELECT activity_id, user_id FROM registration WHERE public_id = ANY($3)) AS k(aid, uid)
		JOIN registration r ON r.activity_id = k.aid AND r.user_id = k.uid
		WHERE r.status IN `+active, aids, users, named).Query(func(rows pgx.Rows) error {
		var aid int64
		var u, id string
		_, err := pgx.ForEachRow(rows, []any{&aid, &u, &id}, func() error {
			if w := byAID[aid]; w != nil {
				w.state.Holders[u] = id
			}
			return nil
		})
		return err
	})
}

// limited reports whether commands may make a registration active: a
// signup, or a status change (a late payment's re-admission), which a
// series' limit may refuse.
func limited(cmds []registration.Command) bool {
	for _, c := range cmds {
		switch c.(type) {
		case registration.SignupCommand, registration.StatusCommand:
			return true
		}
	}
	return false
}

// checkSeries records which activities are in a series, as read under
// their locks, and fails with errLocksMoved when the transaction skipped
// the (series, user) locks but one of its signups' activities turns out
// to be in a series (it joined one since this instance last read it): it
// runs again with them.
func (s *Store) checkSeries(work []*activityWork, withSeries bool) error {
	in := make(map[int64]bool, len(work))
	moved := false
	for _, w := range work {
		in[w.aid] = w.state.Activity.SeriesID != nil
		moved = moved || (!withSeries && in[w.aid] && limited(w.batch.Commands))
	}
	s.members.setSeries(in)
	if moved {
		return errLocksMoved
	}
	return nil
}
