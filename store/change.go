package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/physiciansnet/capacityd"
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
	index int // in Apply's batches; -1 for an activity locked for its pools
	aid   int64
	batch registration.CommandBatch
	state registration.ActivityState
	// counted is true once state.Activity carries exact Taken and Waiting.
	counted bool
	// headRead is how much of the waiting list's head the first round
	// trip read (state.Line), ahead of knowing how much is needed.
	headRead int
	plan     registration.Plan
	// releases is true when the batch may free seats; joins are the
	// pools its activity commands put it in; pools are its pools as
	// read under the lock.
	releases bool
	joins    []int64
	pools    []int64
}

// Apply runs one change transaction for the command batches of several
// activities (and pools), in two round trips (three when it must count):
//
//	BEGIN; SET LOCAL lock_timeout; pg_advisory_xact_lock(ns, id) for each pool, then each activity,
//	in id order (one statement); the activities with their last seq and pools; the pools with
//	their last seq and activities; the named registrations; the active registrations of the
//	signups' users (and re-admissions'); stored idempotency outcomes; counts of the activities
//	and pools this instance does not know at their last seq; the join order; the heads of the
//	waiting lists that cancellations and expiries may promote from, where someone may
//	wait                                                            -- one round trip
//	[counts of activities and pools changed elsewhere; heads of waiting lists] -- a second, when needed
//	registration.DecideAll
//	UPDATE changed rows; INSERT new rows; INSERT events; bump last_seq;
//	UPDATE changed activities and pools; INSERT idempotency records  -- one round trip
//	SET LOCAL statement_timeout = 0; COMMIT                           -- one more (see sendCommit)
//
// Locks are taken in one global order, so transactions of several
// instances wait for each other but never deadlock. Which locks: every
// activity of the batches and its pools; where a batch may free seats (or
// for a pool's own commands), every activity of those pools and their
// pools too, since a release promotes across a pool (see
// membership.locksFor). The memberships are guessed before the locks and
// read again under them: a guess that missed a lock rolls the transaction
// back and it runs again (errLocksMoved). The counts are the authority:
// sums over the occupying index, or what this instance counted at the
// same last seq plus what it changed since (every change records an event
// and bumps the activity's last_seq, and its pools').
func (s *Store) Apply(ctx context.Context, batches []registration.CommandBatch, now time.Time) ([]registration.Applied, error) {
	for attempt := 1; ; attempt++ {
		out, err := s.applyOnce(ctx, batches, now)
		if !errors.Is(err, errLocksMoved) {
			return out, err
		}
		if attempt == maxLockAttempts {
			return nil, capacityd.Unavailable(err, "pool memberships kept changing during the transaction; nothing was written")
		}
	}
}

// errLocksMoved means that the memberships read under a change
// transaction's locks needed a lock it did not take: it is rolled back and
// run again with the memberships it read.
var errLocksMoved = errors.New("store: pool memberships changed before the locks were taken")

// maxLockAttempts bounds the runs of one change transaction whose
// memberships keep changing.
const maxLockAttempts = 5

func (s *Store) applyOnce(ctx context.Context, batches []registration.CommandBatch, now time.Time) ([]registration.Applied, error) {
	out := make([]registration.Applied, len(batches))
	var public, poolPublic []string
	for _, b := range batches {
		if b.IsPool() {
			poolPublic = append(poolPublic, b.ActivityID)
			continue
		}
		public = append(public, b.ActivityID)
		poolPublic = append(poolPublic, joinedPools(b.Commands)...)
	}
	ids, err := s.activityIDs(ctx, public)
	if err != nil {
		return nil, err
	}
	pids, err := s.poolIDs(ctx, poolPublic)
	if err != nil {
		return nil, err
	}
	var work []*activityWork
	var pools []*poolWork
	for i, b := range batches {
		if b.IsPool() {
			pid, ok := pids[b.ActivityID]
			if !ok {
				out[i].Err = registration.PoolNotFound(b.ActivityID)
				continue
			}
			pools = append(pools, &poolWork{index: i, pid: pid, batch: b})
			continue
		}
		aid, ok := ids[b.ActivityID]
		if !ok {
			out[i].Err = registration.ActivityNotFound(b.ActivityID)
			continue
		}
		w := &activityWork{index: i, aid: aid, batch: b, releases: slices.ContainsFunc(b.Commands, registration.Promotes)}
		for _, p := range joinedPools(b.Commands) {
			if pid, ok := pids[p]; ok {
				w.joins = append(w.joins, pid)
			}
		}
		work = append(work, w)
	}
	if len(work)+len(pools) == 0 {
		return out, nil
	}
	locks, err := s.plannedLocks(ctx, work, pools)
	if err != nil {
		return nil, err
	}
	work, pools = withLocked(work, pools, locks)

	err = s.pipelined(ctx, func(t *txn) error {
		rd, err := s.readStates(ctx, t, work, pools, locks)
		if err != nil {
			return err
		}
		plans, poolPlans, err := registration.DecideAll(changeOf(work, pools, rd), now)
		if err != nil {
			return err
		}
		for i, w := range work {
			w.plan = plans[i]
		}
		for i, p := range pools {
			p.plan = poolPlans[i]
		}
		return s.writePlans(ctx, t, work, pools)
	})
	s.remember(work, pools, err)
	if err != nil {
		return nil, err
	}
	for _, w := range work {
		switch {
		case w.index >= 0:
			out[w.index].Plan = w.plan
		case len(w.plan.Events) > 0 || w.plan.ActivityChanged:
			out = append(out, registration.Applied{Plan: w.plan})
		}
	}
	for _, p := range pools {
		if p.index >= 0 {
			out[p.index].Plan = registration.Plan{Outcomes: p.plan.Outcomes, Pools: []registration.PoolSeatState{p.plan.SeatState()}}
		}
	}
	return out, nil
}

// joinedPools returns the pools that activity commands put the activity in.
func joinedPools(cmds []registration.Command) []string {
	var out []string
	for _, c := range cmds {
		if c, ok := c.(registration.ActivityCommand); ok && c.Patch.Pools != nil {
			out = append(out, *c.Patch.Pools...)
		}
	}
	return out
}

// plannedLocks returns the locks the work needs by the memberships this
// instance knows, learning those it does not know first.
func (s *Store) plannedLocks(ctx context.Context, work []*activityWork, pools []*poolWork) (lockSet, error) {
	for range 4 {
		locks, acts, ps := s.members.locksFor(work, pools)
		if len(acts)+len(ps) == 0 {
			return locks, nil
		}
		if err := s.members.learn(ctx, s.db, acts, ps); err != nil {
			return lockSet{}, err
		}
	}
	locks, acts, ps := s.members.locksFor(work, pools)
	if len(acts)+len(ps) > 0 {
		return lockSet{}, errLocksMoved
	}
	return locks, nil
}

// withLocked adds to the work the activities and pools locked only for
// promotions across pools, and orders both by id (the lock order).
func withLocked(work []*activityWork, pools []*poolWork, locks lockSet) ([]*activityWork, []*poolWork) {
	for aid := range locks.acts {
		if !slices.ContainsFunc(work, func(w *activityWork) bool { return w.aid == aid }) {
			work = append(work, &activityWork{index: -1, aid: aid})
		}
	}
	for pid := range locks.pools {
		if !slices.ContainsFunc(pools, func(p *poolWork) bool { return p.pid == pid }) {
			pools = append(pools, &poolWork{index: -1, pid: pid})
		}
	}
	slices.SortFunc(work, func(a, b *activityWork) int { return cmp.Compare(a.aid, b.aid) })
	slices.SortFunc(pools, func(a, b *poolWork) int { return cmp.Compare(a.pid, b.pid) })
	return work, pools
}

// changeOf is what the transaction read, for DecideAll.
func changeOf(work []*activityWork, pools []*poolWork, rd txnRead) registration.Change {
	c := registration.Change{At: rd.at, JoinBase: rd.joinBase, Series: rd.series}
	for _, w := range work {
		c.Activities = append(c.Activities, w.state)
		c.Commands = append(c.Commands, w.batch.Commands)
	}
	for _, p := range pools {
		c.Pools = append(c.Pools, p.state)
		c.PoolCommands = append(c.PoolCommands, p.batch.Commands)
	}
	return c
}

// remember keeps what this instance now knows exactly of the counts of
// the activities and pools it committed, and forgets them after a failure.
func (s *Store) remember(work []*activityWork, pools []*poolWork, err error) {
	var movedActs, movedPools []int64
	s.cacheMu.Lock()
	for _, w := range work {
		if err != nil {
			delete(s.cache, w.aid)
			continue
		}
		a := w.plan.Activity
		s.cache[w.aid] = seatCache{seq: w.plan.LastSeq, taken: a.Taken, waiting: a.Waiting, fill: a.Policy == registration.PolicyFill}
		if !slices.Equal(a.Pools, w.state.Activity.Pools) {
			movedActs = append(movedActs, w.aid)
		}
	}
	for _, p := range pools {
		if err != nil {
			delete(s.poolCache, p.pid)
			continue
		}
		s.poolCache[p.pid] = poolCache{seq: p.plan.LastSeq, taken: p.plan.Pool.Taken}
		if !slices.Equal(p.plan.Pool.Activities, p.state.Pool.Activities) {
			movedPools = append(movedPools, p.pid)
		}
	}
	s.cacheMu.Unlock()
	if len(movedActs)+len(movedPools) > 0 {
		s.members.forget(movedActs, movedPools)
	}
}

// cached returns this instance's exact counts of an activity at seq.
func (s *Store) cached(aid, seq int64) (seatCache, bool) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	c, ok := s.cache[aid]
	return c, ok && (c.seq == seq || trustCachedCounts)
}

// txnRead is what a change transaction reads besides the states.
type txnRead struct {
	// joinBase is the transaction's value of registration_join_seq (0
	// when it has no signup, which alone may waitlist).
	joinBase int64
	// at is the transaction's time.
	at time.Time
	// series are the series of the signups, with their users' active
	// registrations in them, and the series activity commands name.
	series []registration.SeriesState
}

// writePlans writes every plan in one round trip, then commits in another
// (the COMMIT without a statement timeout, see sendCommit). (Webhooks
// read the events it records: nothing is written for them.) Rows
// that change come before new rows, so that a user's cancelled
// registration no longer counts as active when their new one is inserted;
// and re-admitted rows, which become active again, are updated by a
// statement of their own after the others, since the unique index of
// active registrations is checked row by row and one statement updates
// its rows in no set order.
func (s *Store) writePlans(ctx context.Context, t *txn, work []*activityWork, pools []*poolWork) error {
	b := &pgx.Batch{}
	var rows, readmitted rowsOf
	var evs eventsOf
	var blocks blocksOf
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
		for _, c := range p.Blocks {
			blocks.add(w.aid, c, w.state.At)
		}
		if p.LastSeq != w.state.LastSeq {
			seqAIDs, seqs = append(seqAIDs, w.aid), append(seqs, p.LastSeq)
		}
		if p.ActivityChanged {
			a := p.Activity
			b.Queue(`UPDATE activity SET title = $2, capacity = $3, hold_seconds = $4, waitlist = $5, updated_at = $6,
				max_seats_per_registration = $7, waitlist_policy = $8, series_id = (SELECT id FROM series WHERE public_id = $9),
				opens_at = $10, closes_at = $11, queue = $12, starts_at = $13, ends_at = $14, attendance_percent = $15, confirm_by = $16,
				release_no_shows_after_minutes = $17,
				confirm_done_at = CASE WHEN confirm_by IS DISTINCT FROM $16 THEN NULL ELSE confirm_done_at END,
				no_show_done_at = CASE WHEN starts_at IS DISTINCT FROM $13 OR release_no_shows_after_minutes IS DISTINCT FROM $17
					THEN NULL ELSE no_show_done_at END,
				ended_done_at = CASE WHEN ends_at IS DISTINCT FROM $14 THEN NULL ELSE ended_done_at END
				WHERE id = $1`, w.aid, a.Title, a.Capacity, a.HoldSeconds, a.Waitlist, a.UpdatedAt, a.MaxSeats, string(a.Policy),
				a.SeriesID, a.OpensAt, a.ClosesAt, a.Queue, a.StartsAt, a.EndsAt, a.AttendancePercent, a.ConfirmBy,
				a.ReleaseNoShowsAfterMinutes)
			if !slices.Equal(a.Pools, w.state.Activity.Pools) {
				batchRepool(b, w.aid, a.Pools, pools)
			}
		}
	}
	batchPoolPlans(b, pools)
	blocks.batch(b)
	rows.batch(b)
	readmitted.batch(b)
	evs.batch(b)
	if len(seqAIDs) > 0 {
		b.Queue(`INSERT INTO activity_state AS s (activity_id, last_seq)
			SELECT * FROM unnest($1::bigint[], $2::bigint[])
			ON CONFLICT (activity_id) DO UPDATE SET last_seq = excluded.last_seq`, seqAIDs, seqs)
	}
	batchOutcomes(b, work)
	batchUsedTokens(b, work)
	return t.commit(ctx, b)
}

// rowsOf collects the registration rows of a transaction as columns.
type rowsOf struct {
	upIDs, upStatus   []string
	upBlocks          []*string
	upSeats           []int32
	upExpires         []*time.Time
	upAt              []time.Time
	upConfirmed       []*time.Time
	upReasons         []*string
	inIDs, inUsers    []string
	inSeats           []int32
	inStatus, inMetas []string
	inAIDs            []int64
	inAt              []time.Time
	inExpires         []*time.Time
	inWaitSeq         []*int64
	inJoined          []*int64
	inBlocks          []*string
	inConfirmed       []*time.Time
}

func (c *rowsOf) update(r registration.Registration) {
	c.upIDs, c.upStatus = append(c.upIDs, r.ID), append(c.upStatus, string(r.Status))
	c.upSeats, c.upBlocks = append(c.upSeats, int32(r.Seats)), append(c.upBlocks, r.BlockID)
	c.upExpires, c.upAt = append(c.upExpires, r.ExpiresAt), append(c.upAt, r.UpdatedAt)
	c.upConfirmed, c.upReasons = append(c.upConfirmed, r.ConfirmedAt), append(c.upReasons, (*string)(r.CancelReason))
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
	var joined *int64
	if r.Joined != 0 {
		joined = &r.Joined
	}
	c.inJoined, c.inBlocks = append(c.inJoined, joined), append(c.inBlocks, r.BlockID)
	c.inConfirmed = append(c.inConfirmed, r.ConfirmedAt)
}

// batch adds to b the statements that write the collected rows.
func (c *rowsOf) batch(b *pgx.Batch) {
	if n := len(c.upIDs); n > 0 {
		b.Queue(`UPDATE registration r SET status = u.status, expires_at = u.expires_at, updated_at = u.updated_at, seats = u.seats,
				block_id = u.block_id, confirmed_at = u.confirmed_at, cancel_reason = u.cancel_reason
			FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::int[], $6::text[], $7::timestamptz[], $8::text[])
				AS u(public_id, status, expires_at, updated_at, seats, block_id, confirmed_at, cancel_reason)
			WHERE r.public_id = u.public_id`, c.upIDs, c.upStatus, c.upExpires, c.upAt, c.upSeats, c.upBlocks, c.upConfirmed, c.upReasons).Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != int64(n) {
				return fmt.Errorf("change: %d of %d registrations updated", tag.RowsAffected(), n)
			}
			return nil
		})
	}
	if len(c.inIDs) > 0 {
		b.Queue(`INSERT INTO registration (public_id, activity_id, user_id, status, metadata, created_at, updated_at, expires_at,
				waitlist_seq, seats, joined, block_id, confirmed_at)
			SELECT t.public_id, t.activity_id, t.user_id, t.status, t.metadata::json, t.at, t.at, t.expires_at, t.waitlist_seq, t.seats,
				t.joined, t.block_id, t.confirmed_at
			FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::bigint[],
				$9::int[], $10::bigint[], $11::text[], $12::timestamptz[])
				AS t(public_id, activity_id, user_id, status, metadata, at, expires_at, waitlist_seq, seats, joined, block_id, confirmed_at)`,
			c.inIDs, c.inAIDs, c.inUsers, c.inStatus, c.inMetas, c.inAt, c.inExpires, c.inWaitSeq, c.inSeats, c.inJoined, c.inBlocks,
			c.inConfirmed)
	}
}
