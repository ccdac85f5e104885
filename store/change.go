package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/physiciansnet/capacityd/registration"
)

// seatCache is what this instance knows exactly of an activity's seats
// after its own last commit: valid while the activity's last_seq is still
// seq, since every change of its registrations records an event under its
// lock.
type seatCache struct {
	seq            int64
	taken, waiting int
	fill           bool
}

// activityWork is one activity's part of a change transaction.
type activityWork struct {
	index int // in Apply's batches
	aid   int64
	batch registration.CommandBatch
	state registration.ActivityState
	// counted is true once state.Activity carries exact Taken and Waiting.
	counted bool
	// headRead is how much of the waiting list's head the first round
	// trip read (state.Queue), ahead of knowing how much is needed.
	headRead int
	plan     registration.Plan
}

// Apply runs one change transaction for the command batches of several
// activities, in two round trips (three when it must count):
//
//	BEGIN; SET LOCAL lock_timeout; pg_advisory_xact_lock(ns, activity) for each activity, in id order;
//	the activities with their last seq; the named registrations; the active registrations
//	of the signups' users (and re-admissions'); stored idempotency outcomes; counts of
//	the activities this instance does not know at their last seq; the heads of the
//	waiting lists that cancellations and expiries may promote from, where someone may
//	wait                                                            -- one round trip
//	[counts of activities changed elsewhere; heads of waiting lists]    -- a second, when needed
//	registration.Decide for each activity
//	UPDATE changed rows; INSERT new rows; INSERT events; bump last_seq;
//	UPDATE changed activities; INSERT idempotency records; COMMIT      -- one round trip
//
// Locks are taken in a fixed order, so transactions of several instances
// wait for each other but never deadlock. The counts are the authority:
// COUNT over the activity's index, or what this instance counted at the
// same last seq plus what it changed since (every change records an event
// and bumps last_seq, so an unchanged seq means unchanged counts).
func (s *Store) Apply(ctx context.Context, batches []registration.CommandBatch, now time.Time) ([]registration.Applied, error) {
	out := make([]registration.Applied, len(batches))
	public := make([]string, len(batches))
	for i, b := range batches {
		public[i] = b.ActivityID
	}
	ids, err := s.activityIDs(ctx, public)
	if err != nil {
		return nil, err
	}
	var work []*activityWork
	for i, b := range batches {
		aid, ok := ids[b.ActivityID]
		if !ok {
			out[i].Err = registration.ActivityNotFound(b.ActivityID)
			continue
		}
		work = append(work, &activityWork{index: i, aid: aid, batch: b})
	}
	if len(work) == 0 {
		return out, nil
	}
	slices.SortFunc(work, func(a, b *activityWork) int { return int(a.aid - b.aid) })

	err = s.pipelined(ctx, func(t *txn) error {
		hooks, err := s.readStates(ctx, t, work)
		if err != nil {
			return err
		}
		for _, w := range work {
			p, err := registration.Decide(w.state, w.batch.Commands, now)
			if err != nil {
				return fmt.Errorf("activity %s: %w", w.batch.ActivityID, err)
			}
			w.plan = p
		}
		return s.writePlans(ctx, t, work, hooks)
	})
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	for _, w := range work {
		if err != nil {
			delete(s.cache, w.aid)
			continue
		}
		a := w.plan.Activity
		s.cache[w.aid] = seatCache{seq: w.plan.LastSeq, taken: a.Taken, waiting: a.Waiting, fill: a.Policy == registration.PolicyFill}
		out[w.index].Plan = w.plan
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// cached returns this instance's exact counts of an activity at seq.
func (s *Store) cached(aid, seq int64) (seatCache, bool) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	c, ok := s.cache[aid]
	return c, ok && (c.seq == seq || trustCachedCounts)
}

// readStates takes the activities' locks and reads their states, and
// whether any webhook is enabled (then the transaction writes the webhook
// outbox of its events; a webhook enabled while it runs gets the events of
// the transactions that begin after).
func (s *Store) readStates(ctx context.Context, t *txn, work []*activityWork) (hooks bool, err error) {
	byAID := make(map[int64]*activityWork, len(work))
	aids := make([]int64, len(work))
	var pairAIDs []int64
	var pairUsers, named, readmitted, keyUsers, keys []string
	var keyAIDs, uncounted []int64
	for i, w := range work {
		byAID[w.aid], aids[i] = w, w.aid
		w.state = registration.ActivityState{
			Registrations: make(map[string]registration.Registration),
			Holders:       make(map[string]string),
			Outcomes:      make(map[registration.IdempotencyRef]registration.IdempotentOutcome),
		}
		for _, c := range w.batch.Commands {
			switch c := c.(type) {
			case registration.SignupCommand:
				pairAIDs, pairUsers = append(pairAIDs, w.aid), append(pairUsers, c.UserID)
				if c.IdempotencyKey != "" {
					keyAIDs, keyUsers, keys = append(keyAIDs, w.aid), append(keyUsers, c.UserID), append(keys, c.IdempotencyKey)
				}
			case registration.CancelCommand:
				named = append(named, c.RegistrationID)
			case registration.StatusCommand:
				// Only a status change can re-admit a registration, which
				// needs to know whether its user holds another.
				named, readmitted = append(named, c.RegistrationID), append(readmitted, c.RegistrationID)
			case registration.ExpireCommand:
				named = append(named, c.RegistrationID)
			case registration.SeatsCommand:
				named = append(named, c.RegistrationID)
			}
		}
		s.cacheMu.Lock()
		c, ok := s.cache[w.aid]
		if !ok {
			uncounted = append(uncounted, w.aid)
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

	// Transaction-level locks, waited for at most admissionLockTimeout:
	// safe with pools and with PgBouncer in transaction mode.
	b := &pgx.Batch{}
	t.begin(b, s.timeouts)
	b.Queue("SET LOCAL lock_timeout = '" + admissionLockTimeout + "'")
	b.Queue(genericPlans)
	locks := make([]int32, len(aids))
	for i, aid := range aids {
		locks[i] = int32(aid)
	}
	// One statement takes every lock, one after the other as unnest yields
	// the array's elements: in ascending order.
	b.Queue(`SELECT count(pg_advisory_xact_lock($1, k.id)) FROM unnest($2::int[]) AS k(id)`,
		int32(admissionLockNamespace), locks)
	b.Queue(`SELECT a.id, a.public_id, a.title, a.capacity, a.hold_seconds, a.waitlist, a.max_seats_per_registration,
			a.waitlist_policy, a.created_at, a.updated_at,
			coalesce((SELECT s.last_seq FROM activity_state s WHERE s.activity_id = a.id), 0), now()
		FROM activity a WHERE a.id = ANY($1)`, aids).Query(func(rows pgx.Rows) error {
		var aid, seq int64
		var a registration.Activity
		var at time.Time
		_, err := pgx.ForEachRow(rows, []any{&aid, &a.ID, &a.Title, &a.Capacity, &a.HoldSeconds, &a.Waitlist,
			&a.MaxSeats, &a.Policy, &a.CreatedAt, &a.UpdatedAt, &seq, &at}, func() error {
			w := byAID[aid]
			a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
			w.state.Activity, w.state.LastSeq, w.state.At = a, seq, at.UTC()
			if c, ok := s.cached(aid, seq); ok {
				w.state.Activity.Taken, w.state.Activity.Waiting, w.counted = c.taken, c.waiting, true
			}
			return nil
		})
		return err
	})
	if len(named) > 0 {
		b.Queue(`SELECT `+registrationColumns+`, r.activity_id FROM registration r JOIN activity a ON a.id = r.activity_id
			WHERE r.public_id = ANY($1)`, named).Query(func(rows pgx.Rows) error {
			return scanEach(rows, func(aid int64, r registration.Registration) {
				if w := byAID[aid]; w != nil {
					w.state.Registrations[r.ID] = r
				}
			})
		})
	}
	if len(pairAIDs) > 0 || len(readmitted) > 0 {
		queueHolders(b, byAID, pairAIDs, pairUsers, readmitted)
	}
	for _, w := range work {
		if w.headRead > 0 {
			queueHead(b, w, w.headRead)
		}
	}
	if len(keys) > 0 {
		b.Queue(`SELECT i.activity_id, i.user_id, i.key, i.request_hash, i.outcome, coalesce(i.registration_id, ''), i.body
			FROM unnest($1::bigint[], $2::text[], $3::text[]) AS k(activity_id, user_id, key)
			JOIN idempotency_key i ON i.activity_id = k.activity_id AND i.user_id = k.user_id AND i.key = k.key`,
			keyAIDs, keyUsers, keys).Query(func(rows pgx.Rows) error {
			var aid int64
			var o registration.IdempotentOutcome
			_, err := pgx.ForEachRow(rows, []any{&aid, &o.UserID, &o.Key, &o.RequestHash, &o.Outcome, &o.RegistrationID, &o.Body}, func() error {
				if w := byAID[aid]; w != nil {
					w.state.Outcomes[registration.IdempotencyRef{UserID: o.UserID, Key: o.Key}] = o
				}
				return nil
			})
			return err
		})
	}
	if len(uncounted) > 0 {
		queueCounts(b, uncounted, byAID)
	}
	b.Queue(anyWebhookSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&hooks) })
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	return hooks, readRest(ctx, t.conn, work, byAID)
}

// queueHolders adds to b the read of the active registrations of the
// signups' users and of the users of the registrations named by status
// changes. (Cancellations and expiries only ever give a place up, and a
// signup of the same user in the same transaction reads its own.)
func queueHolders(b *pgx.Batch, byAID map[int64]*activityWork, aids []int64, users, named []string) {
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

// writePlans writes every plan, with the webhook outbox of its events when
// any webhook is enabled (hooks), and commits, in one round trip. Rows
// that change come before new rows, so that a user's cancelled
// registration no longer counts as active when their new one is inserted;
// and re-admitted rows, which become active again, are updated by a
// statement of their own after the others, since the unique index of
// active registrations is checked row by row and one statement updates
// its rows in no set order.
func (s *Store) writePlans(ctx context.Context, t *txn, work []*activityWork, hooks bool) error {
	b := &pgx.Batch{}
	var rows, readmitted rowsOf
	var evs eventsOf
	var seqAIDs, seqs []int64
	for _, w := range work {
		p := w.plan
		for _, r := range p.Updates {
			if was, ok := w.state.Registrations[r.ID]; ok && !was.Status.Active() && r.Status.Active() {
				readmitted.update(r)
				continue
			}
			rows.update(r)
		}
		for _, r := range p.Inserts {
			rows.insert(w.aid, r)
		}
		for _, e := range p.Events {
			evs.add(w.aid, e)
		}
		if p.LastSeq != w.state.LastSeq {
			seqAIDs, seqs = append(seqAIDs, w.aid), append(seqs, p.LastSeq)
		}
		if p.ActivityChanged {
			a := p.Activity
			b.Queue(`UPDATE activity SET title = $2, capacity = $3, hold_seconds = $4, waitlist = $5, updated_at = $6,
				max_seats_per_registration = $7, waitlist_policy = $8
				WHERE id = $1`, w.aid, a.Title, a.Capacity, a.HoldSeconds, a.Waitlist, a.UpdatedAt, a.MaxSeats, string(a.Policy))
		}
	}
	rows.queue(b)
	readmitted.queue(b)
	evs.queue(b)
	if len(seqAIDs) > 0 {
		b.Queue(`INSERT INTO activity_state AS s (activity_id, last_seq)
			SELECT * FROM unnest($1::bigint[], $2::bigint[])
			ON CONFLICT (activity_id) DO UPDATE SET last_seq = excluded.last_seq`, seqAIDs, seqs)
	}
	queueOutcomes(b, work)
	if hooks {
		if err := queueOutbox(b, work); err != nil {
			return err
		}
	}
	return t.commit(ctx, b)
}

// rowsOf collects the registration rows of a transaction as columns.
type rowsOf struct {
	upIDs, upStatus   []string
	upSeats           []int32
	upExpires         []*time.Time
	upAt              []time.Time
	inIDs, inUsers    []string
	inSeats           []int32
	inStatus, inMetas []string
	inAIDs            []int64
	inAt              []time.Time
	inExpires         []*time.Time
	inWaitSeq         []*int64
}

func (c *rowsOf) update(r registration.Registration) {
	c.upIDs, c.upStatus = append(c.upIDs, r.ID), append(c.upStatus, string(r.Status))
	c.upSeats = append(c.upSeats, int32(r.Seats))
	c.upExpires, c.upAt = append(c.upExpires, r.ExpiresAt), append(c.upAt, r.UpdatedAt)
}

func (c *rowsOf) insert(aid int64, r registration.Registration) {
	var ws *int64
	if r.WaitlistSeq != 0 {
		ws = &r.WaitlistSeq
	}
	c.inIDs, c.inAIDs, c.inUsers = append(c.inIDs, r.ID), append(c.inAIDs, aid), append(c.inUsers, r.UserID)
	c.inSeats = append(c.inSeats, int32(r.Seats))
	c.inStatus, c.inMetas = append(c.inStatus, string(r.Status)), append(c.inMetas, string(r.Metadata))
	c.inAt, c.inExpires, c.inWaitSeq = append(c.inAt, r.CreatedAt), append(c.inExpires, r.ExpiresAt), append(c.inWaitSeq, ws)
}

func (c *rowsOf) queue(b *pgx.Batch) {
	if n := len(c.upIDs); n > 0 {
		b.Queue(`UPDATE registration r SET status = u.status, expires_at = u.expires_at, updated_at = u.updated_at, seats = u.seats
			FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::int[])
				AS u(public_id, status, expires_at, updated_at, seats)
			WHERE r.public_id = u.public_id`, c.upIDs, c.upStatus, c.upExpires, c.upAt, c.upSeats).Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != int64(n) {
				return fmt.Errorf("change: %d of %d registrations updated", tag.RowsAffected(), n)
			}
			return nil
		})
	}
	if len(c.inIDs) > 0 {
		b.Queue(`INSERT INTO registration (public_id, activity_id, user_id, status, metadata, created_at, updated_at, expires_at,
				waitlist_seq, seats)
			SELECT t.public_id, t.activity_id, t.user_id, t.status, t.metadata::json, t.at, t.at, t.expires_at, t.waitlist_seq, t.seats
			FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::bigint[],
				$9::int[])
				AS t(public_id, activity_id, user_id, status, metadata, at, expires_at, waitlist_seq, seats)`,
			c.inIDs, c.inAIDs, c.inUsers, c.inStatus, c.inMetas, c.inAt, c.inExpires, c.inWaitSeq, c.inSeats)
	}
}

// eventsOf collects the events of a transaction as columns.
type eventsOf struct {
	aids, seqs                       []int64
	regIDs, users, types, to, actors []string
	from                             []*string
	seats                            []int32
	seatsFrom                        []*int32
	reqIDs                           []string
	at                               []time.Time
}

func (c *eventsOf) add(aid int64, e registration.Event) {
	var from *string
	if e.From != nil {
		f := string(*e.From)
		from = &f
	}
	c.aids, c.seqs = append(c.aids, aid), append(c.seqs, e.Seq)
	c.regIDs, c.users, c.types = append(c.regIDs, e.RegistrationID), append(c.users, e.UserID), append(c.types, string(e.Type))
	c.from, c.to, c.actors = append(c.from, from), append(c.to, string(e.To)), append(c.actors, e.Actor)
	c.reqIDs, c.at = append(c.reqIDs, e.RequestID), append(c.at, e.At)
	var seatsFrom *int32
	if e.SeatsFrom != nil {
		n := int32(*e.SeatsFrom)
		seatsFrom = &n
	}
	c.seats, c.seatsFrom = append(c.seats, int32(max(e.Seats, 1))), append(c.seatsFrom, seatsFrom)
}

func (c *eventsOf) queue(b *pgx.Batch) {
	if len(c.aids) == 0 {
		return
	}
	b.Queue(`INSERT INTO registration_event (activity_id, seq, registration_id, user_id, type, from_status, to_status, actor, request_id, at,
			seats, seats_from)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
			$10::timestamptz[], $11::int[], $12::int[])`,
		c.aids, c.seqs, c.regIDs, c.users, c.types, c.from, c.to, c.actors, c.reqIDs, c.at, c.seats, c.seatsFrom)
}
