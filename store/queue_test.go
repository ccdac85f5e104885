package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// reverse is a shuffle that reverses: the test knows the order it gives.
func reverse(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = n - 1 - i
	}
	return out
}

// TestAdvanceQueueShufflesOnceAndAdmitsInOrderFromTwoStores: places
// taken before the opening are ordered by the shuffle once, even with two
// stores advancing at once; places taken later line up behind; admission
// follows positions within the cap, and no place is admitted twice.
func TestAdvanceQueueShufflesOnceAndAdmitsInOrderFromTwoStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	pool := testenv.Pool(t, url, 8)
	stores := []*store.Store{store.New(pool), store.New(testenv.Pool(t, url, 8))}
	opens := time.Now().Add(time.Hour)
	a, err := stores[0].CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "on sale", Capacity: 100, HoldSeconds: 900,
		OpensAt: &opens, Queue: &registration.QueueSettings{AdmitPerSecond: 100_000, MaxAdmitted: 7, TokenSeconds: 60, AbsentSeconds: 60}})
	require.NoError(t, err)
	for i := range 10 {
		p, err := stores[i%2].JoinQueue(ctx, a.ID, fmt.Sprint("early-", i))
		require.NoError(t, err)
		require.Nil(t, p.Position)
	}
	adv, err := stores[0].AdvanceQueue(ctx, a.ID, reverse)
	require.NoError(t, err)
	require.True(t, adv.Locked)
	require.False(t, adv.Line.Shuffled, "not before the opening")
	require.Zero(t, adv.Admitted)

	_, err = pool.Exec(ctx, `UPDATE activity SET opens_at = now() WHERE public_id = $1`, a.ID)
	require.NoError(t, err)
	var wg sync.WaitGroup
	advs := make([]onsale.Advance, 8)
	for i := range advs {
		wg.Go(func() {
			var err error
			advs[i], err = stores[i%2].AdvanceQueue(ctx, a.ID, reverse)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	admitted := 0
	for _, adv := range advs {
		admitted += adv.Admitted
	}
	require.Equal(t, 7, admitted, "the cap, once, whoever advanced")
	for i := range 10 {
		p, ok, err := stores[1].QueuePlace(ctx, a.ID, fmt.Sprint("early-", i))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(10-i), *p.Position, "the shuffle's order (reversed join order)")
		if *p.Position <= 7 {
			require.Equal(t, onsale.Admitted, p.State)
			require.NotNil(t, p.Token)
		} else {
			require.Equal(t, onsale.Waiting, p.State)
		}
	}
	late, err := stores[1].JoinQueue(ctx, a.ID, "late")
	require.NoError(t, err)
	require.Equal(t, int64(11), *late.Position, "behind the shuffled places")

	var tokens []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(token) FROM queue_ticket WHERE token IS NOT NULL`).Scan(&tokens))
	require.Len(t, tokens, 7)
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(tokens))), 7, "every token its own")
}
