package capacity_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

type bundle struct {
	counter *capacity.Counter
	store   *store.Store
	rdb     *redis.Client
	db      *pgxpool.Pool
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := testenv.DB(t)
	st := store.New(db)
	rdb := testenv.Redis(t)
	c := capacity.New(capacity.Config{Redis: rdb, Authority: st, TTL: time.Minute})
	return bundle{counter: c, store: st, rdb: rdb, db: db}
}

var seq atomic.Int64

func (b bundle) activity(t *testing.T, capacity int, waitlist bool) string {
	t.Helper()
	a, err := b.store.CreateActivity(context.Background(), fmt.Sprintf("a_%026d", time.Now().UnixNano()+seq.Add(1)),
		registration.NewActivity{Title: "counter", Capacity: capacity, HoldSeconds: 900, Waitlist: waitlist})
	require.NoError(t, err)
	return a.ID
}

// warm creates an activity and builds its counter, as a reader does.
func (b bundle) warm(t *testing.T, capacity int, waitlist bool) string {
	t.Helper()
	id := b.activity(t, capacity, waitlist)
	b.seats(t, id)
	return id
}

// patch changes the activity's settings at the authority (at now, by the
// transaction's clock) and returns the committed state.
func (b bundle) patch(t *testing.T, id string, now time.Time, p registration.ActivityPatch) registration.Plan {
	t.Helper()
	out, err := b.store.Apply(context.Background(), []registration.CommandBatch{{ActivityID: id,
		Commands: []registration.Command{registration.ActivityCommand{Patch: p}}}}, now)
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	return out[0].Plan
}

// admit signs users up at the authority and returns the committed state.
func (b bundle) admit(t *testing.T, id string, users ...string) registration.Plan {
	t.Helper()
	var cmds []registration.Command
	for _, u := range users {
		cmds = append(cmds, registration.SignupCommand{RegistrationID: fmt.Sprintf("r_%026d", time.Now().UnixNano()+seq.Add(1)),
			UserID: u, Metadata: []byte(`{}`)})
	}
	out, err := b.store.Apply(context.Background(), []registration.CommandBatch{{ActivityID: id, Commands: cmds}}, time.Now())
	require.NoError(t, err)
	return out[0].Plan
}

func commitOf(id string, p registration.Plan, holds ...registration.Hold) registration.Commit {
	a := p.Activity
	return registration.Commit{ActivityID: id, Events: p.Events, Holds: holds, ActivityChanged: p.ActivityChanged,
		State: registration.SeatState{Capacity: a.Capacity, Waitlist: a.Waitlist, Taken: a.Taken, Waiting: a.Waiting,
			LastSeq: p.LastSeq, UpdatedAt: a.UpdatedAt}}
}

func (b bundle) fields(t *testing.T, id string) map[string]string {
	t.Helper()
	m, err := b.rdb.HGetAll(context.Background(), capacity.Key(id)).Result()
	require.NoError(t, err)
	return m
}

func (b bundle) seats(t *testing.T, id string) registration.Seats {
	t.Helper()
	s, err := b.counter.Seats(context.Background(), id)
	require.NoError(t, err)
	return s
}

func TestACommitBuildsTheCounterThatHoldsUntilFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.activity(t, 3, false)
	_, err := b.counter.Reserve(ctx, id, 1)
	require.ErrorIs(t, err, capacity.ErrNoCounter, "no counter: the authority decides, no query here")
	b.counter.Committed(ctx, []registration.Commit{commitOf(id, b.admit(t, id, "u1"))})

	h1, err := b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err)
	require.True(t, h1.Held())
	f := b.fields(t, id)
	require.Equal(t, "1", f["taken"], "built from the commit: the authority as of its seq")
	require.Equal(t, "1", f["held"])
	require.Equal(t, "1", f["seq"])
	ttl, err := b.rdb.PTTL(ctx, capacity.Key(id)).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 50*time.Second, "the TTL is set at the build")

	_, err = b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err)
	_, err = b.counter.Reserve(ctx, id, 1)
	require.ErrorIs(t, err, registration.ErrGateFull, "taken 1 + held 2 of 3")
	s := b.seats(t, id)
	require.Equal(t, [4]int{3, 3, 0, 0}, [4]int{s.Capacity, s.Taken, s.Remaining, s.Waiting})
	require.Equal(t, registration.SourceCache, s.Source)
}

func TestCommittedSetsTheAuthoritysCountsAndGivesHoldsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.warm(t, 10, false)
	h1, err := b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err)
	h2, err := b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err)

	// Two commits of other instances arrive out of order: the newer wins.
	p1 := b.admit(t, id, "a", "b")
	p2 := b.admit(t, id, "c")
	b.counter.Committed(ctx, []registration.Commit{commitOf(id, p2)})
	b.counter.Committed(ctx, []registration.Commit{commitOf(id, p1, h1)})
	f := b.fields(t, id)
	require.Equal(t, "3", f["taken"], "an older commit never steps back")
	require.Equal(t, "3", f["seq"])
	require.Equal(t, "1", f["held"], "h1 given back")

	// A failed transaction gives its holds back and changes nothing else.
	b.counter.Committed(ctx, []registration.Commit{{ActivityID: id, Failed: true, Holds: []registration.Hold{h2}}})
	f = b.fields(t, id)
	require.Equal(t, [2]string{"3", "0"}, [2]string{f["taken"], f["held"]})

	// A hold of an older generation is not given back to a new counter.
	h3, err := b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err)
	require.NoError(t, b.rdb.Del(ctx, capacity.Key(id)).Err())
	b.seats(t, id) // rebuilds
	_, err = b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err)
	b.counter.Committed(ctx, []registration.Commit{{ActivityID: id, Failed: true, Holds: []registration.Hold{h3}}})
	require.Equal(t, "1", b.fields(t, id)["held"], "the new counter's hold stays")
}

func TestCommittedAppliesCapacityAndWaitingList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.warm(t, 1, true)
	_, err := b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err)
	_, err = b.counter.Reserve(ctx, id, 1)
	require.ErrorIs(t, err, registration.ErrGateWaitlist, "full with a waiting list: the signup joins it")

	require.Equal(t, 1, b.admit(t, id, "seated", "waiter").Activity.Waiting)
	five, off := 5, false
	b.counter.Committed(ctx, []registration.Commit{commitOf(id, b.patch(t, id, time.Now(), registration.ActivityPatch{Capacity: &five, Waitlist: &off}))})
	s := b.seats(t, id)
	require.Equal(t, [3]int{5, 3, 0}, [3]int{s.Capacity, s.Taken, s.Waiting}, "the raise promoted the waiter: taken 2 + held 1")
	_, err = b.counter.Reserve(ctx, id, 1)
	require.NoError(t, err, "list off: a seat is held")
}

// TestSettingsOfCommitsOutOfOrderNeverStepBack: two changes of an
// activity's settings, committed one after the other (the second by a
// transaction whose clock reads earlier, as another instance's may) but
// applied to the display in the opposite order, as two instances' commits
// can be: the display keeps the later settings, and a signup's commit
// made before them does not bring the older ones back either.
func TestSettingsOfCommitsOutOfOrderNeverStepBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.warm(t, 10, false)
	signup := b.admit(t, id, "early")
	twenty, thirty, on := 20, 30, true
	now := time.Now()
	first := b.patch(t, id, now, registration.ActivityPatch{Capacity: &twenty})
	second := b.patch(t, id, now.Add(-time.Second), registration.ActivityPatch{Capacity: &thirty, Waitlist: &on})
	require.True(t, second.Activity.UpdatedAt.After(first.Activity.UpdatedAt),
		"a later change has a later updated_at, whatever its transaction's clock says")

	for _, p := range []registration.Plan{second, first, signup} {
		b.counter.Committed(ctx, []registration.Commit{commitOf(id, p)})
	}
	s := b.seats(t, id)
	require.Equal(t, [3]int{30, 1, 29}, [3]int{s.Capacity, s.Taken, s.Remaining}, "the later settings stay")
	require.Equal(t, "1", b.fields(t, id)["waitlist"])
	st, err := b.store.SeatState(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 30, st.Capacity)
	require.Equal(t, second.Activity.UpdatedAt, st.UpdatedAt, "the authority keeps the updated_at the decision made")
}

// TestSettingsFromManyInstancesEndAtTheAuthoritys: twenty changes of an
// activity's capacity, committed in turn, reach the display from two
// instances' counters at once, in any order: afterwards the display shows
// the authority's capacity, the last change's.
func TestSettingsFromManyInstancesEndAtTheAuthoritys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := capacity.New(capacity.Config{Redis: b.rdb, Authority: b.store, TTL: time.Minute})
	ctx := context.Background()
	id := b.warm(t, 10, false)
	var commits []registration.Commit
	for n := range 20 {
		c := 11 + n
		commits = append(commits, commitOf(id, b.patch(t, id, time.Now(), registration.ActivityPatch{Capacity: &c})))
	}
	var wg sync.WaitGroup
	for i, n := range rand.Perm(len(commits)) {
		counter := []*capacity.Counter{b.counter, other}[i%2]
		wg.Go(func() { counter.Committed(ctx, []registration.Commit{commits[n]}) })
	}
	wg.Wait()
	st, err := b.store.SeatState(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 30, st.Capacity)
	require.Equal(t, st.Capacity, b.seats(t, id).Capacity, "the display ends at the authority's capacity")
}

func TestSeatsFallBackToTheAuthorityWithoutRedis(t *testing.T) {
	t.Parallel()
	st := store.New(testenv.DB(t))
	c := capacity.New(capacity.Config{Authority: st})
	b := bundle{counter: c, store: st}
	id := b.activity(t, 4, true)
	b.admit(t, id, "x")
	s := b.seats(t, id)
	require.Equal(t, registration.SourceDatabase, s.Source)
	require.Equal(t, [3]int{4, 1, 3}, [3]int{s.Capacity, s.Taken, s.Remaining})
	_, err := c.Reserve(context.Background(), id, 1)
	require.ErrorIs(t, err, capacity.ErrNoCache)
}

func TestCachedSeatsAnswersFromAWarmCounterOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.activity(t, 10, false)
	_, ok := b.counter.CachedSeats(ctx, id)
	require.False(t, ok, "no counter yet: not warm, and not rebuilt")
	_, ok = b.counter.CachedSeats(ctx, id)
	require.False(t, ok)
	b.admit(t, id, "u1")
	b.seats(t, id) // a seat read rebuilds it
	s, ok := b.counter.CachedSeats(ctx, id)
	require.True(t, ok)
	require.Equal(t, registration.SourceCache, s.Source)
	require.Equal(t, 1, s.Taken)
	require.Equal(t, 9, s.Remaining)
	_, ok = b.counter.CachedSeats(ctx, "a_00000000000000000000000000")
	require.False(t, ok, "an id with no counter")
}
