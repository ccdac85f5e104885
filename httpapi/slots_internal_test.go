package httpapi

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestSlotsGiveExactlyTheCapToConcurrentTakers(t *testing.T) {
	t.Parallel()
	s := newSlots(5, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		releases []func()
		start    = make(chan struct{})
	)
	for range 200 {
		wg.Go(func() {
			<-start
			if release, ok := s.acquire("a"); ok {
				mu.Lock()
				releases = append(releases, release)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	require.Len(t, releases, 5)
	_, ok := s.acquire("b")
	require.True(t, ok, "another key has its own slots")

	// Giving a slot back twice gives back one.
	releases[0]()
	releases[0]()
	require.Equal(t, 4, s.holding("a"))
	for _, r := range releases[1:] {
		r()
	}
	require.Equal(t, 0, s.holding("a"))
	require.Equal(t, 1, s.clients(), "a key holding nothing is forgotten")
}

func TestSlotsStayExactWhileTakenAndGivenBackConcurrently(t *testing.T) {
	t.Parallel()
	const max, keys = 3, 4
	s := newSlots(max, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	var inUse [keys]atomic.Int32
	var taken atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 300 {
				k := (g + i) % keys
				release, ok := s.acquire(fmt.Sprint(k))
				if !ok {
					continue
				}
				taken.Add(1)
				if n := inUse[k].Add(1); n > max {
					t.Errorf("key %d holds %d slots, more than %d", k, n, max)
				}
				inUse[k].Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	require.Positive(t, taken.Load())
	require.Equal(t, 0, s.clients(), "every slot given back")
	for k := range keys {
		for range max {
			_, ok := s.acquire(fmt.Sprint(k))
			require.True(t, ok, "key %d can take its whole cap again", k)
		}
		_, ok := s.acquire(fmt.Sprint(k))
		require.False(t, ok)
	}
}
