package stream_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/stream"
)

// counted is a value in the "database": its reads are counted, and ids
// starting "missing" do not exist.
type counted struct {
	value atomic.Int64
	reads atomic.Int64
	gone  atomic.Bool
}

func (c *counted) read(_ context.Context, id string) (int64, error) {
	c.reads.Add(1)
	if strings.HasPrefix(id, "missing") || c.gone.Load() {
		return 0, capacityd.Errorf(capacityd.ENotFound, "%s not found", id)
	}
	return c.value.Load(), nil
}

// setupShared starts a notifier on rdb (nil: none, so it polls every
// refresh) and a Shared of counted values on it.
func setupShared(t *testing.T, rdb redis.UniversalClient, refresh time.Duration) (*stream.Shared[int64], *counted) {
	t.Helper()
	n := startNotifier(t, rdb, refresh)
	c := &counted{}
	same := func(a, b int64) bool { return a == b }
	return stream.NewShared(n, c.read, same, 10*time.Millisecond, sharedLinger), c
}

func nextValue(t *testing.T, f *stream.Follower[int64]) int64 {
	t.Helper()
	select {
	case v := <-f.Updates():
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
		return 0
	}
}

func TestSharedReadsOncePerChangeForAllFollowers(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	s, c := setupShared(t, rdb, 0)
	id := activity(t)
	c.value.Store(3)
	followers := make([]*stream.Follower[int64], 50)
	var wg sync.WaitGroup
	for i := range followers {
		wg.Go(func() {
			f, err := s.Follow(context.Background(), id)
			if assert.NoError(t, err) {
				followers[i] = f
			}
		})
	}
	wg.Wait()
	for _, f := range followers {
		require.NotNil(t, f)
		t.Cleanup(f.Close)
		require.Equal(t, int64(3), f.Initial())
	}
	require.Equal(t, int64(1), c.reads.Load(), "fifty followers who came at once: one read")

	c.value.Store(4)
	publish(t, rdb, id)
	for _, f := range followers {
		require.Equal(t, int64(4), nextValue(t, f))
	}
	require.Equal(t, int64(2), c.reads.Load(), "one read per change, not per follower")

	late, err := s.Follow(context.Background(), id)
	require.NoError(t, err)
	defer late.Close()
	assert.Equal(t, int64(4), late.Initial(), "a follower joining a followed value gets the current one")
	assert.Equal(t, int64(2), c.reads.Load(), "and reads nothing")

	publish(t, rdb, id) // announced, but the value is the same
	c.value.Store(5)
	publish(t, rdb, id)
	assert.Equal(t, int64(5), nextValue(t, late), "an unchanged value is not sent")
}

// sharedLinger is how long the tests' Shared follows an id after its
// last follower left.
const sharedLinger = 300 * time.Millisecond

func TestSharedLingersThenReadsAgain(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	s, c := setupShared(t, rdb, 0)
	id := activity(t)
	f, err := s.Follow(context.Background(), id)
	require.NoError(t, err)
	f.Close()
	f.Close()
	c.value.Store(8)
	publish(t, rdb, id) // announced while nobody follows, within the linger
	require.Eventually(t, func() bool { return c.reads.Load() == 2 }, 5*time.Second, time.Millisecond, "the lingering value is kept current")
	g, err := s.Follow(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, int64(8), g.Initial())
	assert.Equal(t, int64(2), c.reads.Load(), "a follower coming back within the linger reads nothing")
	g.Close()

	c.value.Store(9) // changed and not announced: only a read sees it
	require.Eventually(t, func() bool {
		h, err := s.Follow(context.Background(), id)
		require.NoError(t, err)
		defer h.Close()
		return h.Initial() == 9
	}, 5*time.Second, 2*sharedLinger, "once the linger is over, a new follower reads")
}

func TestSharedEndsFollowersWhenTheValueIsGone(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	s, c := setupShared(t, rdb, 0)

	_, err := s.Follow(context.Background(), "missing-"+activity(t))
	require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err))
	_, err = s.Follow(context.Background(), "missing-"+activity(t))
	require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err))
	assert.Equal(t, int64(2), c.reads.Load(), "a failed first read is not kept")

	id := activity(t)
	f, err := s.Follow(context.Background(), id)
	require.NoError(t, err)
	defer f.Close()
	c.gone.Store(true)
	publish(t, rdb, id)
	select {
	case <-f.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the follower of a deleted value was not ended")
	}
}

func TestSharedPollsWhileAnnouncementsAreDown(t *testing.T) {
	t.Parallel()
	s, c := setupShared(t, nil, 20*time.Millisecond)
	f, err := s.Follow(context.Background(), activity(t))
	require.NoError(t, err)
	defer f.Close()
	c.value.Store(1)
	assert.Equal(t, int64(1), nextValue(t, f), "without announcements the notifier's timer wakes the read")
}

func TestSharedAFollowerWaitsForTheReadOfAChange(t *testing.T) {
	t.Parallel()
	n := startNotifier(t, testenv.Redis(t), 0)
	c := &counted{}
	gate := make(chan struct{})
	var held atomic.Bool
	read := func(ctx context.Context, id string) (int64, error) {
		if c.reads.Load() > 0 {
			defer c.reads.Add(1)
			held.Store(true)
			<-gate // a read after a change, held until the test lets it go
			return c.value.Load(), nil
		}
		return c.read(ctx, id)
	}
	s := stream.NewShared(n, read, func(a, b int64) bool { return a == b }, time.Millisecond, sharedLinger)
	id := activity(t)
	first, err := s.Follow(context.Background(), id)
	require.NoError(t, err)
	defer first.Close()

	c.value.Store(7)
	n.Announce(context.Background(), id) // a change through this instance: its read begins and is held
	require.Eventually(t, held.Load, 5*time.Second, time.Millisecond)
	joined := make(chan int64, 1)
	go func() {
		f, err := s.Follow(context.Background(), id)
		if assert.NoError(t, err) {
			joined <- f.Initial()
			f.Close()
		}
	}()
	select {
	case v := <-joined:
		t.Fatalf("a follower joined with %d while the change's read was held", v)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	select {
	case v := <-joined:
		assert.Equal(t, int64(7), v, "it starts from the change, not from the value before")
	case <-time.After(5 * time.Second):
		t.Fatal("the follower did not join once the read was done")
	}
	assert.Equal(t, int64(7), nextValue(t, first))
}
