package registration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pacedStore is a releaseStore whose transactions take took each and
// are timed, and which knows the next release moment (next: zero, none)
// and when its due releases were claimed.
type pacedStore struct {
	*releaseStore
	took time.Duration

	tmu    sync.Mutex
	spans  [][2]time.Time
	next   time.Time
	claims []time.Time
}

// Apply is the releaseStore's, taking took.
func (s *pacedStore) Apply(ctx context.Context, batches []CommandBatch, now time.Time) ([]Applied, error) {
	began := time.Now()
	// Kept: it stands for the change transaction's own time, not a wait
	// for anything; the pacing under test is measured against it.
	time.Sleep(s.took)
	out, err := s.releaseStore.Apply(ctx, batches, now)
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.spans = append(s.spans, [2]time.Time{began, time.Now()})
	return out, err
}

// ClaimDueReleases is the releaseStore's, timed.
func (s *pacedStore) ClaimDueReleases(ctx context.Context, now time.Time, limit int) ([]DueRelease, error) {
	s.tmu.Lock()
	s.claims = append(s.claims, time.Now())
	s.tmu.Unlock()
	return s.releaseStore.ClaimDueReleases(ctx, now, limit)
}

// NextDueRelease returns next when it is after after and no later than
// until.
func (s *pacedStore) NextDueRelease(_ context.Context, after, until time.Time) (time.Time, bool, error) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if s.next.After(after) && !s.next.After(until) {
		return s.next, true, nil
	}
	return time.Time{}, false, nil
}

func newPacedService(t *testing.T, st *pacedStore) *Service {
	t.Helper()
	svc := NewService(Config{Store: st})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, svc.Close(ctx))
	})
	return svc
}

// TestUnitReleaseDueYieldsBetweenItsTransactions: once a release command
// is answered, the room it took in releaseRows stays taken for
// releaseYield times as long as the command took, so that the next
// release transaction leaves the change path to other work meanwhile.
func TestUnitReleaseDueYieldsBetweenItsTransactions(t *testing.T) {
	const took = 20 * time.Millisecond
	st := &pacedStore{releaseStore: newReleaseStore(dueOf(3, releaseRows)...), took: took}
	svc := newPacedService(t, st)

	n, err := svc.ReleaseDue(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	st.tmu.Lock()
	spans := st.spans
	st.tmu.Unlock()
	require.Len(t, spans, 3, "one transaction each: each fills releaseRows")
	for i := 1; i < len(spans); i++ {
		gap := spans[i][0].Sub(spans[i-1][1])
		assert.GreaterOrEqual(t, gap, releaseYield*took-5*time.Millisecond, "transaction %d yielded after the one before", i)
		assert.Less(t, gap, releaseYieldMax+time.Second, "but not for long")
	}
}

// TestUnitRunReleasesWakesAtTheNextMoment: the release loop claims at the
// next release moment the store knows of, not at its next interval.
func TestUnitRunReleasesWakesAtTheNextMoment(t *testing.T) {
	st := &pacedStore{releaseStore: newReleaseStore(dueOf(2, 3)...)}
	start := time.Now()
	st.next = start.Add(300 * time.Millisecond)
	svc := newPacedService(t, st)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunReleases(ctx, time.Hour)
	}()
	require.Eventually(t, func() bool { return len(st.doneActivities()) == 2 }, 10*time.Second, time.Millisecond,
		"released at the moment, an hour before the interval's pass")
	cancel()
	<-done
	st.tmu.Lock()
	defer st.tmu.Unlock()
	require.Len(t, st.claims, 1)
	assert.False(t, st.claims[0].Before(st.next), "not before the moment")
}

// TestUnitRunReleasesClaimsAgainAfterAFullPass: a pass that claimed as
// many activities as a pass may is followed by another at once.
func TestUnitRunReleasesClaimsAgainAfterAFullPass(t *testing.T) {
	st := &pacedStore{releaseStore: newReleaseStore(dueOf(dueReleaseClaim, 1)...)}
	svc := newPacedService(t, st)
	st.next = time.Now().Add(50 * time.Millisecond)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunReleases(ctx, time.Hour)
	}()
	require.Eventually(t, func() bool {
		st.tmu.Lock()
		defer st.tmu.Unlock()
		return len(st.claims) == 2
	}, 10*time.Second, time.Millisecond, "a second claim right after the full one")
	cancel()
	<-done
	assert.Len(t, st.doneActivities(), dueReleaseClaim)
}
