package groupcommit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

func TestGroupCombinesConcurrentRequestsAndAnswersEach(t *testing.T) {
	t.Parallel()
	var flushes, inFlight, maxInFlight atomic.Int64
	g := groupcommit.New(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		flushes.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = r * 2
		}
		return out, nil
	}, groupcommit.Options{MaxBatch: 50})

	const n = 1000
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := g.Submit(context.Background(), "k", i)
			require.NoError(t, err)
			require.Equal(t, i*2, res)
		})
	}
	wg.Wait()
	require.Less(t, flushes.Load(), int64(n), "concurrent requests must share flushes")
	require.Equal(t, int64(1), maxInFlight.Load(), "one flush per key at a time")
	require.NoError(t, g.Close(context.Background()))
}

func TestGroupFailsWholeBatchAndRefusesAfterClose(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	g := groupcommit.New(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		return nil, boom
	}, groupcommit.Options{})
	_, err := g.Submit(context.Background(), "k", 1)
	require.ErrorIs(t, err, boom)
	require.NoError(t, g.Close(context.Background()))
	_, err = g.Submit(context.Background(), "k", 1)
	require.ErrorIs(t, err, groupcommit.ErrClosed)
}

func TestGroupCloseWaitsForQueuedWork(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var done atomic.Int64
	g := groupcommit.New(func(ctx context.Context, key int, reqs []int) ([]int, error) {
		<-release
		done.Add(int64(len(reqs)))
		return reqs, nil
	}, groupcommit.Options{})
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { _, _ = g.Submit(context.Background(), i%2, i) })
	}
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error)
	go func() { closed <- g.Close(context.Background()) }()
	close(release)
	require.NoError(t, <-closed)
	wg.Wait()
	require.Equal(t, int64(10), done.Load())
}
