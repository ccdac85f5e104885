package groupcommit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

func TestAKeyRestsAfterItsFlushWithItsRequestsAnswered(t *testing.T) {
	t.Parallel()
	const rest = 200 * time.Millisecond
	var mu sync.Mutex
	var began, ended []time.Time
	var tooks []time.Duration
	g := groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		mu.Lock()
		defer mu.Unlock()
		began = append(began, time.Now())
		ended = append(ended, time.Now())
		return reqs, nil
	}), groupcommit.Options{Rest: func(took time.Duration) time.Duration {
		mu.Lock()
		tooks = append(tooks, took)
		mu.Unlock()
		return rest
	}})

	v, err := g.Submit(context.Background(), "k", 1)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	answered := time.Now()
	// Queued while the key rests: its flush waits for the rest's end.
	v, err = g.Submit(context.Background(), "k", 2)
	require.NoError(t, err)
	require.Equal(t, 2, v)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, began, 2)
	require.True(t, answered.Before(began[1]), "the first request is answered before the key's rest ends")
	require.GreaterOrEqual(t, began[1].Sub(ended[0]), rest, "the next flush waits for the rest")
	require.GreaterOrEqual(t, tooks[0], ended[0].Sub(began[0]), "Rest is told the flush's time")
	require.NoError(t, g.Close(context.Background()))
}

func TestCloseEndsARest(t *testing.T) {
	t.Parallel()
	g := groupcommit.New(groupcommit.PerKey(func(ctx context.Context, key string, reqs []int) ([]int, error) {
		return reqs, nil
	}), groupcommit.Options{Rest: func(time.Duration) time.Duration { return time.Hour }})
	_, err := g.Submit(context.Background(), "k", 1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.Close(ctx), "Close does not wait out an hour's rest")
}
