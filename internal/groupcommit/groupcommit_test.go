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
	const n, maxBatch = 1000, 50
	// The first flush holds on until every other request has queued
	// behind it: a second flush of the key meanwhile would be two at once.
	firstTaken := make(chan int, 1)
	release := make(chan struct{})
	var flushes, inFlight, maxInFlight atomic.Int64
	g := groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		f := flushes.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if f == 1 {
			firstTaken <- len(reqs)
			<-release
		}
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = r * 2
		}
		return out, nil
	}), groupcommit.Options{MaxBatch: maxBatch})

	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := g.Submit(context.Background(), "k", i)
			require.NoError(t, err)
			require.Equal(t, i*2, res)
		})
	}
	taken := <-firstTaken
	require.Eventually(t, func() bool { return g.Queued("k") == n-taken }, 10*time.Second, time.Millisecond,
		"the other requests queue while the first flush runs")
	close(release)
	wg.Wait()
	queued := n - taken
	require.Equal(t, int64(1+(queued+maxBatch-1)/maxBatch), flushes.Load(),
		"the %d requests queued behind the first flush go in whole batches of %d", queued, maxBatch)
	require.Equal(t, int64(1), maxInFlight.Load(), "one flush per key at a time")
	require.NoError(t, g.Close(context.Background()))
}

func TestGroupFailsWholeBatchAndRefusesAfterClose(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	g := groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		return nil, boom
	}), groupcommit.Options{})
	_, err := g.Submit(context.Background(), "k", 1)
	require.ErrorIs(t, err, boom)
	require.NoError(t, g.Close(context.Background()))
	_, err = g.Submit(context.Background(), "k", 1)
	require.ErrorIs(t, err, groupcommit.ErrClosed)
}

func TestGroupCloseWaitsForQueuedWork(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var taken, done atomic.Int64
	g := groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key int, reqs []int) ([]int, error) {
		taken.Add(int64(len(reqs)))
		<-release
		done.Add(int64(len(reqs)))
		return reqs, nil
	}), groupcommit.Options{})
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { _, _ = g.Submit(context.Background(), i%2, i) })
	}
	// Every request is in, taken by a blocked flush or queued behind it.
	require.Eventually(t, func() bool { return taken.Load()+int64(g.Queued(0)+g.Queued(1)) == 10 },
		10*time.Second, time.Millisecond)
	closed := make(chan error)
	go func() { closed <- g.Close(context.Background()) }()
	close(release)
	require.NoError(t, <-closed)
	wg.Wait()
	require.Equal(t, int64(10), done.Load())
}

// TestFlushesServeManyKeysWithinTheirCaps hammers 200 keys from many
// goroutines through a Group whose flushes serve up to 16 keys, at most 2
// at a time, and checks every cap and every answer: each key is in at most
// one flush at a time, its requests keep their order, and requests for
// different keys share flushes.
func TestFlushesServeManyKeysWithinTheirCaps(t *testing.T) {
	t.Parallel()
	const keys, perKey = 200, 20
	var flushes, inFlight, maxInFlight, maxKeys, maxReqs atomic.Int64
	var mu sync.Mutex
	busy := map[int]bool{}
	last := map[int]int{}
	raise := func(a *atomic.Int64, v int64) {
		for m := a.Load(); v > m && !a.CompareAndSwap(m, v); m = a.Load() {
		}
	}
	g := groupcommit.New(func(ctx context.Context, batches []*groupcommit.Batch[int, int, int]) error {
		flushes.Add(1)
		raise(&maxInFlight, inFlight.Add(1))
		defer inFlight.Add(-1)
		raise(&maxKeys, int64(len(batches)))
		n := 0
		mu.Lock()
		for _, b := range batches {
			require.False(t, busy[b.Key], "key %d in two flushes at once", b.Key)
			busy[b.Key] = true
			n += len(b.Reqs)
			for _, r := range b.Reqs {
				require.Greater(t, r, last[b.Key], "requests of key %d out of order", b.Key)
				last[b.Key] = r
			}
		}
		mu.Unlock()
		raise(&maxReqs, int64(n))
		// Kept: it stands for the flush's own work, not a wait for
		// anything. Keys queue for the next flushes meanwhile, and it
		// proves that no key is in two flushes at once: one would be
		// seen busy here.
		time.Sleep(time.Millisecond)
		mu.Lock()
		for _, b := range batches {
			busy[b.Key] = false
			b.Results = make([]int, len(b.Reqs))
			for i, r := range b.Reqs {
				b.Results[i] = b.Key*1000 + r
			}
		}
		mu.Unlock()
		return nil
	}, groupcommit.Options{MaxBatch: 100, MaxKeys: 16, MaxFlushes: 2})

	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() {
			// One goroutine per key submits in sequence, so that order
			// within a key is defined; keys run concurrently.
			for r := 1; r <= perKey; r++ {
				res, err := g.Submit(context.Background(), k, r)
				require.NoError(t, err)
				require.Equal(t, k*1000+r, res)
			}
		})
	}
	wg.Wait()
	require.NoError(t, g.Close(context.Background()))
	require.LessOrEqual(t, maxInFlight.Load(), int64(2))
	require.LessOrEqual(t, maxKeys.Load(), int64(16))
	require.LessOrEqual(t, maxReqs.Load(), int64(100))
	require.Greater(t, maxKeys.Load(), int64(1), "keys share flushes")
	require.Less(t, flushes.Load(), int64(keys*perKey/4), "far fewer flushes than requests")
}

// TestOneKeysErrorFailsOnlyItsBatch: a flush that fails one key's batch
// answers that key's requests with the error and the others with results.
func TestOneKeysErrorFailsOnlyItsBatch(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	g := groupcommit.New(func(ctx context.Context, batches []*groupcommit.Batch[string, int, int]) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		for _, b := range batches {
			if b.Key == "bad" {
				b.Err = boom
				continue
			}
			b.Results = b.Reqs
		}
		return nil
	}, groupcommit.Options{MaxKeys: 10, MaxFlushes: 1})
	// The first flush blocks, so the next requests queue and share one.
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = g.Submit(context.Background(), "first", 0) })
	<-started
	errs := make(map[string]error)
	var mu sync.Mutex
	for _, k := range []string{"a", "bad", "b"} {
		wg.Go(func() {
			_, err := g.Submit(context.Background(), k, 1)
			mu.Lock()
			errs[k] = err
			mu.Unlock()
		})
	}
	require.Eventually(t, func() bool { return g.Queued("a") == 1 && g.Queued("bad") == 1 && g.Queued("b") == 1 },
		10*time.Second, time.Millisecond, "the three queue behind the blocked flush")
	close(release)
	wg.Wait()
	require.NoError(t, errs["a"])
	require.NoError(t, errs["b"])
	require.ErrorIs(t, errs["bad"], boom)
	require.NoError(t, g.Close(context.Background()))
}

// TestRequestsWithdrawnWhileQueuedAreNeverFlushed blocks the flush of one
// key, queues requests behind it whose contexts end, and checks that they
// are withdrawn (no flush ever sees them, and a key whose every request
// was withdrawn gets no empty flush), while a request already taken by the
// flush waits for its outcome although its context ended.
func TestRequestsWithdrawnWhileQueuedAreNeverFlushed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	var flushed [][]int
	g := groupcommit.New(func(ctx context.Context, batches []*groupcommit.Batch[string, int, int]) error {
		mu.Lock()
		for _, b := range batches {
			flushed = append(flushed, b.Reqs)
			b.Results = b.Reqs
		}
		mu.Unlock()
		<-release
		return nil
	}, groupcommit.Options{MaxKeys: 8, MaxFlushes: 1})

	takenCtx, endTaken := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		res, err := g.Submit(takenCtx, "a", 1)
		if err == nil && res != 1 {
			err = errors.New("wrong result")
		}
		first <- err
	}()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(flushed) == 1 }, 5*time.Second, time.Millisecond)
	endTaken()

	// Behind the blocked flush: "a" 2 (withdrawn), "a" 3 (kept), "b" 4
	// (withdrawn: b's only request).
	short, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var withdrawn atomic.Int64
	for _, r := range []struct {
		key string
		req int
		ctx context.Context
	}{{"a", 2, short}, {"a", 3, context.Background()}, {"b", 4, short}} {
		wg.Go(func() {
			res, err := g.Submit(r.ctx, r.key, r.req)
			if r.ctx == short {
				require.ErrorIs(t, err, groupcommit.ErrWithdrawn)
				require.ErrorIs(t, err, context.Canceled)
				withdrawn.Add(1)
				return
			}
			require.NoError(t, err)
			require.Equal(t, r.req, res)
		})
	}
	require.Eventually(t, func() bool { return g.Queued("a") == 2 && g.Queued("b") == 1 }, 10*time.Second, time.Millisecond,
		"the three queue behind the blocked flush")
	cancel()
	require.Eventually(t, func() bool { return withdrawn.Load() == 2 }, 5*time.Second, time.Millisecond)
	close(release)
	require.NoError(t, <-first, "taken before its context ended: it gets its outcome")
	wg.Wait()
	require.NoError(t, g.Close(context.Background()))
	require.Equal(t, [][]int{{1}, {3}}, flushed, "withdrawn requests never reach a flush, and b gets no empty one")
}
