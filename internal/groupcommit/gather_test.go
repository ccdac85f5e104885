package groupcommit_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// crowdBatches runs clients that each submit rounds requests to one key,
// one after the other, and returns the sizes of the batches flushed.
func crowdBatches(t *testing.T, clients, rounds int, opts groupcommit.Options) []int {
	t.Helper()
	var mu sync.Mutex
	var sizes []int
	g := groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		// Kept: it stands for the flush's own work (a transaction's
		// time), not a wait for anything. The crowd's next requests
		// arrive while it runs, which is what gathering is tested on.
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		return reqs, nil
	}), opts)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for r := range rounds {
				v, err := g.Submit(context.Background(), "k", c*rounds+r)
				require.NoError(t, err)
				require.Equal(t, c*rounds+r, v)
			}
		})
	}
	wg.Wait()
	require.NoError(t, g.Close(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	return sizes
}

func TestACrowdGathersIntoWholeBatches(t *testing.T) {
	t.Parallel()
	const clients, rounds = 64, 30

	// Without gathering, the requests in a flush are not queued for the
	// next one, so consecutive batches share the clients.
	plain := crowdBatches(t, clients, rounds, groupcommit.Options{})

	// Gathering waits for the clients just answered: after the first
	// batches, every batch is the whole crowd. (The deadline ends the
	// gathers at the end, when the clients that are done do not come
	// back.)
	gathered := crowdBatches(t, clients, rounds, groupcommit.Options{GatherAt: 8, GatherFor: 200 * time.Millisecond})
	whole := 0
	for _, n := range gathered {
		if n == clients {
			whole++
		}
	}
	require.GreaterOrEqual(t, whole, rounds-3, "batches %v", gathered)
	require.Less(t, len(gathered), len(plain), "gathering makes fewer flushes: %d, against %d", len(gathered), len(plain))
}

// gatherer is a Group of GatherAt 2 whose flushes record their batches
// and take 5ms each.
type gatherer struct {
	g       *groupcommit.Group[string, int, int]
	mu      sync.Mutex
	batches [][]int
	// filled and expired count the gathers that ended filled and at
	// their deadline.
	filled, expired int
}

func newGatherer(gatherFor time.Duration) *gatherer {
	r := &gatherer{}
	r.g = groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		// Kept: it stands for the flush's own work (a transaction's
		// time), not a wait for anything. Requests sent meanwhile queue
		// for the next flush, which the gathers are tested on.
		time.Sleep(5 * time.Millisecond)
		r.mu.Lock()
		r.batches = append(r.batches, slices.Clone(reqs))
		r.mu.Unlock()
		return reqs, nil
	}), groupcommit.Options{GatherAt: 2, GatherFor: gatherFor, GatherEnded: func(ended string) {
		// Called with the group's lock held, never with r.mu.
		r.mu.Lock()
		defer r.mu.Unlock()
		if ended == groupcommit.GatherFilled {
			r.filled++
		} else {
			r.expired++
		}
	}})
	return r
}

// submitAll submits vs concurrently and waits for their answers.
func (r *gatherer) submitAll(t *testing.T, vs ...int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, v := range vs {
		wg.Go(func() {
			got, err := r.g.Submit(context.Background(), "k", v)
			require.NoError(t, err)
			require.Equal(t, v, got)
		})
	}
	wg.Wait()
}

// startGather makes the group's key gather: a flush of two requests, queued
// while a flush of one runs. It returns once the gather has begun (just
// after the two are answered), so that requests submitted next queue
// behind it.
func (r *gatherer) startGather(t *testing.T) {
	t.Helper()
	for {
		r.submitAll(t, 0, 1, 2)
		if len(r.lastBatch()) == 2 {
			break
		}
	}
	require.Eventually(t, func() bool { return r.g.Gathering("k") }, 5*time.Second, 100*time.Microsecond)
}

func (r *gatherer) lastBatch() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches[len(r.batches)-1]
}

// ends returns how many gathers ended filled and at their deadline.
func (r *gatherer) ends() [2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return [2]int{r.filled, r.expired}
}

func TestAGatherEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	const gatherFor = 300 * time.Millisecond
	r := newGatherer(gatherFor)
	// The gather begins after start, however slow the machine: its
	// deadline is at least gatherFor after start.
	start := time.Now()
	r.startGather(t)
	r.submitAll(t, 3)
	require.GreaterOrEqual(t, time.Since(start), gatherFor, "a lone request waits for the gather's deadline")
	require.Equal(t, []int{3}, r.lastBatch())
	require.NoError(t, r.g.Close(context.Background()))
	require.Equal(t, [2]int{0, 1}, r.ends(), "one gather ended at its deadline")
}

func TestAGatherEndsWhenAsManyHaveQueued(t *testing.T) {
	t.Parallel()
	r := newGatherer(time.Hour)
	r.startGather(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.submitAll(t, 3, 4)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("two requests after a batch of two were not flushed before the gather's deadline")
	}
	got := r.lastBatch()
	slices.Sort(got)
	require.Equal(t, []int{3, 4}, got)
	require.NoError(t, r.g.Close(context.Background()))
	require.Equal(t, [2]int{1, 0}, r.ends(), "one gather ended filled, none at a deadline")
}

func TestCloseFlushesAGatheringKeyAtOnce(t *testing.T) {
	t.Parallel()
	r := newGatherer(time.Hour)
	r.startGather(t)
	answered := make(chan error, 1)
	go func() {
		_, err := r.g.Submit(context.Background(), "k", 3)
		answered <- err
	}()
	require.Eventually(t, func() bool { return r.g.Queued("k") == 1 }, 10*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.g.Close(ctx))
	require.NoError(t, <-answered)
	require.Equal(t, []int{3}, r.lastBatch())
	require.Equal(t, [2]int{0, 0}, r.ends(), "a gather Close ends is neither")
}

func TestARequestWithdrawnWhileItsKeyGathersIsNeverFlushed(t *testing.T) {
	t.Parallel()
	r := newGatherer(time.Hour)
	r.startGather(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := r.g.Submit(ctx, "k", 3)
	require.ErrorIs(t, err, groupcommit.ErrWithdrawn)
	require.NoError(t, r.g.Close(context.Background()))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		require.NotContains(t, b, 3, "the withdrawn request was never flushed")
	}
}

// TestAKeyWithAFullBatchQueuedDoesNotGather: a gather waits for at most
// MaxBatch requests, so a key that has a whole batch queued when its flush
// ends is flushed at once instead of waiting for a request that may never
// come.
func TestAKeyWithAFullBatchQueuedDoesNotGather(t *testing.T) {
	t.Parallel()
	// Each flush reports its batch on started, and the first two wait for
	// their gate.
	started := make(chan []int, 3)
	gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var calls atomic.Int32
	g := groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		i := int(calls.Add(1)) - 1
		started <- slices.Sorted(slices.Values(reqs))
		if i < len(gates) {
			<-gates[i]
		}
		return reqs, nil
	}), groupcommit.Options{MaxBatch: 2, GatherAt: 2, GatherFor: time.Hour})
	submit := func(v int) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := g.Submit(context.Background(), "k", v)
			done <- err
		}()
		return done
	}
	queued := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return g.Queued("k") == n }, 10*time.Second, time.Millisecond)
	}
	first := submit(1)
	require.Equal(t, []int{1}, <-started)
	second := []chan error{submit(2), submit(3)}
	queued(2)
	close(gates[0])
	require.NoError(t, <-first)
	// 2 and 3 flush as a whole batch (the cap); 4 and 5 queue meanwhile,
	// a whole batch when that flush ends.
	require.Equal(t, []int{2, 3}, <-started)
	third := []chan error{submit(4), submit(5)}
	queued(2)
	close(gates[1])
	for _, done := range append(second, third...) {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("a whole batch waited for a gather's deadline")
		}
	}
	require.Equal(t, []int{4, 5}, <-started)
	require.NoError(t, g.Close(context.Background()))
}
