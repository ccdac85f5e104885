package loadtest

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestPoolLayout(t *testing.T) {
	t.Parallel()
	l := newPoolLayout(100)
	require.Equal(t, 30, l.Shared)
	require.Len(t, l.of, 300)
	inTwo := 0
	for a, pools := range l.of {
		require.Contains(t, pools, a/poolActivities, "activity %d is in its own pool", a)
		require.LessOrEqual(t, len(pools), 2)
		if len(pools) == 2 {
			inTwo++
			require.Zero(t, a%poolActivities, "only a pool's first activity is lent")
			require.Less(t, a/poolActivities, 30)
		}
	}
	require.Equal(t, 30, inTwo)
	require.Equal(t, []int{0, 1, 2}, l.members[0])
	require.Equal(t, []int{0, 3, 4, 5}, l.members[1], "pool 1 has pool 0's first activity too")
	require.Equal(t, []int{87, 90, 91, 92}, l.members[30], "the 30th lent activity is pool 29's")
	require.Equal(t, []int{93, 94, 95}, l.members[31])
	require.Equal(t, []int{297, 298, 299}, l.members[99])

	// Smaller runs keep the shape.
	require.Zero(t, newPoolLayout(3).Shared, "30% of 3 pools is none")
	require.Zero(t, newPoolLayout(1).Shared, "one pool lends to no other")
	l = newPoolLayout(4)
	require.Equal(t, 1, l.Shared)
	require.Equal(t, [][]int{{0, 1}, {0}, {0}, {1}, {1}, {1}, {2}, {2}, {2}, {3}, {3}, {3}}, l.of)
	require.Equal(t, [][]int{{0, 1, 2}, {0, 3, 4, 5}, {6, 7, 8}, {9, 10, 11}}, l.members)

	ids := []string{"p_b", "p_a", "p_c", "p_d"}
	require.Equal(t, []string{"p_a", "p_b"}, l.poolIDs(0, ids), "sorted as the service lists them")
	require.Equal(t, []string{"a0", "a3", "a4", "a5"}, l.memberIDs(1, []string{"a0", "a1", "a2", "a3", "a4", "a5"}))
}

// poolRushEnd makes the authority's activities and pools of a pool_rush
// of layout l with the given taken seats, every remaining as it should be.
func poolRushEnd(l poolLayout, ids, poolIDs []string, taken, poolTaken []int) ([]client.Activity, []client.Pool) {
	pools := make([]client.Pool, len(poolIDs))
	for p := range pools {
		pools[p] = client.Pool{ID: poolIDs[p], Capacity: poolSeats, Taken: poolTaken[p],
			Remaining: max(0, poolSeats-poolTaken[p]), Activities: l.memberIDs(p, ids)}
	}
	activities := make([]client.Activity, len(ids))
	for a := range activities {
		free := poolActivitySeats - taken[a]
		for _, p := range l.of[a] {
			free = min(free, poolSeats-poolTaken[p])
		}
		activities[a] = client.Activity{ID: ids[a], Capacity: poolActivitySeats, Taken: taken[a],
			Remaining: max(0, free), Pools: l.poolIDs(a, poolIDs)}
	}
	return activities, pools
}

func TestPoolRunJudge(t *testing.T) {
	t.Parallel()
	// 4 pools, 12 activities: activity 0 in pools 0 and 1.
	l := newPoolLayout(4)
	ids := []string{"a00", "a01", "a02", "a03", "a04", "a05", "a06", "a07", "a08", "a09", "a10", "a11"}
	poolIDs := []string{"p_0", "p_1", "p_2", "p_3"}
	full := &client.Error{Status: http.StatusConflict, Code: client.CodeActivityFull}
	seat := func(r *poolRun, a, n int) {
		for range n {
			require.NoError(t, r.record(a, client.SignupResult{}, nil))
		}
	}
	// Pool 0 full: activity 0 (also in pool 1) 20, 1 and 2 20 each; each
	// refused one. Pool 1: 0's 20 and 3, 4, 5 with 10 each: 50 of 60.
	// Pool 2: activity 6 full on its own (40) and refused one; 7 got 5.
	// Pool 3: nothing.
	r := newPoolRun(12)
	for a, n := range map[int]int{0: 20, 1: 20, 2: 20, 3: 10, 4: 10, 5: 10, 6: 40, 7: 5} {
		seat(r, a, n)
	}
	for _, a := range []int{0, 1, 2, 6} {
		require.NoError(t, r.record(a, client.SignupResult{}, full))
	}
	taken := []int{20, 20, 20, 10, 10, 10, 40, 5, 0, 0, 0, 0}
	poolTaken := []int{60, 50, 45, 0}
	activities, pools := poolRushEnd(l, ids, poolIDs, taken, poolTaken)
	require.Equal(t, poolVerdict{fullPools: 1}, r.judge(l, ids, poolIDs, activities, pools), "exact")
	require.EqualValues(t, 4, r.full.Load())
	require.EqualValues(t, 135, r.answers.count(http.StatusCreated))
	require.Zero(t, activities[0].Remaining, "pool 0 is full, pool 1 is not")
	require.Equal(t, 10, activities[3].Remaining, "pool 1 has 10 left")

	// Activity 3 refused someone with pool 1 at 50 of 60 and itself at 10
	// of 40: it fitted.
	require.NoError(t, r.record(3, client.SignupResult{}, full))
	require.Equal(t, poolVerdict{fullPools: 1, refusedFitting: 1}, r.judge(l, ids, poolIDs, activities, pools))

	// Pool 2 oversold: 61 taken (activity 7 with 21), as the answers say.
	r = newPoolRun(12)
	seat(r, 6, 40)
	seat(r, 7, 21)
	taken = []int{0, 0, 0, 0, 0, 0, 40, 21, 0, 0, 0, 0}
	activities, pools = poolRushEnd(l, ids, poolIDs, taken, []int{0, 0, 61, 0})
	require.Equal(t, poolVerdict{overCapacity: 1, fullPools: 1}, r.judge(l, ids, poolIDs, activities, pools))
	// An activity over its own 40.
	seat(r, 8, 41)
	taken[8] = 41
	activities, pools = poolRushEnd(l, ids, poolIDs, taken, []int{0, 0, 102, 0})
	require.Equal(t, poolVerdict{overCapacity: 2, fullPools: 1}, r.judge(l, ids, poolIDs, activities, pools))

	// The authority disagrees with the answers: activity 9 has a seat no
	// 201 gave, and pool 3 has 58 taken for its activities' 3; activity
	// 10 a remaining that ignores its pool's 2; pool 1 lists activities
	// other than the layout's.
	r = newPoolRun(12)
	seat(r, 10, 3)
	taken = []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0}
	activities, pools = poolRushEnd(l, ids, poolIDs, taken, []int{0, 0, 0, 58})
	require.Equal(t, 2, activities[10].Remaining)
	activities[10].Remaining = 37
	pools[1].Activities = []string{"a03", "a04", "a05"}
	require.Equal(t, poolVerdict{inexactActivities: 2, inexactPools: 2}, r.judge(l, ids, poolIDs, activities, pools))

	// Any other answer fails.
	require.Error(t, r.record(0, client.SignupResult{}, &client.Error{Status: http.StatusServiceUnavailable}))
	require.Error(t, r.record(0, client.SignupResult{Waitlisted: true}, nil))
	require.Error(t, r.record(0, client.SignupResult{}, &client.Error{Status: http.StatusConflict, Code: client.CodeAlreadyRegistered}))
	require.EqualValues(t, 1, r.answers.fivexx())
}

// TestPoolRush runs a small pool_rush against an instance in the test
// process: 200 users over 8 pools of 60 seats (24 activities of 40, 2 of
// them in two pools), 600 signups for 480 pool seats, so that pools fill
// long before their activities would and signups are refused for a pool
// that is full. Every answer is 201 or 409, no activity or pool is over
// its capacity, all are exact, and none refused a signup that fitted.
func TestPoolRush(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst := apptest.Start(t, apptest.Options{})
	api, err := NewAPI(inst.URL)
	require.NoError(t, err)
	t.Cleanup(api.Close)
	auth, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	require.NoError(t, err)
	var log bytes.Buffer
	b := &bench{
		cfg:    Config{Sizes: Sizes{PoolPools: 8, PoolUsers: 200}}.withDefaults(),
		report: NewReport("test"), log: &log, auth: auth, api: api, nonce: randomHex(4),
		admin: inst.Token(t, "loadtest-admin", true),
	}
	require.NoError(t, b.poolRush(ctx), log.String())

	res := b.report.Scenarios[ScenarioPoolRush]
	require.EqualValues(t, 600, res.Ops, log.String())
	require.Zero(t, res.Errors, log.String())
	require.Contains(t, res.Note, "200 users over 8 pools instead of 20000 users over 100 pools")
	ch := b.report.Checks
	require.EqualValues(t, 8, ch[CheckPoolPools])
	require.EqualValues(t, 24, ch[CheckPoolActivities])
	require.EqualValues(t, 2, ch[CheckPoolShared])
	require.Zero(t, ch[CheckPoolOverCapacity], log.String())
	require.Zero(t, ch[CheckPoolInexactActivities], log.String())
	require.Zero(t, ch[CheckPoolInexactPools], log.String())
	require.Zero(t, ch[CheckPoolRefusedFitting], log.String())
	require.Zero(t, ch[CheckPool5xx], log.String())
	require.EqualValues(t, 600, ch[CheckPoolAdmitted].(int64)+ch[CheckPoolFull].(int64), "every signup seated or refused")
	require.Positive(t, ch[CheckPoolFull], "more signups than pool seats")
	require.Positive(t, ch[CheckPoolFullPools], "pools filled")
	require.LessOrEqual(t, ch[CheckPoolAdmitted], int64(8*poolSeats))
	t.Log(log.String())
}
