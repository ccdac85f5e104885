package store

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// poolLockNamespace is the first key of every pool's admission advisory
// lock: "CAPP" in ASCII. A change transaction takes its pools' locks
// before its activities', each kind in id order, in one statement: one
// global order, so transactions never deadlock however pools overlap.
const poolLockNamespace = 0x43415050

// poolCache is what this instance knows exactly of a pool's taken seats
// after its own last commit: valid while the pool's last_seq is still seq.
type poolCache struct {
	seq   int64
	taken int
}

// membership is this instance's knowledge of which activities belong to
// which pools, by internal ids. It chooses the locks of a change
// transaction before the transaction reads the memberships under them; a
// stale entry costs a retry (see Apply), never a wrong decision.
type membership struct {
	mu       sync.Mutex
	actPools map[int64][]int64 // activity → its pools (known, maybe none)
	poolActs map[int64][]int64 // pool → its activities
	// inSeries says whether an activity was in a series when last read:
	// a transaction skips the (series, user) locks and reads when none
	// of its signups' activities is (see Store.readStates).
	inSeries map[int64]bool
}

func newMembership() *membership {
	return &membership{actPools: make(map[int64][]int64), poolActs: make(map[int64][]int64), inSeries: make(map[int64]bool)}
}

// maybeInSeries reports whether an activity may be in a series: it was
// when last read, or it was never read.
func (m *membership) maybeInSeries(aid int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.inSeries[aid]
	return in || !ok
}

// setSeries records whether activities are in a series, as read under
// their locks.
func (m *membership) setSeries(in map[int64]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for a, v := range in {
		m.inSeries[a] = v
	}
}

// lockSet is the locks of one change transaction.
type lockSet struct {
	acts, pools map[int64]bool
}

func (l lockSet) covers(o lockSet) bool {
	for id := range o.acts {
		if !l.acts[id] {
			return false
		}
	}
	for id := range o.pools {
		if !l.pools[id] {
			return false
		}
	}
	return true
}

// locksFor returns the locks that the work needs by what is known of the
// memberships: each activity and its pools; for an activity whose commands
// may free seats, and for a pool's own commands, also every activity of
// the pools concerned and their pools (a release promotes across a pool,
// and a promotion must fit every limit of the promoted registration); and
// the pools an activity joins. unknownActs and unknownPools are the
// memberships it needed but does not know.
func (m *membership) locksFor(work []*activityWork, pools []*poolWork) (l lockSet, unknownActs, unknownPools []int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l = lockSet{acts: make(map[int64]bool), pools: make(map[int64]bool)}
	poolsOf := func(aid int64) []int64 {
		ps, ok := m.actPools[aid]
		if !ok {
			unknownActs = append(unknownActs, aid)
		}
		return ps
	}
	spread := func(pid int64) {
		as, ok := m.poolActs[pid]
		if !ok {
			unknownPools = append(unknownPools, pid)
		}
		for _, b := range as {
			l.acts[b] = true
			for _, q := range poolsOf(b) {
				l.pools[q] = true
			}
		}
	}
	for _, w := range work {
		if w.index < 0 {
			continue
		}
		l.acts[w.aid] = true
		ps := poolsOf(w.aid)
		for _, p := range ps {
			l.pools[p] = true
		}
		if w.releases {
			for _, p := range ps {
				spread(p)
			}
		}
		for _, p := range w.joins {
			l.pools[p] = true
		}
	}
	for _, p := range pools {
		if p.index >= 0 {
			l.pools[p.pid] = true
			spread(p.pid)
		}
	}
	return l, unknownActs, unknownPools
}

// learn reads the memberships of activities and pools from the database.
func (m *membership) learn(ctx context.Context, db DBTX, aids, pids []int64) error {
	rows, err := db.Query(ctx, `SELECT activity_id, pool_id FROM activity_pool WHERE activity_id = ANY($1) OR pool_id = ANY($2)
		ORDER BY activity_id, pool_id`, aids, pids)
	if err != nil {
		return interpret(err)
	}
	acts := make(map[int64][]int64, len(aids))
	ps := make(map[int64][]int64, len(pids))
	for _, a := range aids {
		acts[a] = nil
	}
	for _, p := range pids {
		ps[p] = nil
	}
	var aid, pid int64
	_, err = pgx.ForEachRow(rows, []any{&aid, &pid}, func() error {
		if _, ok := acts[aid]; ok {
			acts[aid] = append(acts[aid], pid)
		}
		if _, ok := ps[pid]; ok {
			ps[pid] = append(ps[pid], aid)
		}
		return nil
	})
	if err != nil {
		return interpret(err)
	}
	m.set(acts, ps)
	return nil
}

// set records memberships read (under their locks, or just now).
func (m *membership) set(acts, pools map[int64][]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for a, ps := range acts {
		m.actPools[a] = slices.Sorted(slices.Values(ps))
	}
	for p, as := range pools {
		m.poolActs[p] = slices.Sorted(slices.Values(as))
	}
}

// forget drops what is known of activities and pools whose memberships a
// transaction changed.
func (m *membership) forget(aids, pids []int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range aids {
		delete(m.actPools, a)
	}
	for _, p := range pids {
		delete(m.poolActs, p)
	}
}

// poolWork is one pool's part of a change transaction.
type poolWork struct {
	index   int // in Apply's batches; -1 for a pool locked for its activities
	pid     int64
	batch   registration.CommandBatch
	state   registration.PoolState
	counted bool
	members []int64
	plan    registration.PoolPlan
}

// batchPools adds to b the reads of the locked pools: their rows with
// their activities and last seq, and the authority's taken of those this
// instance does not know at their last seq.
func batchPools(b *pgx.Batch, s *Store, pools []*poolWork, rd *txnRead) map[int64]*poolWork {
	byPID := make(map[int64]*poolWork, len(pools))
	if len(pools) == 0 {
		return byPID
	}
	pids := make([]int64, len(pools))
	var uncounted []int64
	for i, p := range pools {
		byPID[p.pid], pids[i] = p, p.pid
		s.cacheMu.Lock()
		if _, ok := s.poolCache[p.pid]; !ok {
			uncounted = append(uncounted, p.pid)
		}
		s.cacheMu.Unlock()
	}
	b.Queue(`SELECT p.id, p.public_id, p.title, p.capacity, p.last_seq, p.created_at, p.updated_at, now(),
			ARRAY(SELECT m.activity_id FROM activity_pool m WHERE m.pool_id = p.id ORDER BY m.activity_id),
			ARRAY(SELECT a.public_id FROM activity_pool m JOIN activity a ON a.id = m.activity_id WHERE m.pool_id = p.id
				ORDER BY a.public_id),
			`+poolReservedSQL("p.id")+`
		FROM pool p WHERE p.id = ANY($1)`, pids).Query(func(rows pgx.Rows) error {
		var pid, seq, reserved int64
		var pool registration.Pool
		var members []int64
		var at time.Time
		_, err := pgx.ForEachRow(rows, []any{&pid, &pool.ID, &pool.Title, &pool.Capacity, &seq, &pool.CreatedAt,
			&pool.UpdatedAt, &at, &members, &pool.Activities, &reserved}, func() error {
			pool.Reserved = int(reserved)
			p := byPID[pid]
			pool.CreatedAt, pool.UpdatedAt, rd.at = pool.CreatedAt.UTC(), pool.UpdatedAt.UTC(), at.UTC()
			p.state, p.members, p.batch.ActivityID = registration.PoolState{Pool: pool, LastSeq: seq}, members, pool.ID
			s.cacheMu.Lock()
			if c, ok := s.poolCache[pid]; ok && (c.seq == seq || trustCachedCounts) {
				p.state.Pool.Taken, p.counted = c.taken, true
			}
			s.cacheMu.Unlock()
			pool.Activities, members = nil, nil
			return nil
		})
		return err
	})
	if len(uncounted) > 0 {
		batchPoolCounts(b, uncounted, byPID)
	}
	return byPID
}

// batchPoolCounts adds to b the authority's taken of pools.
func batchPoolCounts(b *pgx.Batch, pids []int64, byPID map[int64]*poolWork) {
	b.Queue(`SELECT k.id, `+poolTakenSQL("k.id")+` FROM unnest($1::bigint[]) AS k(id)`, pids).Query(func(rows pgx.Rows) error {
		var pid, taken int64
		_, err := pgx.ForEachRow(rows, []any{&pid, &taken}, func() error {
			p := byPID[pid]
			p.state.Pool.Taken, p.counted = int(taken), true
			return nil
		})
		return err
	})
}

// checkLocks records the memberships read under the locks and fails with
// errLocksMoved when they need a lock the transaction did not take.
func (s *Store) checkLocks(work []*activityWork, pools []*poolWork, locked lockSet) error {
	acts := make(map[int64][]int64, len(work))
	ps := make(map[int64][]int64, len(pools))
	for _, w := range work {
		acts[w.aid] = w.pools
	}
	for _, p := range pools {
		ps[p.pid] = p.members
	}
	s.members.set(acts, ps)
	need, unknownActs, unknownPools := s.members.locksFor(work, pools)
	if len(unknownActs)+len(unknownPools) > 0 || !locked.covers(need) {
		return errLocksMoved
	}
	return nil
}

// batchRepool adds to b the replacement of an activity's pools (public
// ids, all among the transaction's pools).
func batchRepool(b *pgx.Batch, aid int64, ids []string, pools []*poolWork) {
	pids := []int64{} // never NULL: <> ALL(NULL) matches nothing
	for _, p := range pools {
		if slices.Contains(ids, p.state.Pool.ID) {
			pids = append(pids, p.pid)
		}
	}
	b.Queue(`DELETE FROM activity_pool WHERE activity_id = $1 AND pool_id <> ALL($2)`, aid, pids)
	b.Queue(`INSERT INTO activity_pool (activity_id, pool_id) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING`, aid, pids)
}

// batchPoolPlans adds to b the writes of the pools whose state changed:
// their last seq, and their title and capacity.
func batchPoolPlans(b *pgx.Batch, pools []*poolWork) {
	var pids, seqs []int64
	var titles []string
	var capacities []int32
	var updated []time.Time
	for _, p := range pools {
		if !p.plan.Changed {
			continue
		}
		pl := p.plan.Pool
		pids, seqs = append(pids, p.pid), append(seqs, p.plan.LastSeq)
		titles, capacities, updated = append(titles, pl.Title), append(capacities, int32(pl.Capacity)), append(updated, pl.UpdatedAt)
	}
	if len(pids) == 0 {
		return
	}
	b.Queue(`UPDATE pool p SET last_seq = u.last_seq, title = u.title, capacity = u.capacity, updated_at = u.updated_at
		FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::int[], $5::timestamptz[]) AS u(id, last_seq, title, capacity, updated_at)
		WHERE p.id = u.id`, pids, seqs, titles, capacities, updated)
}

// anyPooled reports whether any of the activities belongs to a pool, by
// what this instance knows (learning what it does not). A stale answer
// is safe where it is used: an activity thought to be in no pool is judged
// on its own seats, and a pool only ever leaves fewer.
func (m *membership) anyPooled(ctx context.Context, db DBTX, aids []int64) (bool, error) {
	var unknown []int64
	m.mu.Lock()
	pooled := false
	for _, a := range aids {
		ps, ok := m.actPools[a]
		if !ok {
			unknown = append(unknown, a)
		}
		pooled = pooled || len(ps) > 0
	}
	m.mu.Unlock()
	if pooled || len(unknown) == 0 {
		return pooled, nil
	}
	if err := m.learn(ctx, db, unknown, nil); err != nil {
		return false, err
	}
	return m.anyPooled(ctx, db, aids)
}
