package groupcommit_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

var errPoison = errors.New("poisoned request")

// ledger is a transactional store of running totals per key: a flush adds
// each request to its key's total and answers the new total, all or
// nothing, and fails whole when any request is negative (poisoned data).
type ledger struct {
	mu      sync.Mutex
	totals  map[string]int
	flushes int
}

func (l *ledger) flush(ctx context.Context, batches []*groupcommit.Batch[string, int, int]) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushes++
	next := make(map[string]int)
	for _, b := range batches {
		for _, r := range b.Reqs {
			if r < 0 {
				return errPoison
			}
		}
	}
	for _, b := range batches {
		t := l.totals[b.Key]
		b.Results = make([]int, len(b.Reqs))
		for j, r := range b.Reqs {
			t += r
			b.Results[j] = t
		}
		next[b.Key] = t
	}
	for k, t := range next {
		l.totals[k] = t
	}
	return nil
}

func blamePoison(err error) bool { return errors.Is(err, errPoison) }

// Random flushes of several keys with poisoned requests at random places:
// each poisoned request gets the error, every other one the total it would
// have had if the poisoned ones had never been sent.
func TestIsolateFailsOnlyThePoisonedRequests(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		l := &ledger{totals: map[string]int{}}
		flush := groupcommit.Isolate(l.flush, blamePoison)
		keys := []string{"a", "b", "c", "d"}[:1+rng.IntN(4)]
		var batches []*groupcommit.Batch[string, int, int]
		want := map[string][]int{}
		wantErr := map[string][]bool{}
		poisoned := 0
		for _, k := range keys {
			b := &groupcommit.Batch[string, int, int]{Key: k}
			total := 0
			for range 1 + rng.IntN(40) {
				if rng.IntN(15) == 0 {
					b.Reqs = append(b.Reqs, -1)
					want[k] = append(want[k], 0)
					wantErr[k] = append(wantErr[k], true)
					poisoned++
					continue
				}
				r := 1 + rng.IntN(9)
				total += r
				b.Reqs = append(b.Reqs, r)
				want[k] = append(want[k], total)
				wantErr[k] = append(wantErr[k], false)
			}
			batches = append(batches, b)
		}

		err := flush(context.Background(), batches)
		n := 0
		for _, b := range batches {
			n += len(b.Reqs)
		}
		if n == 1 && poisoned == 1 {
			require.ErrorIs(t, err, errPoison, "round %d: a poisoned request alone fails its flush", round)
			continue
		}
		require.NoError(t, err, "round %d", round)
		for _, b := range batches {
			for j := range b.Reqs {
				// A batch of one poisoned request fails whole; otherwise
				// the poisoned requests fail alone.
				reqErr := b.Err
				if reqErr == nil && b.Errs != nil {
					reqErr = b.Errs[j]
				}
				if wantErr[b.Key][j] {
					require.ErrorIs(t, reqErr, errPoison, "round %d key %s request %d", round, b.Key, j)
					continue
				}
				require.NoError(t, reqErr, "round %d key %s request %d", round, b.Key, j)
				require.Equal(t, want[b.Key][j], b.Results[j], "round %d key %s request %d", round, b.Key, j)
			}
		}
		if poisoned == 0 {
			require.Equal(t, 1, l.flushes, "round %d: a clean batch is flushed once", round)
		}
	}
}

// Through a Group: a poisoned request among many concurrent ones fails
// alone, and an error that is nobody's data still fails the whole batch.
func TestIsolateInAGroup(t *testing.T) {
	t.Parallel()
	l := &ledger{totals: map[string]int{}}
	g := groupcommit.New(groupcommit.Isolate(l.flush, blamePoison), groupcommit.Options{MaxKeys: 4})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, failed int
	for i := range 400 {
		wg.Go(func() {
			req := 1
			if i%50 == 7 {
				req = -1
			}
			_, err := g.Submit(context.Background(), []string{"a", "b", "c", "d"}[i%4], req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				require.ErrorIs(t, err, errPoison)
				require.Equal(t, -1, req, "only a poisoned request may fail")
				failed++
				return
			}
			ok++
		})
	}
	wg.Wait()
	require.NoError(t, g.Close(context.Background()))
	require.Equal(t, 8, failed)
	require.Equal(t, 392, ok)
	require.Equal(t, 392, l.totals["a"]+l.totals["b"]+l.totals["c"]+l.totals["d"])

	down := errors.New("database unreachable")
	calls := 0
	unavailable := groupcommit.Isolate(func(ctx context.Context, batches []*groupcommit.Batch[string, int, int]) error {
		calls++
		return down
	}, blamePoison)
	b := &groupcommit.Batch[string, int, int]{Key: "a", Reqs: []int{1, 2, 3}}
	require.ErrorIs(t, unavailable(context.Background(), []*groupcommit.Batch[string, int, int]{b}), down)
	require.Equal(t, 1, calls, "an error that is nobody's data is not retried")
}

// PerKey flushes fail one key's batch alone: that batch is split too.
func TestIsolateSplitsAKeysFailedBatch(t *testing.T) {
	t.Parallel()
	flush := groupcommit.Isolate(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		out := make([]int, len(reqs))
		for i, r := range reqs {
			if r < 0 {
				return nil, errPoison
			}
			out[i] = r * 10
		}
		return out, nil
	}), blamePoison)
	good := &groupcommit.Batch[string, int, int]{Key: "a", Reqs: []int{1, 2}}
	bad := &groupcommit.Batch[string, int, int]{Key: "b", Reqs: []int{3, -1, 4, 5}}
	require.NoError(t, flush(context.Background(), []*groupcommit.Batch[string, int, int]{good, bad}))
	require.Equal(t, []int{10, 20}, good.Results)
	require.NoError(t, bad.Err)
	require.Equal(t, []int{30, 0, 40, 50}, bad.Results)
	require.Equal(t, []error{nil, errPoison, nil, nil}, bad.Errs)
}

// An error blame does not claim for a key's batch (a refusal shared by all
// its requests) is not split: the batch is flushed once.
func TestIsolateLeavesAnUnblamedBatchErrorWhole(t *testing.T) {
	t.Parallel()
	notFound := errors.New("no such key")
	calls := 0
	flush := groupcommit.Isolate(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		calls++
		return nil, notFound
	}), blamePoison)
	b := &groupcommit.Batch[string, int, int]{Key: "gone", Reqs: []int{1, 2, 3, 4, 5, 6, 7, 8}}
	require.NoError(t, flush(context.Background(), []*groupcommit.Batch[string, int, int]{b}))
	require.ErrorIs(t, b.Err, notFound)
	require.Equal(t, 1, calls)
}
