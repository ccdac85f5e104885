package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
)

func startNotifier(t *testing.T, rdb redis.UniversalClient, refresh time.Duration) *stream.Notifier {
	t.Helper()
	n, _ := startCountedNotifier(t, rdb, refresh)
	return n
}

// startCountedNotifier is startNotifier, with a function that reads the
// notifier's count of subscription losses from its own registry.
func startCountedNotifier(t *testing.T, rdb redis.UniversalClient, refresh time.Duration) (*stream.Notifier, func() float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	n := stream.NewNotifier(stream.NotifierConfig{Redis: rdb, RefreshInterval: refresh, Registerer: reg})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); n.Close(); <-done })
	if rdb != nil {
		require.Eventually(t, n.Healthy, 5*time.Second, 5*time.Millisecond)
	}
	losses := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "capacityd_seat_stream_subscription_losses_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("capacityd_seat_stream_subscription_losses_total is not registered")
		return 0
	}
	return n, losses
}

func signalled(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

func TestAnnouncementsReachWatchersOfEveryInstance(t *testing.T) {
	t.Parallel()
	a := startNotifier(t, testenv.Redis(t), 0)
	b := startNotifier(t, testenv.Redis(t), 0)
	id := activity(t)
	onA, stopA := a.Watch(id)
	defer stopA()
	onB, stopB := b.Watch(id)
	other, stopOther := b.Watch(id + "-other")
	defer stopOther()

	a.Announce(context.Background(), id)
	require.True(t, signalled(onA, 100*time.Millisecond), "this instance's watchers at once")
	require.True(t, signalled(onB, time.Second), "the other instance's through Redis")
	require.False(t, signalled(other, 100*time.Millisecond), "only the activity's watchers")

	stopB()
	a.Announce(context.Background(), id)
	require.False(t, signalled(onB, 200*time.Millisecond), "a stopped watch hears nothing")
}

func TestCommittedAnnouncesOnlyChanges(t *testing.T) {
	t.Parallel()
	n := startNotifier(t, nil, time.Hour)
	changed, stop := n.Watch("changed")
	defer stop()
	refused, stop2 := n.Watch("refused")
	defer stop2()
	n.Committed(context.Background(), []registration.Commit{
		{ActivityID: "changed", Events: []registration.Event{{Seq: 1}}},
		{ActivityID: "refused"},
		{ActivityID: "refused", Failed: true},
	})
	require.True(t, signalled(changed, 100*time.Millisecond))
	require.False(t, signalled(refused, 100*time.Millisecond), "a commit that changed nothing is not announced")
}

func TestWatchersArePokedOnATimerWhileAnnouncementsMayBeMissed(t *testing.T) {
	t.Parallel()
	n := startNotifier(t, nil, 50*time.Millisecond)
	require.True(t, n.Polling(), "without Redis every change elsewhere is missed")
	ch, stop := n.Watch("any")
	defer stop()
	require.True(t, signalled(ch, time.Second))
	require.True(t, signalled(ch, time.Second))
}

// TestCommittedAnnouncesEveryActivityOfThePools: a commit in one activity
// of a pool announces every activity of the pool, on this instance and on
// the others, each once; a pool's own change (no activity) announces its
// activities; a failed one nothing.
func TestCommittedAnnouncesEveryActivityOfThePools(t *testing.T) {
	t.Parallel()
	a := startNotifier(t, testenv.Redis(t), time.Hour)
	b := startNotifier(t, testenv.Redis(t), time.Hour)
	base := activity(t)
	ids := []string{base + "-1", base + "-2", base + "-3", base + "-4"}
	watch := func(n *stream.Notifier, id string) <-chan struct{} {
		ch, stop := n.Watch(id)
		t.Cleanup(stop)
		return ch
	}
	here, there := make([]<-chan struct{}, len(ids)), make([]<-chan struct{}, len(ids))
	for i, id := range ids {
		here[i], there[i] = watch(a, id), watch(b, id)
	}
	hall := registration.PoolSeatState{PoolID: "p_hall", Activities: ids[:3]}
	lab := registration.PoolSeatState{PoolID: "p_lab", Activities: ids[:2]}
	a.Committed(context.Background(), []registration.Commit{
		{ActivityID: ids[0], Events: []registration.Event{{Seq: 1}}, Pools: []registration.PoolSeatState{hall, lab}},
	})
	for i := range 3 {
		require.True(t, signalled(here[i], 100*time.Millisecond), "activity %d of the pool, here", i)
		require.True(t, signalled(there[i], time.Second), "activity %d of the pool, on the other instance", i)
	}
	require.False(t, signalled(here[3], 100*time.Millisecond), "not of the pool")
	require.False(t, signalled(there[3], 100*time.Millisecond), "not of the pool")

	a.Committed(context.Background(), []registration.Commit{{Pools: []registration.PoolSeatState{lab}}})
	require.True(t, signalled(there[1], time.Second), "a pool's own change announces its activities")
	require.False(t, signalled(there[2], 100*time.Millisecond), "only the pool's")

	a.Committed(context.Background(), []registration.Commit{{ActivityID: ids[3], Failed: true,
		Pools: []registration.PoolSeatState{{PoolID: "p_x", Activities: ids[3:]}}}})
	require.False(t, signalled(there[3], 200*time.Millisecond), "a failed transaction announces nothing")
}

// TestSubscriptionLossesAreCounted: a subscription that was up and failed
// (its Redis killed) counts one loss, and coming back counts none.
func TestSubscriptionLossesAreCounted(t *testing.T) {
	t.Parallel()
	srv := testenv.PrivateRedis(t)
	opts, err := redis.ParseURL(srv.URL())
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	n, losses := startCountedNotifier(t, rdb, 50*time.Millisecond)
	require.Zero(t, losses())

	srv.Kill()
	require.Eventually(t, func() bool { return !n.Healthy() }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1.0, losses(), "a subscription that was up and failed is one loss, counted before it shows as down")
	srv.Start(t)
	require.Eventually(t, n.Healthy, 10*time.Second, 10*time.Millisecond, "subscribed again once Redis is back")
	require.Equal(t, 1.0, losses(), "failed attempts while Redis was down and the recovery are no losses")
	require.True(t, n.Polling(), "watchers re-read for a while after the subscription is back")
}
