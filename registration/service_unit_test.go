package registration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// The TestUnit tests check the Service's own rules on a MemStore: no
// PostgreSQL, no Redis (go test -run Unit ./registration/).

var unitEpoch = time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)

// unitClock is a clock that moves only when told.
type unitClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *unitClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *unitClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// unitGate is a fake display gate: by default it holds a seat for every
// signup, each hold of its own generation h1, h2, … in the order of the
// calls.
type unitGate struct {
	mu     sync.Mutex
	calls  int
	answer func(activityID string) (Hold, error)
}

func (g *unitGate) Reserve(_ context.Context, activityID string, seats int) (Hold, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	if g.answer != nil {
		return g.answer(activityID)
	}
	return Hold{Gen: "h" + strconv.Itoa(g.calls), Seats: seats}, nil
}

// answerAll makes the gate answer every signup with err.
func (g *unitGate) answerAll(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answer = func(string) (Hold, error) { return Hold{}, err }
}

// unitObserver records the commits it is told about.
type unitObserver struct {
	mu      sync.Mutex
	commits []Commit
}

func (o *unitObserver) Committed(_ context.Context, commits []Commit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commits = append(o.commits, commits...)
}

func (o *unitObserver) Commits() []Commit {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.commits)
}

// holds returns the holds given back with commits and with failures.
func (o *unitObserver) holds() (committed, failed []Hold) {
	for _, c := range o.Commits() {
		if c.Failed {
			failed = append(failed, c.Holds...)
		} else {
			committed = append(committed, c.Holds...)
		}
	}
	return committed, failed
}

// unitEnv is a Service on a MemStore, with a fake clock, a recording
// observer and, when asked for, a fake gate.
type unitEnv struct {
	store *MemStore
	svc   *Service
	clock *unitClock
	gate  *unitGate
	seen  *unitObserver
}

type unitOptions struct {
	gate          bool
	maxActivities int
}

func newUnitEnv(t *testing.T, o unitOptions) *unitEnv {
	t.Helper()
	clock := &unitClock{now: unitEpoch}
	e := &unitEnv{store: NewMemStore(clock.Now), clock: clock, gate: &unitGate{}, seen: &unitObserver{}}
	cfg := Config{Store: e.store, Observers: []Observer{e.seen}, Now: clock.Now,
		Change: ChangeConfig{MaxActivities: o.maxActivities}}
	if o.gate {
		cfg.Gate = e.gate
	}
	e.svc = NewService(cfg)
	t.Cleanup(func() {
		e.store.ReleaseAll()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.svc.Close(ctx))
	})
	return e
}

// activity creates an activity of holds of 60 seconds.
func (e *unitEnv) activity(t *testing.T, capacity int, waitlist bool) string {
	t.Helper()
	a, err := e.svc.CreateActivity(t.Context(), NewActivity{Title: "unit", Capacity: capacity, Waitlist: waitlist, HoldSeconds: 60})
	require.NoError(t, err)
	return a.ID
}

func unitSignup(activityID, user string) SignupInput {
	return SignupInput{ActivityID: activityID, Caller: Caller{UserID: user, RequestID: "req-" + user}, Metadata: []byte(`{}`)}
}

// unitAnswer is what Signup returned.
type unitAnswer struct {
	user     string
	reg      Registration
	replayed bool
	err      error
}

// goSignup signs user up in a goroutine and returns the channel of its
// answer.
func (e *unitEnv) goSignup(ctx context.Context, activityID, user string) <-chan unitAnswer {
	ch := make(chan unitAnswer, 1)
	go func() {
		reg, replayed, err := e.svc.Signup(ctx, unitSignup(activityID, user))
		ch <- unitAnswer{user: user, reg: reg, replayed: replayed, err: err}
	}()
	return ch
}

// signupAll signs the users up concurrently and returns their answers, in
// the order of users.
func (e *unitEnv) signupAll(t *testing.T, activityID string, users []string) []unitAnswer {
	t.Helper()
	chans := make([]<-chan unitAnswer, len(users))
	for i, u := range users {
		chans[i] = e.goSignup(t.Context(), activityID, u)
	}
	out := make([]unitAnswer, len(users))
	for i, ch := range chans {
		out[i] = unitAwaitAnswer(t, ch)
	}
	return out
}

func unitUsers(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// unitWaitCtx tells when a request of the Service waits in a queue: the
// Service's queues (groupcommit's Submit) ask a request's context for Done
// only once the request is queued, and nothing on a signup's way to them
// asks before (neither the fake gate nor the MemStore, unless a block was
// injected into the call).
type unitWaitCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newUnitWaitCtx(parent context.Context) *unitWaitCtx {
	return &unitWaitCtx{Context: parent, waiting: make(chan struct{})}
}

func (c *unitWaitCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// queueSignup signs user up in a goroutine and returns once the signup
// waits in a queue of the Service, with the channel of its answer.
func (e *unitEnv) queueSignup(t *testing.T, ctx context.Context, activityID, user string) <-chan unitAnswer {
	t.Helper()
	wctx := newUnitWaitCtx(ctx)
	ch := e.goSignup(wctx, activityID, user)
	unitAwait(t, wctx.waiting, "the signup of "+user+" to queue")
	return ch
}

// unitAwait waits for ch to be closed, or fails the test after ten seconds.
func unitAwait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func unitAwaitAnswer(t *testing.T, ch <-chan unitAnswer) unitAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for an answer")
		return unitAnswer{}
	}
}

// unitActivitiesOf returns the activity of each batch of an Apply call, and the
// size of each batch.
func unitActivitiesOf(call []CommandBatch) (ids []string, sizes []int) {
	for _, b := range call {
		ids, sizes = append(ids, b.ActivityID), append(sizes, len(b.Commands))
	}
	return ids, sizes
}

func TestUnitConcurrentSignupsTakeExactlyTheSeats(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 5, false)

	pending, full := 0, 0
	for _, a := range e.signupAll(t, act, unitUsers("u", 40)) {
		switch {
		case a.err == nil:
			require.Equal(t, Pending, a.reg.Status)
			pending++
		case capacityd.IsCode(a.err, capacityd.EActivityFull):
			full++
		default:
			t.Fatalf("%s: %v", a.user, a.err)
		}
	}
	require.Equal(t, 5, pending)
	require.Equal(t, 35, full)

	a, err := e.svc.GetActivity(t.Context(), act)
	require.NoError(t, err)
	require.Equal(t, [3]int{5, 0, 0}, [3]int{a.Taken, a.Remaining, a.Waiting})
	evs := e.store.Events(act)
	require.Len(t, evs, 5, "one event per admission, none for a refusal")
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq)
		require.Equal(t, EventCreated, ev.Type)
	}
	// Without a gate every signup was decided by the authority, once.
	n := 0
	for _, call := range e.store.ApplyCalls() {
		for _, b := range call {
			n += len(b.Commands)
		}
	}
	require.Equal(t, 40, n)
}

func TestUnitConcurrentSignupsJoinTheWaitingListInOrder(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 3, true)

	var seated, waiting []Registration
	for _, a := range e.signupAll(t, act, unitUsers("u", 20)) {
		require.NoError(t, a.err, a.user)
		if a.reg.Status == Pending {
			require.Nil(t, a.reg.WaitlistPosition)
			seated = append(seated, a.reg)
			continue
		}
		require.Equal(t, Waitlisted, a.reg.Status)
		require.NotNil(t, a.reg.WaitlistPosition)
		waiting = append(waiting, a.reg)
	}
	require.Len(t, seated, 3)
	require.Len(t, waiting, 17)
	// In join order, the places are 1, 2, … 17.
	slices.SortFunc(waiting, func(a, b Registration) int { return int(a.WaitlistSeq - b.WaitlistSeq) })
	ids := make([]string, len(waiting))
	for i, r := range waiting {
		require.Equal(t, i+1, *r.WaitlistPosition, r.ID)
		ids[i] = r.ID
	}
	// The authority reads the same places.
	read, errs := e.svc.LookupBatch(t.Context(), ids)
	for i, r := range read {
		require.NoError(t, errs[i])
		require.Equal(t, i+1, *r.WaitlistPosition)
	}

	// A cancellation gives its seat to the first in line at once; the
	// others move up.
	_, err := e.svc.Cancel(t.Context(), seated[0].ID, Caller{UserID: seated[0].UserID})
	require.NoError(t, err)
	read, errs = e.svc.LookupBatch(t.Context(), ids)
	require.NoError(t, errs[0])
	require.Equal(t, Pending, read[0].Status)
	require.Nil(t, read[0].WaitlistPosition)
	for i, r := range read[1:] {
		require.NoError(t, errs[i+1])
		require.Equal(t, i+1, *r.WaitlistPosition)
	}
	a, err := e.svc.GetActivity(t.Context(), act)
	require.NoError(t, err)
	require.Equal(t, [2]int{3, 16}, [2]int{a.Taken, a.Waiting})
}

func TestUnitCommandsOfManyActivitiesShareTransactions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		maxActivities int
		// want is the activities (by index) of each Apply after the
		// blocked one.
		want [][]int
	}{
		{"one transaction for every activity queued", 0, [][]int{{1, 2, 3, 4, 0}}},
		{"at most two activities a transaction", 2, [][]int{{1, 2}, {3, 4}, {0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newUnitEnv(t, unitOptions{maxActivities: tc.maxActivities})
			acts := make([]string, 5)
			for i := range acts {
				acts[i] = e.activity(t, 10, false)
			}
			block := e.store.BlockNext(MemApply)
			answers := []<-chan unitAnswer{e.goSignup(t.Context(), acts[0], "first")}
			unitAwait(t, block.Entered(), "the first Apply")

			// While it runs, two signups of each other activity and one more
			// of the first queue, one after the other.
			for i := 1; i < len(acts); i++ {
				for _, u := range []string{"a", "b"} {
					answers = append(answers, e.queueSignup(t, t.Context(), acts[i], fmt.Sprintf("u%d%s", i, u)))
				}
			}
			answers = append(answers, e.queueSignup(t, t.Context(), acts[0], "second"))
			require.Len(t, e.store.ApplyCalls(), 1, "nothing else began while the first Apply runs")
			block.Release()
			for _, ch := range answers {
				a := unitAwaitAnswer(t, ch)
				require.NoError(t, a.err, a.user)
				require.Equal(t, Pending, a.reg.Status)
			}

			calls := e.store.ApplyCalls()
			require.Len(t, calls, 1+len(tc.want), "one Apply per transaction")
			ids, sizes := unitActivitiesOf(calls[0])
			require.Equal(t, []string{acts[0]}, ids)
			require.Equal(t, []int{1}, sizes)
			for k, want := range tc.want {
				var wantIDs []string
				var wantSizes []int
				for _, i := range want {
					wantIDs = append(wantIDs, acts[i])
					wantSizes = append(wantSizes, map[bool]int{true: 1, false: 2}[i == 0])
				}
				ids, sizes := unitActivitiesOf(calls[1+k])
				require.Equal(t, wantIDs, ids, "transaction %d", k+2)
				require.Equal(t, wantSizes, sizes, "transaction %d", k+2)
			}
		})
	}
}

func TestUnitACommandWithdrawnWhileQueuedWritesNothing(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{gate: true})
	act := e.activity(t, 10, false)
	block := e.store.BlockNext(MemApply)
	first := e.goSignup(t.Context(), act, "first")
	unitAwait(t, block.Entered(), "the first Apply")

	ctx, cancel := context.WithCancel(t.Context())
	late := e.queueSignup(t, ctx, act, "late")
	cancel()
	// Answered while the transaction before it still runs.
	a := unitAwaitAnswer(t, late)
	require.True(t, capacityd.IsCode(a.err, capacityd.EUnavailable), "%v", a.err)
	require.ErrorIs(t, a.err, groupcommit.ErrWithdrawn)
	// Its display hold (the gate's second) went back at once.
	require.Equal(t, []Commit{{ActivityID: act, Failed: true, Holds: []Hold{{Gen: "h2", Seats: 1}}}}, e.seen.Commits())

	block.Release()
	f := unitAwaitAnswer(t, first)
	require.NoError(t, f.err)
	require.Equal(t, Pending, f.reg.Status)
	// No transaction saw the withdrawn signup; nothing of it was written.
	calls := e.store.ApplyCalls()
	require.Len(t, calls, 1)
	require.Len(t, calls[0][0].Commands, 1)
	regs := e.store.Registrations(act)
	require.Len(t, regs, 1)
	require.Equal(t, "first", regs[0].UserID)
	require.Len(t, e.store.Events(act), 1)
	committed, failed := e.seen.holds()
	require.Equal(t, []Hold{{Gen: "h1", Seats: 1}}, committed)
	require.Equal(t, []Hold{{Gen: "h2", Seats: 1}}, failed)
}

func TestUnitACommandTakenByApplyWaitsForItsOutcome(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 10, false)
	block := e.store.BlockNext(MemApply)
	ctx, cancel := context.WithCancel(t.Context())
	ch := e.goSignup(ctx, act, "ann")
	unitAwait(t, block.Entered(), "the Apply of the signup")
	calls := e.store.ApplyCalls()
	require.Equal(t, "ann", calls[0][0].Commands[0].(SignupCommand).UserID)

	cancel()
	// (A best-effort look: an answer at the end of the context may not
	// have come yet. The outcome below is the proof.)
	select {
	case a := <-ch:
		t.Fatalf("answered %+v before its transaction ended", a)
	default:
	}
	block.Release()
	// Its outcome, as committed, not the end of its context.
	a := unitAwaitAnswer(t, ch)
	require.NoError(t, a.err)
	require.Equal(t, Pending, a.reg.Status)
	require.Len(t, e.store.Registrations(act), 1)
}

func TestUnitChangedWithinTellsOfTheLastSeatChange(t *testing.T) {
	t.Parallel()
	e := newUnitEnv(t, unitOptions{})
	act := e.activity(t, 5, false)
	require.False(t, e.svc.ChangedWithin(time.Hour), "no change yet")
	e.signupAll(t, act, unitUsers("u", 1))
	require.True(t, e.svc.ChangedWithin(time.Hour), "a signup's transaction just began")
	require.Eventually(t, func() bool { return !e.svc.ChangedWithin(time.Millisecond) }, 5*time.Second, time.Millisecond,
		"a change drops out of a window once the window has passed it")
}
