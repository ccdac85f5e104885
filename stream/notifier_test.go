package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
)

func startNotifier(t *testing.T, rdb redis.UniversalClient, refresh time.Duration) *stream.Notifier {
	t.Helper()
	n := stream.NewNotifier(stream.NotifierConfig{Redis: rdb, RefreshInterval: refresh})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); n.Close(); <-done })
	if rdb != nil {
		require.Eventually(t, n.Healthy, 5*time.Second, 5*time.Millisecond)
	}
	return n
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
