package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestSeatStateCarriesThePoolsOfTheActivity: an activity's seat state has
// the states of its pools, each pool's taken summed over all its
// activities, and PoolSeatState reads one pool alone the same way.
func TestSeatStateCarriesThePoolsOfTheActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	s := store.New(db)
	acts := createActivities(t, s, 3, 10)
	hall, err := s.CreatePool(ctx, newID("p"), registration.NewPool{Title: "hall", Capacity: 6})
	require.NoError(t, err)
	lab, err := s.CreatePool(ctx, newID("p"), registration.NewPool{Title: "lab", Capacity: 4})
	require.NoError(t, err)
	link := func(activity, pool string) {
		_, err := db.Exec(ctx, `INSERT INTO activity_pool (activity_id, pool_id)
			SELECT a.id, p.id FROM activity a, pool p WHERE a.public_id = $1 AND p.public_id = $2`, activity, pool)
		require.NoError(t, err)
	}
	link(acts[0], hall.ID)
	link(acts[1], hall.ID)
	link(acts[0], lab.ID)
	_, err = db.Exec(ctx, `UPDATE pool SET last_seq = 7 WHERE public_id = $1`, hall.ID)
	require.NoError(t, err)
	for i, users := range [][]string{{"a", "b"}, {"c"}, {"d", "e", "f"}} {
		var cmds []registration.Command
		for _, u := range users {
			cmds = append(cmds, signupOf(u))
		}
		out, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: acts[i], Commands: cmds}}, time.Now())
		require.NoError(t, err)
		require.NoError(t, out[0].Err)
	}

	st, err := s.SeatState(ctx, acts[0])
	require.NoError(t, err)
	require.Equal(t, [3]int{10, 2, 0}, [3]int{st.Capacity, st.Taken, st.Waiting})
	require.Len(t, st.Pools, 2)
	byID := map[string]registration.PoolSeatState{}
	for _, p := range st.Pools {
		byID[p.PoolID] = p
	}
	h := byID[hall.ID]
	require.Equal(t, [2]int{6, 3}, [2]int{h.Capacity, h.Taken}, "the hall's taken counts both its activities, not the third")
	require.Equal(t, int64(9), h.LastSeq, "7, and one for each of the two change transactions of its activities")
	require.ElementsMatch(t, []string{acts[0], acts[1]}, h.Activities)
	require.False(t, h.UpdatedAt.IsZero())
	l := byID[lab.ID]
	require.Equal(t, [2]int{4, 2}, [2]int{l.Capacity, l.Taken})
	require.Equal(t, []string{acts[0]}, l.Activities)
	require.Equal(t, 2, st.Remaining(), "the lab leaves 2")

	st, err = s.SeatState(ctx, acts[2])
	require.NoError(t, err)
	require.Empty(t, st.Pools, "an activity of no pool")
	require.Equal(t, [2]int{3, 7}, [2]int{st.Taken, st.Remaining()})

	p, err := s.PoolSeatState(ctx, hall.ID)
	require.NoError(t, err)
	require.Equal(t, h, p, "one pool alone reads as in the activity's state")

	_, err = s.PoolSeatState(ctx, "p_00000000000000000000000000")
	require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err))
	_, err = s.SeatState(ctx, "a_00000000000000000000000000")
	require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err))
}
