package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
)

// gateCase is a display counter's fields.
type gateCase struct {
	capacity, taken, held, reserved, waiting int
	waitlist                                 bool
	fill                                     bool
	seats                                    int
}

func (c gateCase) String() string {
	return fmt.Sprintf("capacity %d, taken %d, held %d, reserved %d, waiting %d, waitlist %t, fill %t, seats %d",
		c.capacity, c.taken, c.held, c.reserved, c.waiting, c.waitlist, c.fill, c.seats)
}

// counts returns the case's counts as the gate sees them: taken + held
// as taken.
func (c gateCase) counts() registration.Counts {
	policy := registration.PolicyStrict
	if c.fill {
		policy = registration.PolicyFill
	}
	own := registration.Room{Capacity: c.capacity, Taken: c.taken + c.held, Reserved: c.reserved}
	return registration.NewCounts(own, c.waiting, c.waitlist, policy, []registration.Room(nil)).For(c.seats)
}

// gateCases are the named cases (free seats 0, 1, several; taken + held
// over capacity; someone waiting or not; capacity 0), each with the
// waiting list on and off, and then every small combination.
func gateCases() []gateCase {
	var out []gateCase
	for _, on := range []bool{false, true} {
		out = append(out,
			gateCase{capacity: 5, taken: 2, waitlist: on},             // several free
			gateCase{capacity: 5, taken: 2, held: 2, waitlist: on},    // one free, counting holds
			gateCase{capacity: 5, taken: 4, waitlist: on},             // one free
			gateCase{capacity: 5, taken: 3, held: 2, waitlist: on},    // none free: holds fill it
			gateCase{capacity: 5, taken: 5, waitlist: on},             // none free
			gateCase{capacity: 5, taken: 4, held: 3, waitlist: on},    // taken + held over capacity
			gateCase{capacity: 5, taken: 7, waitlist: on},             // taken over capacity (lowered)
			gateCase{capacity: 5, taken: 2, waiting: 1, waitlist: on}, // free, but someone waits
			gateCase{capacity: 5, taken: 5, waiting: 3, waitlist: on}, // full, and a line
			gateCase{capacity: 0, waitlist: on},                       // capacity 0
			gateCase{capacity: 0, waiting: 1, waitlist: on},
			gateCase{capacity: 5, taken: 2, reserved: 2, waitlist: on},           // one free besides a block
			gateCase{capacity: 5, taken: 2, reserved: 3, waitlist: on},           // none free: a block holds the rest
			gateCase{capacity: 5, taken: 1, held: 1, reserved: 3, waitlist: on},  // none free: holds and a block
			gateCase{capacity: 5, taken: 3, reserved: 4, waitlist: on},           // a block over a lowered capacity
			gateCase{capacity: 3, seats: 4, waitlist: on},                        // more than it can ever hold
			gateCase{capacity: 3, taken: 3, waiting: 2, seats: 4, waitlist: on},  // the same, behind a line
			gateCase{capacity: 3, reserved: 1, seats: 3, waitlist: on, fill: on}, // all it holds, one reserved
		)
	}
	for capacity := range 3 {
		for taken := range 4 {
			for held := range 3 {
				for waiting := range 3 {
					for _, on := range []bool{false, true} {
						out = append(out, gateCase{capacity: capacity, taken: taken, held: held, waiting: waiting, waitlist: on})
					}
				}
			}
		}
	}
	// Parties: several seats asked for, under both policies, with and
	// without seats reserved for blocks (some of them more seats than
	// the capacity can ever hold).
	for capacity := range 6 {
		for taken := range 4 {
			for waiting := range 2 {
				for seats := 1; seats <= 4; seats++ {
					for reserved := range 3 {
						for _, fill := range []bool{false, true} {
							for _, on := range []bool{false, true} {
								out = append(out, gateCase{capacity: capacity, taken: taken, held: 1, reserved: reserved,
									waiting: waiting, waitlist: on, fill: fill, seats: seats})
							}
						}
					}
				}
			}
		}
	}
	return out
}

// TestTheGateAdmitsAsTheRule: the reserve script's Lua form of the
// admission rule gives, on a counter's fields, the answer that
// registration.Admit gives on the same counts (taken + held as Taken).
func TestTheGateAdmitsAsTheRule(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	counter := capacity.New(capacity.Config{Redis: rdb, TTL: time.Minute})
	ctx := context.Background()
	base := fmt.Sprintf("a_admit_%d", time.Now().UnixNano()+seq.Add(1))
	for i, c := range gateCases() {
		id := fmt.Sprintf("%s_%d", base, i)
		key := capacity.Key(id)
		flag := func(b bool) string {
			if b {
				return "1"
			}
			return "0"
		}
		require.NoError(t, rdb.HSet(ctx, key, "taken", c.taken, "held", c.held, "capacity", c.capacity,
			"waiting", c.waiting, "waitlist", flag(c.waitlist), "fill", flag(c.fill), "seq", 1, "version", 1, "gen", "g1",
			"pools", "", "reserved", c.reserved).Err())
		require.NoError(t, rdb.PExpire(ctx, key, time.Minute).Err())
		t.Cleanup(func() { rdb.Del(context.Background(), key) })

		want := registration.Admit(c.counts())
		hold, err := counter.Reserve(ctx, id, c.seats)
		var got registration.Admission
		switch {
		case err == nil:
			got = registration.AdmitSeat
			require.True(t, hold.Held(), c.String())
		case errors.Is(err, registration.ErrGateWaitlist):
			got = registration.AdmitWaitlist
		case errors.Is(err, registration.ErrGateFull):
			got = registration.AdmitFull
		default:
			t.Fatalf("%v: the gate answered %v", c, err)
		}
		require.Equal(t, want, got, "%v: registration.Admit says %v, the gate %v", c, want, got)
		held := c.held
		if got == registration.AdmitSeat {
			held += max(c.seats, 1)
		}
		require.Equal(t, fmt.Sprint(held), bundle{rdb: rdb}.fields(t, id)["held"], "%v: a hold only for a seat", c)
	}
}

// poolCase is the counters of an activity's pools.
type poolCase []struct{ capacity, taken, held, reserved int }

// poolCases are pool sets of an activity: one pool with room for several,
// one, none, overfull (taken + held over capacity), room taken by blocks'
// reserved seats, a pool too small ever to hold a party of 3 or 4, and
// two pools, the second with less room than the first.
func poolCases() []poolCase {
	return []poolCase{
		{{capacity: 10, taken: 2}},
		{{capacity: 3, taken: 1, held: 1}},
		{{capacity: 2, taken: 1, held: 1}},
		{{capacity: 2, taken: 2, held: 1}},
		{{capacity: 5, taken: 1}, {capacity: 4, taken: 1, held: 1}},
		{{capacity: 20}, {capacity: 2, held: 2}},
		{{capacity: 10, taken: 2, reserved: 6}},
		{{capacity: 6, taken: 1, reserved: 3}, {capacity: 9, reserved: 7}},
		{{capacity: 4, reserved: 5}},
		{{capacity: 2}},
		{{capacity: 30, taken: 1}, {capacity: 3, reserved: 1}},
	}
}

// TestTheGateAdmitsAsTheRuleInPools: for a pooled activity the gate
// answers as registration.Admit on the counts with Pooled and Shared (the
// fewest seats left in a pool, taken + held counted as taken), and holds
// the seats in the activity and every pool only when it gives a seat: a
// refusal by a pool gives back what was held. Both of the gate's ways
// are checked: the activity's script then one script per pool (an
// activity whose pools this process does not know yet, and the only way
// on a Redis Cluster), and one script for all (pools known).
func TestTheGateAdmitsAsTheRuleInPools(t *testing.T) {
	t.Parallel()
	for name, known := range map[string]bool{"pools learnt by the signup": false, "pools known up front": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gateAdmitsAsTheRuleInPools(t, known)
		})
	}
}

func gateAdmitsAsTheRuleInPools(t *testing.T, known bool) {
	rdb := testenv.Redis(t)
	counter := capacity.New(capacity.Config{Redis: rdb, TTL: time.Minute})
	ctx := context.Background()
	base := fmt.Sprintf("a_admitpool_%d", time.Now().UnixNano()+seq.Add(1))
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	cases := gateCases()
	n := 0
	for i, c := range cases {
		for j, pc := range poolCases() {
			if (i+j)%2 == 1 { // every pool set, on half the cases each
				continue
			}
			n++
			id := fmt.Sprintf("%s_%d_%d", base, i, j)
			var pools []string
			shared := 1 << 30
			for k, p := range pc {
				pid := fmt.Sprintf("p_%s_%d", id, k)
				pools = append(pools, pid)
				shared = min(shared, p.capacity-p.taken-p.held-p.reserved)
				require.NoError(t, rdb.HSet(ctx, capacity.PoolKey(pid), "taken", p.taken, "held", p.held,
					"capacity", p.capacity, "seq", 1, "version", 1, "gen", "pg"+fmt.Sprint(k), "activities", id,
					"reserved", p.reserved).Err())
				require.NoError(t, rdb.PExpire(ctx, capacity.PoolKey(pid), time.Minute).Err())
			}
			require.NoError(t, rdb.HSet(ctx, capacity.Key(id), "taken", c.taken, "held", c.held, "capacity", c.capacity,
				"waiting", c.waiting, "waitlist", flag(c.waitlist), "fill", flag(c.fill), "seq", 1, "version", 1, "gen", "g1",
				"pools", strings.Join(pools, ","), "reserved", c.reserved).Err())
			require.NoError(t, rdb.PExpire(ctx, capacity.Key(id), time.Minute).Err())
			if known {
				capacity.LearnPools(counter, id, strings.Join(pools, ","))
			}

			counts := c.counts()
			for k, p := range pc {
				counts = counts.Within(registration.Room{Pool: pools[k], Capacity: p.capacity, Taken: p.taken + p.held,
					Reserved: p.reserved})
			}
			require.Equal(t, shared, counts.Shared)
			want := registration.Admit(counts)
			what := fmt.Sprintf("%v; pools %+v", c, pc)
			hold, err := counter.Reserve(ctx, id, c.seats)
			var got registration.Admission
			switch {
			case err == nil:
				got = registration.AdmitSeat
				require.True(t, hold.Held(), what)
				require.Len(t, hold.Pools, len(pc), what)
				for k, ph := range hold.Pools {
					require.Equal(t, registration.PoolHold{PoolID: pools[k], Gen: hold.Gen, Seats: max(c.seats, 1)}, ph, what)
				}
			case errors.Is(err, registration.ErrGateWaitlist):
				got = registration.AdmitWaitlist
			case errors.Is(err, registration.ErrGateFull):
				got = registration.AdmitFull
			default:
				t.Fatalf("%s: the gate answered %v", what, err)
			}
			require.Equal(t, want, got, "%s: registration.Admit says %v, the gate %v", what, want, got)
			taken := 0
			if got == registration.AdmitSeat {
				taken = max(c.seats, 1)
			}
			require.Equal(t, fmt.Sprint(c.held+taken), bundle{rdb: rdb}.fields(t, id)["held"], "%s: a hold only for a seat", what)
			for k, p := range pc {
				held, err := rdb.HGet(ctx, capacity.PoolKey(pools[k]), "held").Result()
				require.NoError(t, err)
				require.Equal(t, fmt.Sprint(p.held+taken), held, "%s: pool %d holds only for a seat", what, k)
			}
			keys := []string{capacity.Key(id)}
			for _, pid := range pools {
				keys = append(keys, capacity.PoolKey(pid))
			}
			require.NoError(t, rdb.Del(ctx, keys...).Err())
		}
	}
	t.Logf("%d pooled cases", n)
}
