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
	l := newLimiterOf(RateLimit{PerSecond: 1, Burst: 2}, 1000, clock.now, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	for i := range 1000 {
		ok, _ := l.allow("client-" + strconv.Itoa(i))
		require.True(t, ok)
	}
	require.Equal(t, 1000, l.size())
	// Once idle for longer than a refill, every entry is dropped.
	clock.add(l.idle + time.Second)
	ok, _ := l.allow("late")
	require.True(t, ok)
	require.Equal(t, 1, l.size())
}

// TestLimiterFullOfSpoofedClientsStillServesNewOnes fills the table with
// addresses that each send once (as forged forwarded addresses would), then
// checks that fresh clients each get their own whole bucket, and no more,
// while the table never grows past its cap.
func TestLimiterFullOfSpoofedClientsStillServesNewOnes(t *testing.T) {
	t.Parallel()
	const capacity = 1000
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	l := newLimiterOf(RateLimit{PerSecond: 1, Burst: 3}, capacity, clock.now, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	for i := range 5 * capacity {
		ok, _ := l.allow("spoofed-" + strconv.Itoa(i))
		require.True(t, ok, "every spoofed address has a bucket of its own too")
		require.LessOrEqual(t, l.size(), capacity)
	}
	require.Equal(t, capacity, l.size())
	for c := range 40 {
		key := "fresh-" + strconv.Itoa(c)
		for range 3 {
			ok, _ := l.allow(key)
			require.True(t, ok, "%s is served its whole burst", key)
		}
		ok, wait := l.allow(key)
		require.False(t, ok, "%s is limited by its own bucket", key)
		require.Positive(t, wait)
		require.LessOrEqual(t, l.size(), capacity)
	}
	// The fresh clients are the most recently seen: more spoofed
	// addresses, fewer than the cap, evict none of them.
	for i := range capacity - 40 {
		l.allow("again-" + strconv.Itoa(i))
	}
	for c := range 40 {
		ok, _ := l.allow("fresh-" + strconv.Itoa(c))
		require.False(t, ok, "fresh-%d kept its (empty) bucket", c)
	}
}

// TestLimiterConcurrentClients runs many clients at once (run with -race):
// each gets exactly its burst while the clock stands still, and the table
// stays within its cap.
func TestLimiterConcurrentClients(t *testing.T) {
	t.Parallel()
	const capacity, clients, burst = 64, 32, 5
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	l := newLimiterOf(RateLimit{PerSecond: 0.001, Burst: burst}, capacity, clock.now, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}))
	var wg sync.WaitGroup
	allowed := make([]int, clients)
	for c := range clients {
		wg.Go(func() {
			for range 20 {
				if ok, _ := l.allow("client-" + strconv.Itoa(c)); ok {
					allowed[c]++
				}
			}
		})
	}
	// Noise from addresses seen once, concurrently, within the cap.
	wg.Go(func() {
		for i := range capacity - clients {
			l.allow("noise-" + strconv.Itoa(i))
		}
	})
	wg.Wait()
	for c, n := range allowed {
		require.Equal(t, burst, n, "client %d", c)
	}
	require.LessOrEqual(t, l.size(), capacity)
}

func TestWaterLimitOnePerAddressPerNotePerWindow(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	w := newWaterLimit(time.Minute, 100, clock.now)
	at, ok, _ := w.take("a", "n")
	require.True(t, ok)
	_, ok, wait := w.take("a", "n")
	require.False(t, ok)
	require.Equal(t, time.Minute, wait)
	_, ok, _ = w.take("b", "n")
	require.True(t, ok, "another address")
	_, ok, _ = w.take("a", "m")
	require.True(t, ok, "another note")
	// A water given back (not counted) frees its place at once.
	w.give("a", "n", at)
	at, ok, _ = w.take("a", "n")
	require.True(t, ok)
	clock.add(59 * time.Second)
	_, ok, wait = w.take("a", "n")
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
	// A stale give (of an older water) frees nothing.
	w.give("a", "n", at.Add(-time.Hour))
	_, ok, _ = w.take("a", "n")
	require.False(t, ok)
	clock.add(time.Second)
	_, ok, _ = w.take("a", "n")
	require.True(t, ok, "the window passed")
	// Memory stays bounded: expired pairs go, and past the cap the oldest.
	clock.add(time.Hour)
	for i := range 1000 {
		_, ok, _ := w.take("addr-"+strconv.Itoa(i), "n")
		require.True(t, ok)
		require.LessOrEqual(t, w.size(), 100)
	}
}
