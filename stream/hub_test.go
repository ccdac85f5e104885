package stream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
)

// fakeSeats stands in for the seat counter: the hub's subject is fan-out,
// so its reads are counted and their answer set by the test.
type fakeSeats struct {
	taken atomic.Int64
	reads atomic.Int64
	// shared, when set (above 0), is the seats left in the activity's
	// pools: it bounds Remaining as a pool does.
	shared atomic.Int64
}

func (f *fakeSeats) read(_ context.Context, id string) (registration.Seats, error) {
	f.reads.Add(1)
	if strings.HasPrefix(id, "missing") {
		return registration.Seats{}, capacityd.Errorf(capacityd.ENotFound, "activity %s not found", id)
	}
	t := int(f.taken.Load())
	remaining := 1000 - t
	if shared := int(f.shared.Load()); shared > 0 {
		remaining = min(remaining, shared)
	}
	return registration.Seats{ActivityID: id, Capacity: 1000, Taken: t, Remaining: remaining, Source: "cache"}, nil
}

type hubBundle struct {
	hub      *stream.Hub
	notifier *stream.Notifier
	seats    *fakeSeats
	rdb      redis.UniversalClient
}

// setupHub starts a notifier on rdb (nil: none) that pokes on a timer every
// refresh (0: the default) while announcements may be missed, and a hub
// on it, and waits until the subscription is up.
func setupHub(t *testing.T, rdb redis.UniversalClient, refresh time.Duration, cfg stream.HubConfig) hubBundle {
	t.Helper()
	f := &fakeSeats{}
	n := stream.NewNotifier(stream.NotifierConfig{Redis: rdb, RefreshInterval: refresh})
	cfg.Changes, cfg.Seats = n, f.read
	h := stream.NewHub(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); h.Close(); n.Close(); <-done })
	if rdb != nil {
		require.Eventually(t, n.Healthy, 5*time.Second, 5*time.Millisecond, "subscription up")
	}
	return hubBundle{hub: h, notifier: n, seats: f, rdb: rdb}
}

// activity returns a fresh activity id, unique across tests sharing Redis.
func activity(t *testing.T) string {
	return "hubtest-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
}

func publish(t *testing.T, rdb redis.UniversalClient, id string) {
	t.Helper()
	require.NoError(t, rdb.Publish(context.Background(), stream.Channel, id).Err())
}

// eventSeats decodes the data of one encoded event.
func eventSeats(t *testing.T, ev []byte) registration.Seats {
	t.Helper()
	_, data, ok := bytes.Cut(ev, []byte("\ndata: "))
	require.True(t, ok, "event %q has data", ev)
	require.True(t, bytes.HasSuffix(data, []byte("\n\n")), "event %q ends with a blank line", ev)
	var s registration.Seats
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(data), &s))
	return s
}

func next(t *testing.T, s *stream.Subscriber, within time.Duration) []byte {
	t.Helper()
	select {
	case ev := <-s.Events():
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
		return nil
	}
}

func TestHubReadsOncePerChangeForAllSubscribers(t *testing.T) {
	t.Parallel()
	b := setupHub(t, testenv.Redis(t), 0, stream.HubConfig{})
	id := activity(t)
	subs := make([]*stream.Subscriber, 50)
	for i := range subs {
		s, err := b.hub.Subscribe(context.Background(), id)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		subs[i] = s
	}
	require.Equal(t, int64(50), b.seats.reads.Load(), "each new stream reads the current state")
	require.True(t, bytes.HasPrefix(subs[0].Initial(), []byte("event: seats\nid: ")), "%q", subs[0].Initial())

	b.seats.taken.Store(7)
	publish(t, b.rdb, id)
	first := next(t, subs[0], time.Second)
	require.Equal(t, 7, eventSeats(t, first).Taken)
	for _, s := range subs[1:] {
		ev := next(t, s, time.Second)
		require.Same(t, &first[0], &ev[0], "every subscriber gets the same encoded bytes")
	}
	require.Equal(t, int64(51), b.seats.reads.Load(), "one read per change, not per subscriber")
	require.Equal(t, 50, b.hub.Streams())
}

func TestHubCoalescesBurstsAndEndsExact(t *testing.T) {
	t.Parallel()
	b := setupHub(t, testenv.Redis(t), 0, stream.HubConfig{})
	id := activity(t)
	s, err := b.hub.Subscribe(context.Background(), id)
	require.NoError(t, err)
	t.Cleanup(s.Close)

	var events []registration.Seats
	var times []time.Time
	stop := make(chan struct{})
	collected := make(chan struct{})
	exact := make(chan struct{}) // closed on the event of the last change
	go func() {
		defer close(collected)
		sawLast := false
		for {
			select {
			case ev := <-s.Events():
				seats := eventSeats(t, ev)
				events = append(events, seats)
				times = append(times, time.Now())
				if seats.Taken == 200 && !sawLast {
					sawLast = true
					close(exact)
				}
			case <-stop:
				return
			}
		}
	}()
	start := time.Now()
	for i := 1; i <= 200; i++ {
		b.seats.taken.Store(int64(i))
		publish(t, b.rdb, id)
	}
	burst := time.Since(start)
	select {
	case <-exact:
	case <-time.After(5 * time.Second):
		t.Error("no event of the last change within 5s")
	}
	close(stop)
	<-collected
	require.NotEmpty(t, events)
	require.Equal(t, 200, events[len(events)-1].Taken, "the last event is exact")
	// At most one event per 100 ms, plus the first at once.
	require.LessOrEqual(t, len(events), int(burst/(100*time.Millisecond))+2, "burst of 200 changes in %s gave %d events", burst, len(events))
	// The events leave at least 100 ms apart. They are timed at the
	// receiver, where a busy test machine can delay one and so shorten the
	// gap to the next: over the whole burst, only the first and the last
	// time can shift the span, by less than one spacing.
	if n := len(times); n > 1 {
		span := times[n-1].Sub(times[0])
		require.GreaterOrEqual(t, span, time.Duration(n-2)*100*time.Millisecond,
			"%d events within %s: not one per 100 ms", n, span)
	}
	t.Logf("200 changes in %s → %d events, %d reads", burst, len(events), b.seats.reads.Load())
}

func TestHubDropsSubscriberThatStopsReading(t *testing.T) {
	t.Parallel()
	b := setupHub(t, testenv.Redis(t), 0, stream.HubConfig{Interval: 5 * time.Millisecond, Buffer: 2})
	id := activity(t)
	slow, err := b.hub.Subscribe(context.Background(), id)
	require.NoError(t, err)
	t.Cleanup(slow.Close)
	fast, err := b.hub.Subscribe(context.Background(), id)
	require.NoError(t, err)
	t.Cleanup(fast.Close)

	for i := 1; i <= 10; i++ {
		b.seats.taken.Store(int64(i))
		publish(t, b.rdb, id)
		ev := next(t, fast, time.Second)
		require.Equal(t, i, eventSeats(t, ev).Taken)
	}
	select {
	case <-slow.Done():
	case <-time.After(time.Second):
		t.Fatal("the subscriber that never reads was not dropped")
	}
	require.Equal(t, 1, b.hub.Streams())
}

func TestHubCapsStreams(t *testing.T) {
	t.Parallel()
	b := setupHub(t, nil, 0, stream.HubConfig{MaxStreams: 2})
	id := activity(t)
	for range 2 {
		s, err := b.hub.Subscribe(context.Background(), id)
		require.NoError(t, err)
		t.Cleanup(s.Close)
	}
	_, err := b.hub.Subscribe(context.Background(), id)
	require.True(t, capacityd.IsCode(err, capacityd.EUnavailable), "%v", err)
}

func TestHubUnknownActivityLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	b := setupHub(t, nil, 0, stream.HubConfig{})
	_, err := b.hub.Subscribe(context.Background(), "missing-1")
	require.True(t, capacityd.IsCode(err, capacityd.ENotFound), "%v", err)
	require.Equal(t, 0, b.hub.Streams())
}

func TestHubWithoutRedisRefreshesFromTheAuthority(t *testing.T) {
	t.Parallel()
	b := setupHub(t, nil, 50*time.Millisecond, stream.HubConfig{})
	s, err := b.hub.Subscribe(context.Background(), activity(t))
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.Equal(t, 0, eventSeats(t, s.Initial()).Taken)

	// Three re-reads on the timer: the first two have been fanned out (or
	// not) by the time the third starts.
	reads := b.seats.reads.Load()
	require.Eventually(t, func() bool { return b.seats.reads.Load() >= reads+3 }, 5*time.Second, 5*time.Millisecond,
		"the hub re-reads on the notifier's timer")
	select {
	case ev := <-s.Events():
		t.Fatalf("an unchanged refresh sent %q", ev)
	default:
	}
	b.seats.taken.Store(3)
	require.Equal(t, 3, eventSeats(t, next(t, s, time.Second)).Taken)
}

func TestHubResubscribesAfterRedisRestart(t *testing.T) {
	t.Parallel()
	srv := testenv.PrivateRedis(t)
	rdb := testenv.RedisClient(t, srv.URL())
	b := setupHub(t, rdb, 100*time.Millisecond, stream.HubConfig{})
	id := activity(t)
	s, err := b.hub.Subscribe(context.Background(), id)
	require.NoError(t, err)
	t.Cleanup(s.Close)

	srv.Kill()
	require.Eventually(t, func() bool { return !b.notifier.Healthy() }, 5*time.Second, 10*time.Millisecond)
	// Down: changes still reach the stream, from periodic reads.
	b.seats.taken.Store(4)
	require.Equal(t, 4, eventSeats(t, next(t, s, 2*time.Second)).Taken)

	srv.Start(t)
	require.Eventually(t, b.notifier.Healthy, 10*time.Second, 10*time.Millisecond, "subscribed again")
	drain(s)
	b.seats.taken.Store(5)
	publish(t, rdb, id)
	require.Equal(t, 5, eventSeats(t, next(t, s, time.Second)).Taken)
}

func drain(s *stream.Subscriber) {
	for {
		select {
		case <-s.Events():
		case <-time.After(150 * time.Millisecond):
			return
		}
	}
}

func TestHubCloseEndsEveryStream(t *testing.T) {
	t.Parallel()
	b := setupHub(t, nil, 0, stream.HubConfig{})
	var subs []*stream.Subscriber
	for i := range 3 {
		s, err := b.hub.Subscribe(context.Background(), activity(t)+string(rune('a'+i)))
		require.NoError(t, err)
		subs = append(subs, s)
	}
	b.hub.Close()
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Go(func() {
			select {
			case <-s.Done():
			case <-time.After(time.Second):
				t.Error("stream not ended by Close")
			}
			s.Close()
		})
	}
	wg.Wait()
	_, err := b.hub.Subscribe(context.Background(), activity(t))
	require.True(t, capacityd.IsCode(err, capacityd.EUnavailable), "%v", err)
	require.Equal(t, 0, b.hub.Streams())
}

// TestHubSendsAChangeOfTheSeatsLeftInAPool: a change in a pool moves an
// activity's remaining alone (its own capacity, taken and waiting stay):
// the stream sends it.
func TestHubSendsAChangeOfTheSeatsLeftInAPool(t *testing.T) {
	t.Parallel()
	b := setupHub(t, nil, time.Hour, stream.HubConfig{Interval: 5 * time.Millisecond})
	id := activity(t)
	s, err := b.hub.Subscribe(context.Background(), id)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.Equal(t, 1000, eventSeats(t, s.Initial()).Remaining)

	b.seats.shared.Store(3)
	b.notifier.Committed(context.Background(), []registration.Commit{{ActivityID: "another activity of the pool",
		Events: []registration.Event{{Seq: 1}}, Pools: []registration.PoolSeatState{{PoolID: "p_x", Activities: []string{id}}}}})
	ev := eventSeats(t, next(t, s, time.Second))
	require.Equal(t, [2]int{0, 3}, [2]int{ev.Taken, ev.Remaining}, "the pool's seats left, the activity's own taken unchanged")
}
