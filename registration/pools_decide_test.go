package registration_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

// poolWorld is a few activities in overlapping pools, with every
// registration, decided by DecideAll as the store's change transactions
// would: each batch sees the activities and pools the store locks for it.
type poolWorld struct {
	t      *testing.T
	acts   map[string]*world
	pools  map[string]registration.Pool
	seqs   map[string]int64
	joined int64
}

func newPoolWorld(t *testing.T, rng *rand.Rand) *poolWorld {
	pw := &poolWorld{t: t, acts: map[string]*world{}, pools: map[string]registration.Pool{}, seqs: map[string]int64{}}
	for _, id := range []string{"p_1", "p_2"} {
		pw.pools[id] = registration.Pool{ID: id, Title: id, Capacity: 3 + rng.IntN(6)}
	}
	for i, ps := range [][]string{{"p_1"}, {"p_1", "p_2"}, {"p_2"}, {}} {
		policy := registration.PolicyStrict
		if rng.IntN(2) == 1 {
			policy = registration.PolicyFill
		}
		w := newWorld(t, 2+rng.IntN(6), policy)
		w.act.ID, w.act.Pools = fmt.Sprintf("a_%d", i), ps
		pw.acts[w.act.ID] = w
		for _, p := range ps {
			pool := pw.pools[p]
			pool.Activities = append(pool.Activities, w.act.ID)
			pw.pools[p] = pool
		}
	}
	return pw
}

// change is what a store reads for batches: the activities of the
// batches, and where a batch may free seats (or a pool's own commands)
// every activity of the pools concerned, with all their pools; each
// activity's state whole (every registration, the whole line).
func (pw *poolWorld) change(batches map[string][]registration.Command) registration.Change {
	acts := map[string]bool{}
	pools := map[string]bool{}
	spread := func(p string) {
		for _, a := range pw.pools[p].Activities {
			acts[a] = true
			for _, q := range pw.acts[a].act.Pools {
				pools[q] = true
			}
		}
	}
	for id, cmds := range batches {
		if registration.IsPoolID(id) {
			pools[id] = true
			spread(id)
			continue
		}
		acts[id] = true
		for _, p := range pw.acts[id].act.Pools {
			pools[p] = true
			if slices.ContainsFunc(cmds, registration.Promotes) {
				spread(p)
			}
		}
	}
	var c registration.Change
	c.At, c.JoinBase = at, pw.joined
	for _, id := range slices.Sorted(maps.Keys(acts)) {
		st := pw.acts[id].state()
		st.Activity.Pools = slices.Clone(st.Activity.Pools)
		c.Activities = append(c.Activities, st)
		c.Commands = append(c.Commands, batches[id])
	}
	for _, id := range slices.Sorted(maps.Keys(pools)) {
		p := pw.pools[id]
		p.Taken = 0
		for _, a := range p.Activities {
			p.Taken += pw.acts[a].state().Activity.Taken
		}
		p.Activities = slices.Clone(p.Activities)
		c.Pools = append(c.Pools, registration.PoolState{Pool: p, LastSeq: pw.seqs[id]})
		c.PoolCommands = append(c.PoolCommands, batches[id])
	}
	return c
}

// do decides the batches and keeps the result.
func (pw *poolWorld) do(c registration.Change) ([]registration.Plan, []registration.PoolPlan) {
	pw.t.Helper()
	plans, pools, err := registration.DecideAll(c, now)
	require.NoError(pw.t, err)
	pw.joined++
	for _, p := range plans {
		w := pw.acts[p.Activity.ID]
		for _, r := range append(p.Inserts, p.Updates...) {
			w.regs[r.ID] = r
		}
		w.act, w.seq = p.Activity, p.LastSeq
	}
	for _, p := range pools {
		pool := p.Pool
		pw.pools[pool.ID], pw.seqs[pool.ID] = pool, p.LastSeq
	}
	return plans, pools
}

// check asserts that no activity or pool holds more than its capacity
// (capacities only grow here) and that, quiet, no waiting registration
// fits all its limits by its activity's policy.
func (pw *poolWorld) check(where string) {
	pw.t.Helper()
	free := map[string]int{}
	for id, p := range pw.pools {
		taken := 0
		for _, a := range p.Activities {
			taken += pw.acts[a].state().Activity.Taken
		}
		require.Equal(pw.t, taken, p.Taken, "%s: %s's taken", where, id)
		require.LessOrEqual(pw.t, taken, p.Capacity, "%s: %s oversold", where, id)
		free[id] = p.Capacity - taken
	}
	for _, w := range pw.acts {
		st := w.state()
		own := st.Activity.Capacity - st.Activity.Taken
		require.GreaterOrEqual(pw.t, own, 0, "%s: %s oversold", where, w.act.ID)
		for k, r := range st.Line {
			if w.act.Policy == registration.PolicyStrict && k > 0 {
				break
			}
			fits := r.Seats <= own
			for _, p := range w.act.Pools {
				fits = fits && r.Seats <= free[p]
			}
			require.False(pw.t, fits, "%s: %s waits on %s for %d seats that fit (%s)", where, r.ID, w.act.ID, r.Seats, w.act.Policy)
		}
	}
}

// TestDecideAllAcrossPoolsNeedsOnlyWhatTheStoreReads decides random
// histories over four activities in two overlapping pools (and one in
// none) — parties, cancellations, seat reductions, activity and pool
// capacity raises, several activities per transaction — once on the
// whole lines and once on the parts LineNeeds says the store reads, and
// requires the same events and counts; after each transaction, no pool
// or activity is oversold, and no waiting registration fits every limit.
func TestDecideAllAcrossPoolsNeedsOnlyWhatTheStoreReads(t *testing.T) {
	t.Parallel()
	for run := range 500 {
		rng := rand.New(rand.NewPCG(uint64(run), 11))
		pw := newPoolWorld(t, rng)
		ids := slices.Sorted(maps.Keys(pw.acts))
		users := 0
		for step := range 15 {
			batches := map[string][]registration.Command{}
			for range 1 + rng.IntN(4) {
				aid := ids[rng.IntN(len(ids))]
				w := pw.acts[aid]
				regs := slices.Sorted(maps.Keys(w.regs))
				switch k := rng.IntN(12); {
				case k < 6 || len(regs) == 0:
					users++
					batches[aid] = append(batches[aid], groupSignup(fmt.Sprintf("r%04d", users), fmt.Sprintf("u%04d", users), 1+rng.IntN(3)))
				case k < 8:
					id := regs[rng.IntN(len(regs))]
					batches[aid] = append(batches[aid], cancelCmd(id, w.regs[id].UserID))
				case k < 10:
					id := regs[rng.IntN(len(regs))]
					batches[aid] = append(batches[aid], seatsCmd(id, w.regs[id].UserID, 1+rng.IntN(max(w.regs[id].Seats, 1))))
				case k < 11:
					if slices.ContainsFunc(batches[aid], isActivityCommand) {
						continue // one raise per batch: capacities only grow
					}
					c := w.act.Capacity + rng.IntN(3)
					batches[aid] = append(batches[aid], registration.ActivityCommand{Patch: registration.ActivityPatch{Capacity: &c}})
				default:
					p := []string{"p_1", "p_2"}[rng.IntN(2)]
					if len(batches[p]) > 0 {
						continue
					}
					c := pw.pools[p].Capacity + rng.IntN(3)
					batches[p] = append(batches[p], registration.PoolCommand{PoolID: p, Patch: registration.PoolPatch{Capacity: &c}})
				}
			}
			full := pw.change(batches)
			partial := full
			partial.Activities = slices.Clone(full.Activities)
			needs := registration.LineNeeds(full)
			for i := range partial.Activities {
				partial.Activities[i].Line = readAsTheStore(full.Activities[i].Line, needs[i])
			}
			wantPlans, wantPools, err := registration.DecideAll(full, now)
			require.NoError(t, err)
			gotPlans, gotPools, err := registration.DecideAll(partial, now)
			require.NoError(t, err, "run %d step %d: %+v", run, step, needs)
			for i := range wantPlans {
				require.Equal(t, summary(wantPlans[i].Events), summary(gotPlans[i].Events), "run %d step %d: %s", run, step,
					wantPlans[i].Activity.ID)
				require.Equal(t, wantPlans[i].Activity, gotPlans[i].Activity)
			}
			require.Equal(t, wantPools, gotPools)
			pw.do(full)
			pw.check(fmt.Sprintf("run %d step %d", run, step))
		}
	}
}

// TestDecideAllPromotesTheOldestJoinedAcrossActivities: in a pool of 2
// held by A, B1 waits on B, then A1 on A, then B2 on B (each in its own
// transaction). Each release in A goes to the oldest that fits, on
// whichever activity.
func TestDecideAllPromotesTheOldestJoinedAcrossActivities(t *testing.T) {
	t.Parallel()
	pw := &poolWorld{t: t, acts: map[string]*world{}, seqs: map[string]int64{},
		pools: map[string]registration.Pool{"p_1": {ID: "p_1", Capacity: 2, Activities: []string{"a_A", "a_B"}}}}
	for _, id := range []string{"a_A", "a_B"} {
		w := newWorld(t, 10, registration.PolicyStrict)
		w.act.ID, w.act.Pools = id, []string{"p_1"}
		pw.acts[id] = w
	}
	one := func(aid string, c registration.Command) {
		pw.do(pw.change(map[string][]registration.Command{aid: {c}}))
	}
	one("a_A", signupCmd("h0", "h0"))
	one("a_A", signupCmd("h1", "h1"))
	one("a_B", signupCmd("b1", "b1"))
	one("a_A", signupCmd("a1", "a1"))
	one("a_B", signupCmd("b2", "b2"))
	statuses := func() []registration.Status {
		return []registration.Status{pw.acts["a_B"].regs["b1"].Status, pw.acts["a_A"].regs["a1"].Status, pw.acts["a_B"].regs["b2"].Status}
	}
	require.Equal(t, []registration.Status{registration.Waitlisted, registration.Waitlisted, registration.Waitlisted}, statuses())
	one("a_A", cancelCmd("h0", "h0"))
	require.Equal(t, []registration.Status{registration.Pending, registration.Waitlisted, registration.Waitlisted}, statuses())
	one("a_A", cancelCmd("h1", "h1"))
	require.Equal(t, []registration.Status{registration.Pending, registration.Pending, registration.Waitlisted}, statuses())
	three := 3
	one("p_1", registration.PoolCommand{PoolID: "p_1", Patch: registration.PoolPatch{Capacity: &three}})
	require.Equal(t, []registration.Status{registration.Pending, registration.Pending, registration.Pending}, statuses())
	pw.check("end")
}

func isActivityCommand(c registration.Command) bool {
	_, ok := c.(registration.ActivityCommand)
	return ok
}
