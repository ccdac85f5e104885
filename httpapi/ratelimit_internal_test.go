package httpapi

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]RateLimit{
		"0": {}, "0:5": {}, "10": {10, 20}, "10:3": {10, 3}, "0.5": {0.5, 1}, " 2:10 ": {2, 10},
	} {
		got, err := ParseRateLimit(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "x", "-1", "1:0", "1:-2", "1:x", "NaN", "Inf", "1e7", "1:2:3"} {
		_, err := ParseRateLimit(in)
		require.Error(t, err, in)
	}
	require.Equal(t, "2:10", RateLimit{2, 10}.String())
	require.Equal(t, "0", RateLimit{}.String())
}

func TestLimiterRefusesPastBurstAndRefills(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	l := newLimiter(RateLimit{PerSecond: 2, Burst: 3}, clock.now, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	for range 3 {
		ok, _ := l.allow("a")
		require.True(t, ok)
	}
	ok, wait := l.allow("a")
	require.False(t, ok)
	require.InDelta(t, 500*time.Millisecond, wait, float64(time.Millisecond))
	ok, _ = l.allow("b")
	require.True(t, ok, "another client has its own bucket")
	clock.add(500 * time.Millisecond)
	ok, _ = l.allow("a")
	require.True(t, ok, "one token refilled")
	ok, _ = l.allow("a")
	require.False(t, ok)
}

func TestLimiterEvictsIdleClients(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	l := newLimiter(RateLimit{PerSecond: 1, Burst: 2}, clock.now, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	l.max = 1000
	for i := range 1000 {
		ok, _ := l.allow("client-" + strconv.Itoa(i))
		require.True(t, ok)
	}
	require.Equal(t, 1000, l.size())
	// Past the cap, new clients share one bucket: memory stays bounded.
	for i := range 5000 {
		l.allow("new-" + strconv.Itoa(i))
	}
	require.LessOrEqual(t, l.size(), 1001)
	// Once idle for longer than a refill, every entry is dropped.
	clock.add(l.idle + time.Second)
	ok, _ := l.allow("late")
	require.True(t, ok)
	require.Equal(t, 1, l.size())
}
