package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// pool_rush's shape: pools of poolSeats seats, each shared by
// poolActivities activities of poolActivitySeats seats, so that a pool
// fills before its activities do; poolSharedPercent of the pools lend
// their first activity to the next pool too.
const (
	poolSeats         = 60
	poolActivities    = 3
	poolActivitySeats = 40
	poolSharedPercent = 30
)

// poolLayout says which pools each of pool_rush's activities belongs to:
// activity a to pool a/poolActivities, and the first activity of each of
// the first Shared pools (i < Shared) also to pool (i+1) mod Pools, the
// next one, which has poolActivities+1 activities then.
type poolLayout struct {
	Pools  int
	Shared int
	// of lists each activity's pools, members each pool's activities,
	// both ascending.
	of      [][]int
	members [][]int
}

// newPoolLayout lays out pools pools: poolSharedPercent of them (none
// when there is only one) lend their first activity to the next.
func newPoolLayout(pools int) poolLayout {
	l := poolLayout{Pools: pools, of: make([][]int, pools*poolActivities), members: make([][]int, pools)}
	if pools > 1 {
		l.Shared = pools * poolSharedPercent / 100
	}
	for a := range l.of {
		i := a / poolActivities
		l.of[a] = []int{i}
		if a%poolActivities == 0 && i < l.Shared {
			l.of[a] = append(l.of[a], (i+1)%pools)
		}
		slices.Sort(l.of[a])
		for _, p := range l.of[a] {
			l.members[p] = append(l.members[p], a)
		}
	}
	return l
}

// poolIDs returns the ids of activity a's pools, sorted as the service
// lists them.
func (l poolLayout) poolIDs(a int, ids []string) []string {
	out := make([]string, 0, len(l.of[a]))
	for _, p := range l.of[a] {
		out = append(out, ids[p])
	}
	slices.Sort(out)
	return out
}

// memberIDs returns the ids of pool p's activities, sorted as the service
// lists them.
func (l poolLayout) memberIDs(p int, ids []string) []string {
	out := make([]string, 0, len(l.members[p]))
	for _, a := range l.members[p] {
		out = append(out, ids[a])
	}
	slices.Sort(out)
	return out
}

// poolRush is course_rush over pools: Sizes.PoolPools pools of 60 seats
// (100), each shared by 3 activities of 40 seats (300, untimed, no
// waiting list), 30 of which also belong to the next pool, and
// Sizes.PoolUsers distinct users (20,000) each signing up for 3 distinct
// random activities at once, one seat each (60,000 requests from 256
// clients). A signup must fit its activity and every pool of it. Nothing
// is released, so afterwards, read from the authority: no activity or
// pool is over its capacity, each activity's taken is its signups
// answered 201 and each pool's the sum of its activities', each activity's
// remaining is the least of its own free seats and its pools', and every
// activity that refused someone as full has nothing left at the end:
// remaining only falls, so a seat left at the end was left when the
// refused signup asked for it.
func (b *bench) poolRush(ctx context.Context) error {
	n, users := b.cfg.PoolPools, b.cfg.PoolUsers
	layout := newPoolLayout(n)
	poolIDs, err := b.createPools(ctx, n, client.NewPool{Title: "Pool", Capacity: poolSeats})
	if err != nil {
		return err
	}
	ids, err := b.createActivitiesWith(ctx, len(layout.of), func(a int) client.NewActivity {
		return client.NewActivity{Title: "Pooled", Capacity: poolActivitySeats, Pools: layout.poolIDs(a, poolIDs)}
	})
	if err != nil {
		return err
	}
	toks, err := b.tokens(ScenarioPoolRush, users)
	if err != nil {
		return err
	}
	picks := pickCourses(rand.New(rand.NewPCG(uint64(n), uint64(users)+poolSeats)), users, len(ids))
	run := newPoolRun(len(ids))
	out := b.drive(ctx, Load{Name: ScenarioPoolRush, Clients: courseClients, Duration: 5 * time.Minute, MaxOps: int64(users * courseChoices)},
		func(ctx context.Context, _ int, i int64) error {
			u, a := i/courseChoices, picks[i/courseChoices][i%courseChoices]
			res, err := b.api.WithToken(toks[u]).Signup(ctx, ids[a], client.SignupOptions{})
			return run.record(a, res, err)
		})
	res := out.Result(courseClients)
	res.Note = sizeNote("%d users over %d pools", [2]int{users, FullSizes.PoolUsers}, [2]int{n, FullSizes.PoolPools})
	b.report.Scenarios[ScenarioPoolRush] = res
	activities, err := b.activitiesOf(ctx, ids)
	if err != nil {
		return err
	}
	pools, err := b.poolsOf(ctx, poolIDs)
	if err != nil {
		return err
	}
	v := run.judge(layout, ids, poolIDs, activities, pools)
	ch := b.report.Checks
	ch[CheckPoolPools] = int64(n)
	ch[CheckPoolActivities] = int64(len(ids))
	ch[CheckPoolShared] = int64(layout.Shared)
	ch[CheckPoolAdmitted] = run.answers.count(http.StatusCreated)
	ch[CheckPoolFull] = run.full.Load()
	ch[CheckPool5xx] = run.answers.fivexx()
	ch[CheckPoolOverCapacity] = v.overCapacity
	ch[CheckPoolInexactActivities] = v.inexactActivities
	ch[CheckPoolInexactPools] = v.inexactPools
	ch[CheckPoolRefusedFitting] = v.refusedFitting
	ch[CheckPoolFullPools] = v.fullPools
	ch[CheckPoolP99MS] = res.P99MS
	fmt.Fprintf(b.log, "%-16s %d pools, %d activities (%d in two pools): admitted %d, refused as full %d, 5xx %d; "+
		"over capacity %d, inexact activities %d, inexact pools %d, refused while a seat was left %d; full pools %d\n",
		ScenarioPoolRush, n, len(ids), layout.Shared, ch[CheckPoolAdmitted], ch[CheckPoolFull], ch[CheckPool5xx],
		v.overCapacity, v.inexactActivities, v.inexactPools, v.refusedFitting, v.fullPools)
	return nil
}

// poolRun is what pool_rush's answers said, per activity.
type poolRun struct{ seatRun }

func newPoolRun(n int) *poolRun {
	return &poolRun{seatRun{seated: make([]atomic.Int64, n), refused: make([]atomic.Bool, n)}}
}

// poolVerdict is pool_rush's exactness, from the authority's numbers at
// the end.
type poolVerdict struct {
	// overCapacity counts the activities and pools whose taken exceeds
	// their capacity.
	overCapacity int64
	// inexactActivities counts the activities whose taken is not their
	// signups answered 201, whose remaining is not the least of their own
	// free seats and their pools', or whose pools are not the layout's.
	inexactActivities int64
	// inexactPools counts the pools whose taken is not the sum of their
	// activities' signups answered 201, whose remaining is not their
	// free seats, or whose activities are not the layout's.
	inexactPools int64
	// refusedFitting counts the activities that refused someone as full
	// and yet have a seat left, in themselves and in every pool of them.
	refusedFitting int64
	// fullPools counts the pools with no seat left.
	fullPools int64
}

// judge compares the authority's activities and pools (in the order of
// ids and poolIDs) with the answers and the layout.
func (r *poolRun) judge(l poolLayout, ids, poolIDs []string, activities []client.Activity, pools []client.Pool) poolVerdict {
	var v poolVerdict
	poolFree := make([]int, len(pools))
	for p, pool := range pools {
		poolFree[p] = poolSeats - pool.Taken
		var seated int64
		for _, a := range l.members[p] {
			seated += r.seated[a].Load()
		}
		if pool.Taken > poolSeats {
			v.overCapacity++
		}
		if pool.Capacity != poolSeats || int64(pool.Taken) != seated || pool.Remaining != max(0, poolFree[p]) ||
			!slices.Equal(pool.Activities, l.memberIDs(p, ids)) {
			v.inexactPools++
		}
		if poolFree[p] <= 0 {
			v.fullPools++
		}
	}
	for a, act := range activities {
		free := poolActivitySeats - act.Taken
		for _, p := range l.of[a] {
			free = min(free, poolFree[p])
		}
		free = max(0, free)
		if act.Taken > poolActivitySeats {
			v.overCapacity++
		}
		if act.Capacity != poolActivitySeats || int64(act.Taken) != r.seated[a].Load() || act.Remaining != free ||
			!slices.Equal(act.Pools, l.poolIDs(a, poolIDs)) {
			v.inexactActivities++
		}
		if r.refused[a].Load() && free > 0 {
			v.refusedFitting++
		}
	}
	return v
}

// createPools creates n pools as like from 16 clients, each titled like's
// title, its number and the run's nonce, and returns their ids in order.
func (b *bench) createPools(ctx context.Context, n int, like client.NewPool) ([]string, error) {
	admin := b.api.WithToken(b.admin)
	ids := make([]string, n)
	out := b.drive(ctx, Load{Name: "setup:pools", Clients: 16, Duration: 2 * time.Minute, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			in := like
			in.Title = fmt.Sprintf("%s %d %s", like.Title, i+1, b.nonce)
			p, err := admin.CreatePool(ctx, in)
			ids[i] = p.ID
			return err
		})
	if out.Errors > 0 || out.Ops < int64(n) {
		return nil, fmt.Errorf("loadtest: created %d of %d pools: %v", out.Ops, n, out.FirstError)
	}
	return ids, nil
}

// activitiesOf reads each activity from the authority.
func (b *bench) activitiesOf(ctx context.Context, ids []string) ([]client.Activity, error) {
	out := make([]client.Activity, len(ids))
	for i, id := range ids {
		a, err := b.api.WithToken(b.admin).GetActivity(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("loadtest: read activity %s: %w", id, err)
		}
		out[i] = a
	}
	return out, nil
}

// poolsOf reads each pool from the authority.
func (b *bench) poolsOf(ctx context.Context, ids []string) ([]client.Pool, error) {
	out := make([]client.Pool, len(ids))
	for i, id := range ids {
		p, err := b.api.WithToken(b.admin).GetPool(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("loadtest: read pool %s: %w", id, err)
		}
		out[i] = p
	}
	return out, nil
}
