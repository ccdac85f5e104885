package registration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
)

// releaseStore is a MemStore whose due releases are the ones the test
// gives and whose Apply answers the release commands without reading
// anything (the MemStore keeps no schedule; what a release command does
// under the lock is tested on PostgreSQL, internal/test/e2e): it records
// the batches of each transaction and the releases recorded as done.
// What ReleaseDue submits, and when, is what these tests check.
type releaseStore struct {
	*MemStore

	mu      sync.Mutex
	due     []DueRelease
	applies [][]CommandBatch
	done    []string
	// failing refuses every command of an activity from its nth release
	// command on (1: the first), as an activity that no longer exists.
	failing map[string]int
	seen    map[string]int
	// hold, when set, makes the first Apply wait until it is closed
	// (let closes it); entered is closed once that Apply waits.
	hold, entered chan struct{}
	let           func()
}

func newReleaseStore(due ...DueRelease) *releaseStore {
	return &releaseStore{MemStore: NewMemStore(nil), due: due, failing: map[string]int{}, seen: map[string]int{}}
}

// ClaimDueReleases returns the due releases once.
func (s *releaseStore) ClaimDueReleases(context.Context, time.Time, int) ([]DueRelease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	due := s.due
	s.due = nil
	return due, nil
}

// ReleaseDone records the activity's release as done, unless ctx ended.
func (s *releaseStore) ReleaseDone(ctx context.Context, activityID string, _ CancelReason) error {
	if err := ctx.Err(); err != nil {
		return capacityd.Unavailable(err, "the database is unavailable")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = append(s.done, activityID)
	return nil
}

// Apply records the transaction's batches and answers each release
// command changed, or refused for an activity set failing.
func (s *releaseStore) Apply(ctx context.Context, batches []CommandBatch, _ time.Time) ([]Applied, error) {
	s.mu.Lock()
	first := len(s.applies) == 0
	c := make([]CommandBatch, len(batches))
	for i, b := range batches {
		c[i] = CommandBatch{ActivityID: b.ActivityID, Commands: slices.Clone(b.Commands)}
	}
	s.applies = append(s.applies, c)
	out := make([]Applied, len(batches))
	for i, b := range batches {
		s.seen[b.ActivityID] += len(b.Commands)
		if n := s.failing[b.ActivityID]; n > 0 && s.seen[b.ActivityID] >= n {
			out[i].Err = ActivityNotFound(b.ActivityID)
			continue
		}
		for range b.Commands {
			out[i].Plan.Outcomes = append(out[i].Plan.Outcomes, Outcome{Changed: true})
		}
	}
	s.mu.Unlock()
	if first && s.hold != nil {
		close(s.entered)
		select {
		case <-s.hold:
		case <-ctx.Done():
			return nil, capacityd.Unavailable(ctx.Err(), "the database did not answer in time")
		}
	}
	return out, nil
}

// holdFirst makes the first Apply wait until the returned function is
// called; entered is closed once it waits. Call it before the Service
// runs.
func (s *releaseStore) holdFirst() (entered <-chan struct{}, let func()) {
	s.hold, s.entered = make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.let = func() { once.Do(func() { close(s.hold) }) }
	return s.entered, s.let
}

// commands returns how many commands of the activity transactions took.
func (s *releaseStore) commands(activityID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[activityID]
}

// transactions returns the batches of each transaction so far.
func (s *releaseStore) transactions() [][]CommandBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applies)
}

// doneActivities returns the activities recorded as done, sorted.
func (s *releaseStore) doneActivities() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.done))
}

// newReleaseService returns a Service on st.
func newReleaseService(t *testing.T, st *releaseStore) *Service {
	t.Helper()
	svc := NewService(Config{Store: st})
	t.Cleanup(func() {
		if st.let != nil {
			st.let()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, svc.Close(ctx))
	})
	return svc
}

// dueOf returns n due releases of the unconfirmed, of size registrations
// each (activities a00, a01, …).
func dueOf(n, size int) []DueRelease {
	out := make([]DueRelease, n)
	for i := range out {
		out[i] = DueRelease{ActivityID: fmt.Sprintf("a%02d", i), Reason: CancelUnconfirmed, RegistrationIDs: regIDs(fmt.Sprintf("a%02d-", i), size)}
	}
	return out
}

func regIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%sr%04d", prefix, i)
	}
	return out
}

// releaseRowsOf returns the registrations a transaction's release
// commands name, and fails if it has two commands of one activity.
func releaseRowsOf(t *testing.T, tx []CommandBatch) int {
	t.Helper()
	n := 0
	for _, b := range tx {
		require.Len(t, b.Commands, 1, "one release command of activity %s in a transaction", b.ActivityID)
		rc, ok := b.Commands[0].(ReleaseCommand)
		require.True(t, ok)
		assert.Equal(t, ActorSystem, rc.Actor)
		require.LessOrEqual(t, len(rc.RegistrationIDs), releaseChunk)
		n += len(rc.RegistrationIDs)
	}
	return n
}

// queued returns how many commands wait on the activities' queues.
func queued(svc *Service, due []DueRelease) int {
	n := 0
	for _, d := range due {
		n += svc.releases.Queued(d.ActivityID)
	}
	return n
}

// TestUnitReleaseDueSharesTransactions: the releases of the claimed
// activities are submitted together, so that those that queue while a
// transaction runs all go into the next one, and each activity is
// recorded as done once its release committed.
func TestUnitReleaseDueSharesTransactions(t *testing.T) {
	// As many activities as fit in releaseRows at once.
	const size = 60
	due := dueOf(releaseRows/size, size)
	st := newReleaseStore(due...)
	entered, let := st.holdFirst()
	svc := newReleaseService(t, st)

	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := svc.ReleaseDue(t.Context())
		res <- result{n, err}
	}()
	<-entered
	require.Eventually(t, func() bool { return queued(svc, due) == len(due)-1 }, 10*time.Second, time.Millisecond,
		"the other activities' releases queue while the first transaction runs")
	let()
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, len(due), r.n)

	txs := st.transactions()
	require.Len(t, txs, 2, "one transaction for the first release, one for all the others")
	assert.Len(t, txs[0], 1)
	assert.Len(t, txs[1], len(due)-1)
	named := map[string][]string{}
	for _, tx := range txs {
		assert.LessOrEqual(t, releaseRowsOf(t, tx), releaseRows)
		for _, b := range tx {
			named[b.ActivityID] = append(named[b.ActivityID], b.Commands[0].(ReleaseCommand).RegistrationIDs...)
		}
	}
	for _, d := range due {
		assert.Equal(t, d.RegistrationIDs, named[d.ActivityID], "activity %s's registrations, each once", d.ActivityID)
	}
	want := make([]string, len(due))
	for i, d := range due {
		want[i] = d.ActivityID
	}
	assert.Equal(t, want, st.doneActivities())
}

// TestUnitReleaseDueChunksAHugeActivity: a huge activity's release is
// chunks of releaseChunk, one after the other and in order, and no
// transaction carries more than releaseRows registrations, though other
// activities' releases share them.
func TestUnitReleaseDueChunksAHugeActivity(t *testing.T) {
	huge := DueRelease{ActivityID: "huge", Reason: CancelNoShow, RegistrationIDs: regIDs("huge-", 2*releaseChunk+234)}
	due := append([]DueRelease{huge}, dueOf(12, 90)...)
	st := newReleaseStore(due...)
	svc := newReleaseService(t, st)

	n, err := svc.ReleaseDue(t.Context())
	require.NoError(t, err)
	assert.Equal(t, len(due), n)

	var chunks [][]string
	seen := map[string]int{}
	for _, tx := range st.transactions() {
		assert.LessOrEqual(t, releaseRowsOf(t, tx), releaseRows)
		for _, b := range tx {
			rc := b.Commands[0].(ReleaseCommand)
			seen[b.ActivityID] += len(rc.RegistrationIDs)
			if b.ActivityID == huge.ActivityID {
				assert.Equal(t, CancelNoShow, rc.Reason)
				chunks = append(chunks, rc.RegistrationIDs)
			}
		}
	}
	require.Len(t, chunks, 3)
	assert.Equal(t, []int{releaseChunk, releaseChunk, 234}, []int{len(chunks[0]), len(chunks[1]), len(chunks[2])})
	assert.Equal(t, huge.RegistrationIDs, slices.Concat(chunks...), "the chunks in order, each registration once")
	for _, d := range due[1:] {
		assert.Equal(t, 90, seen[d.ActivityID])
	}
	assert.Len(t, st.doneActivities(), len(due))
}

// TestUnitReleaseDueBoundsTheRowsInFlight: while a transaction runs, only
// as many releases queue as releaseRows leaves room for; the others wait
// for room instead of piling into the next transaction.
func TestUnitReleaseDueBoundsTheRowsInFlight(t *testing.T) {
	const size = releaseRows / 4
	due := dueOf(3*releaseRows/size, size)
	st := newReleaseStore(due...)
	entered, let := st.holdFirst()
	svc := newReleaseService(t, st)

	done := make(chan error, 1)
	go func() {
		_, err := svc.ReleaseDue(t.Context())
		done <- err
	}()
	<-entered
	require.Eventually(t, func() bool { return queued(svc, due)*size == releaseRows-size }, 10*time.Second, time.Millisecond)
	let()
	require.NoError(t, <-done)
	txs := st.transactions()
	total := 0
	for _, tx := range txs {
		rows := releaseRowsOf(t, tx)
		assert.LessOrEqual(t, rows, releaseRows)
		total += rows
	}
	assert.Equal(t, len(due)*size, total)
	assert.GreaterOrEqual(t, len(txs), len(due)*size/releaseRows+1, "the first alone, then at most releaseRows at a time")
	assert.Len(t, st.doneActivities(), len(due))
}

// TestUnitReleaseDueMarksDoneWhatCommitted: an activity whose release
// command is refused is not recorded as done (its claim lapses and it is
// claimed again), nor is a huge one whose second chunk is refused (its
// third is never submitted); the others are, and the refusals are
// returned.
func TestUnitReleaseDueMarksDoneWhatCommitted(t *testing.T) {
	huge := DueRelease{ActivityID: "huge", Reason: CancelUnconfirmed, RegistrationIDs: regIDs("huge-", 3*releaseChunk)}
	due := append([]DueRelease{huge}, dueOf(4, 30)...)
	st := newReleaseStore(due...)
	st.failing["huge"] = 2
	st.failing["a02"] = 1
	svc := newReleaseService(t, st)

	n, err := svc.ReleaseDue(t.Context())
	assert.Equal(t, 3, n)
	require.Error(t, err)
	assert.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err))
	assert.Contains(t, err.Error(), "huge")
	assert.Contains(t, err.Error(), "a02")
	assert.Equal(t, []string{"a00", "a01", "a03"}, st.doneActivities())
	assert.Equal(t, 2, st.commands("huge"), "no chunk after the refused one")
}

// TestUnitReleaseDueEndsWithItsContext: when the pass's context ends
// while a transaction runs, the releases still queued are withdrawn and
// those waiting for room are never submitted: nothing more is written and
// nothing is recorded as done, so that the claims lapse and are taken
// again.
func TestUnitReleaseDueEndsWithItsContext(t *testing.T) {
	const size = releaseRows / 2
	due := dueOf(4, size)
	st := newReleaseStore(due...)
	entered, let := st.holdFirst()
	svc := newReleaseService(t, st)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := svc.ReleaseDue(ctx)
		res <- result{n, err}
	}()
	<-entered
	// One queued behind the first; the other two wait for room.
	require.Eventually(t, func() bool { return queued(svc, due) == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.Eventually(t, func() bool { return queued(svc, due) == 0 }, 10*time.Second, time.Millisecond, "the queued one is withdrawn")
	let()
	r := <-res
	assert.Zero(t, r.n)
	require.Error(t, r.err)
	assert.Equal(t, capacityd.EUnavailable, capacityd.ErrorCode(r.err))
	assert.Len(t, st.transactions(), 1, "only the transaction taken before the end")
	assert.Empty(t, st.doneActivities())
}

// TestUnitReleaseDoesNotStopOtherChanges: a release transaction runs on
// the releases' own lane, so a change of another activity commits while
// one is still in flight, rather than waiting behind its rows.
func TestUnitReleaseDoesNotStopOtherChanges(t *testing.T) {
	due := dueOf(1, releaseChunk)
	st := newReleaseStore(due...)
	entered, let := st.holdFirst()
	svc := newReleaseService(t, st)

	res := make(chan error, 1)
	go func() {
		_, err := svc.ReleaseDue(t.Context())
		res <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := svc.submit(ctx, "bystander", ConfirmCommand{RegistrationID: "bystander-r0001"})
	require.NoError(t, err, "the other activity's change committed while the release transaction was held")
	require.NoError(t, out.Err)
	assert.True(t, out.Changed)
	select {
	case err := <-res:
		t.Fatalf("the release ended (%v) before it was let go", err)
	default:
	}
	let()
	require.NoError(t, <-res)
	txs := st.transactions()
	require.Len(t, txs, 2)
	assert.Equal(t, "bystander", txs[1][0].ActivityID, "the bystander's transaction came while the release's was in flight")
}
