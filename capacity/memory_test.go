package capacity_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/registration"
)

// clock is a test clock moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newMemory() (*capacity.Memory, *clock) {
	c := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	return capacity.NewMemory(100, 10*time.Second, c.now), c
}

// change is an announced change of activity a to taken after seq.
func change(a string, prev, seq int64, seats, taken int, pools ...capacity.PoolSeatsSeen) capacity.SeatChange {
	ids := make([]string, len(pools))
	for i, p := range pools {
		ids[i] = p.PoolID
	}
	return capacity.SeatChange{ActivityID: a, Activity: &capacity.ActivitySeats{Prev: prev, Seq: seq, Version: 1,
		Capacity: seats, Taken: taken, Pools: ids}, Pools: pools}
}

func taken(t *testing.T, m *capacity.Memory, id string) int {
	t.Helper()
	s, ok := m.Seats(id)
	require.True(t, ok, "%s is remembered", id)
	return s.Taken
}

func TestTheMemoryFollowsAnnouncedChangesInSeqOrder(t *testing.T) {
	m, _ := newMemory()
	m.Fill(m.Epoch(), "a", &capacity.ActivitySeats{Seq: 3, Version: 1, Capacity: 10, Taken: 2}, nil, time.Minute)
	require.Equal(t, 2, taken(t, m, "a"))
	m.Apply(change("a", 3, 4, 10, 3))
	require.Equal(t, 3, taken(t, m, "a"))
	m.Apply(change("a", 2, 3, 10, 2))
	require.Equal(t, 3, taken(t, m, "a"), "an older change arriving late never steps back")
	m.Fill(m.Epoch(), "a", &capacity.ActivitySeats{Seq: 3, Version: 1, Capacity: 10, Taken: 2}, nil, time.Minute)
	require.Equal(t, 3, taken(t, m, "a"), "an older read never steps back")
	m.Apply(change("a", 5, 6, 10, 5))
	_, ok := m.Seats("a")
	require.False(t, ok, "a change after a missed one (seq gap) drops the entry")
	m.Apply(change("a", 4, 5, 10, 4))
	_, ok = m.Seats("a")
	require.False(t, ok, "the missed change arriving late does not bring it back")
	m.Fill(m.Epoch(), "a", &capacity.ActivitySeats{Seq: 5, Version: 1, Capacity: 10, Taken: 4}, nil, time.Minute)
	_, ok = m.Seats("a")
	require.False(t, ok, "nor does a read older than the newest seq announced")
	m.Fill(m.Epoch(), "a", &capacity.ActivitySeats{Seq: 6, Version: 1, Capacity: 10, Taken: 5}, nil, time.Minute)
	require.Equal(t, 5, taken(t, m, "a"), "a read as new as the newest announced is shown")
	m.Apply(capacity.SeatChange{ActivityID: "a"})
	_, ok = m.Seats("a")
	require.False(t, ok, "an announcement without seats drops the entry")
}

func TestTheMemoryMakesEntriesOfAnnouncedChanges(t *testing.T) {
	m, _ := newMemory()
	m.Apply(change("b", 0, 1, 4, 1))
	s, ok := m.Seats("b")
	require.True(t, ok)
	require.Equal(t, registration.Seats{ActivityID: "b", Capacity: 4, Taken: 1, Remaining: 3, Source: registration.SourceCache,
		AsOf: s.AsOf}, s)
	m.Fill(m.Epoch(), "b", &capacity.ActivitySeats{Seq: 0, Version: 1, Capacity: 4}, nil, time.Minute)
	require.Equal(t, 1, taken(t, m, "b"), "a read begun before the announcement does not undo it")
}

func TestAForgottenMemoryTakesNoReadBegunBefore(t *testing.T) {
	m, _ := newMemory()
	epoch := m.Epoch()
	m.Forget()
	m.Fill(epoch, "a", &capacity.ActivitySeats{Seq: 1, Version: 1, Capacity: 10, Taken: 2}, nil, time.Minute)
	_, ok := m.Seats("a")
	require.False(t, ok)
}

func TestEntriesExpireOnTheirOwn(t *testing.T) {
	m, clk := newMemory()
	m.Fill(m.Epoch(), "a", &capacity.ActivitySeats{Seq: 1, Version: 1, Capacity: 10, Taken: 2}, nil, time.Minute)
	m.Fill(m.Epoch(), "short", &capacity.ActivitySeats{Seq: 1, Version: 1, Capacity: 10}, nil, 2*time.Second)
	for i := int64(1); i < 9; i++ {
		clk.add(time.Second)
		m.Apply(change("a", i, i+1, 10, 2))
	}
	_, ok := m.Seats("short")
	require.False(t, ok, "a read lives no longer than the counter it read")
	require.Equal(t, 2, taken(t, m, "a"))
	clk.add(2 * time.Second)
	_, ok = m.Seats("a")
	require.False(t, ok, "updates do not extend an entry's life")
}

func TestTheMemoryShowsTheFewestLeftOfAnActivityAndItsPools(t *testing.T) {
	m, _ := newMemory()
	p := capacity.PoolSeatsSeen{PoolID: "p", Seq: 7, Version: 1, Capacity: 5, Taken: 2}
	m.Fill(m.Epoch(), "a", &capacity.ActivitySeats{Seq: 1, Version: 1, Capacity: 10, Taken: 1, Reserved: 1, Pools: []string{"p"}},
		[]capacity.PoolSeatsSeen{p}, time.Minute)
	s, ok := m.Seats("a")
	require.True(t, ok)
	require.Equal(t, [3]int{1, 1, 3}, [3]int{s.Taken, s.Reserved, s.Remaining})

	// A signup in another activity of the pool moves this one's seats.
	p.Seq, p.Taken = 8, 4
	m.Apply(capacity.SeatChange{ActivityID: "a", Pools: []capacity.PoolSeatsSeen{p}})
	s, _ = m.Seats("a")
	require.Equal(t, 1, s.Remaining)

	p.Seq, p.Taken = 10, 3
	m.Apply(capacity.SeatChange{ActivityID: "a", Pools: []capacity.PoolSeatsSeen{p}})
	_, ok = m.Seats("a")
	require.False(t, ok, "a pool's missed change drops what its activities show")
}

func TestSeatChangesCarryEachActivityAndThePoolsItMoved(t *testing.T) {
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	pool := registration.PoolSeatState{PoolID: "p", Capacity: 5, Taken: 3, LastSeq: 9, UpdatedAt: at, Activities: []string{"a", "b"}}
	changes := capacity.SeatChanges([]registration.Commit{{
		ActivityID: "a", Events: []registration.Event{{Seq: 4}, {Seq: 5}},
		State: registration.SeatState{Capacity: 10, Taken: 2, Waiting: 1, LastSeq: 5, UpdatedAt: at, Pools: []registration.PoolSeatState{pool}},
		Pools: []registration.PoolSeatState{pool},
	}, {ActivityID: "c", Failed: true}})
	want := capacity.PoolSeatsSeen{PoolID: "p", Seq: 9, Version: at.UnixMicro(), Capacity: 5, Taken: 3}
	require.Equal(t, []capacity.SeatChange{
		{ActivityID: "a", Activity: &capacity.ActivitySeats{Prev: 3, Seq: 5, Version: at.UnixMicro(), Capacity: 10, Taken: 2,
			Waiting: 1, Pools: []string{"p"}}, Pools: []capacity.PoolSeatsSeen{want}},
		{ActivityID: "b", Pools: []capacity.PoolSeatsSeen{want}},
	}, changes)
	for _, c := range changes {
		got, ok := capacity.DecodeSeatChange(c.Encode())
		require.True(t, ok)
		require.Equal(t, c, got)
	}
	got, ok := capacity.DecodeSeatChange("a_1")
	require.True(t, ok)
	require.Equal(t, capacity.SeatChange{ActivityID: "a_1"}, got, "a bare id carries no seats")
}

// holdFor holds seats of activity id for a request of lifetime d and
// returns the channel that closes at its deadline.
func (b bundle) holdFor(t *testing.T, id string, seats int, d time.Duration) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	_, err := b.counter.Reserve(ctx, id, seats)
	require.NoError(t, err)
	return ctx.Done()
}

// TestAHoldCountsUntilItsRequestsDeadline: the seats of a signup whose
// instance died before it committed or gave them back leave the display
// at the request's deadline.
func TestAHoldCountsUntilItsRequestsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.warm(t, 3, false)
	deadline := b.holdFor(t, id, 2, 500*time.Millisecond)
	_, err := b.counter.Reserve(context.Background(), id, 1)
	require.NoError(t, err)
	require.Equal(t, 3, b.seats(t, id).Taken, "held seats show as taken")
	<-deadline
	// The deadline is Redis's clock's: wait until it has passed there too.
	var s registration.Seats
	require.Eventually(t, func() bool {
		s = b.seats(t, id)
		return s.Taken == 1
	}, 5*time.Second, 5*time.Millisecond, "the hold past its deadline leaves the display")
	require.Equal(t, [2]int{1, 2}, [2]int{s.Taken, s.Remaining}, "the hold past its deadline is gone")
	require.Equal(t, "1", b.fields(t, id)["held"])
	_, err = b.counter.Reserve(context.Background(), id, 2)
	require.NoError(t, err, "its seats can be held again")
}

// TestAHoldDueBeforeTheOthersLeavesAtItsOwnDeadline: a hold due before
// every hold already counted moves the counter's due back (the time
// before which the scripts need not look for holds past their deadline),
// so that it leaves the display at its own deadline, not at the longer
// hold's; the counter's due is then the longer hold's deadline.
func TestAHoldDueBeforeTheOthersLeavesAtItsOwnDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.warm(t, 3, false)
	_, err := b.counter.Reserve(context.Background(), id, 1) // DefaultHoldLifetime: 30 s
	require.NoError(t, err)
	long, err := strconv.ParseInt(b.fields(t, id)["due"], 10, 64)
	require.NoError(t, err, "the first hold sets the counter's due")
	deadline := b.holdFor(t, id, 2, 500*time.Millisecond)
	short, err := strconv.ParseInt(b.fields(t, id)["due"], 10, 64)
	require.NoError(t, err)
	require.Less(t, short, long, "a hold due first moves due back")
	require.Equal(t, 3, b.seats(t, id).Taken, "held seats show as taken")
	<-deadline
	require.Eventually(t, func() bool { return b.seats(t, id).Taken == 1 }, 5*time.Second, 5*time.Millisecond,
		"the shorter hold leaves at its deadline, 29 s before the longer one's")
	require.Equal(t, strconv.FormatInt(long, 10), b.fields(t, id)["due"], "due is the deadline of the hold left")
	require.Equal(t, "1", b.fields(t, id)["held"])
}

// TestACounterWithAnUnreadableDueStillPrunes: a due field that is not a
// time (written by hand, say) is read as not known: the holds are looked
// at and due is set again.
func TestACounterWithAnUnreadableDueStillPrunes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.warm(t, 3, false)
	deadline := b.holdFor(t, id, 2, 300*time.Millisecond)
	require.NoError(t, b.rdb.HSet(context.Background(), capacity.Key(id), "due", "soon").Err())
	<-deadline
	require.Eventually(t, func() bool { return b.seats(t, id).Taken == 0 }, 5*time.Second, 5*time.Millisecond,
		"the hold past its deadline leaves the display")
	require.Equal(t, "none", b.fields(t, id)["due"], "no hold left")
	_, err := b.counter.Reserve(context.Background(), id, 3)
	require.NoError(t, err, "its seats can be held again")
}
