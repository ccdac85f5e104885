package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestHoldsOfAKilledInstanceLeaveTheDisplayAtTheirDeadline SIGKILLs an
// instance while its signups hold seats in the display counter (they wait
// for the activity's admission lock, held by the test): within the request
// timeout and a second the display, read from Redis and through the
// other instance's public read, equals the authority again, and never
// shows more taken than capacity.
func TestHoldsOfAKilledInstanceLeaveTheDisplayAtTheirDeadline(t *testing.T) {
	t.Parallel()
	const requestTimeout = 2 * time.Second
	const capacitySeats, waiting = 6, 4
	db := testenv.NewDatabase(t)
	other := apptest.Start(t, apptest.Options{DatabaseURL: db})
	id := other.CreateActivity(t, "dead holds", capacitySeats)
	other.MustSignup(t, id, "before")
	doomed := apptest.StartProcess(t, db, testenv.RedisURL(), "REQUEST_TIMEOUT="+requestTimeout.String())

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var internalID int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM activity WHERE public_id = $1`, id).Scan(&internalID))
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1::int4, $2::int4)`, int32(admissionLockNamespace), int32(internalID))
	require.NoError(t, err)
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			_, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1::int4, $2::int4)`, int32(admissionLockNamespace), int32(internalID))
			require.NoError(t, err)
		}
	}
	defer unlock()

	// The display read straight from Redis (no memory, no authority).
	authority := store.New(testenv.Pool(t, db, 2))
	display := capacity.New(capacity.Config{Redis: testenv.Redis(t), Authority: authority, TTL: time.Minute})
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Go(func() {
			_, _ = apptest.Do(http.MethodPost, doomed.URL+"/v1/activities/"+id+"/registrations",
				doomed.Token(t, fmt.Sprintf("doomed-%d", i), false), `{}`)
		})
	}
	require.Eventually(t, func() bool {
		s, ok := display.CachedSeats(ctx, id)
		return ok && s.Taken == 1+waiting
	}, 10*time.Second, 5*time.Millisecond, "the doomed instance's signups hold their seats")
	doomed.Signal(t, syscall.SIGKILL)
	killed := time.Now()
	wg.Wait()
	unlock()

	want, err := authority.SeatState(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, want.Taken, "the killed instance committed nothing")
	// The wait's condition runs in a goroutine of its own: it records what
	// breaks the display's invariants, checked after the wait.
	var lost, over atomic.Bool
	converged := func() bool {
		s, ok := display.CachedSeats(ctx, id)
		if !ok {
			lost.Store(true)
			return true
		}
		if s.Taken > capacitySeats {
			over.Store(true)
			return true
		}
		r, err := apptest.Do(http.MethodGet, other.URL+"/v1/activities/"+id+"/seats", "", nil)
		var pub registration.Seats
		if err != nil || r.Status != http.StatusOK || json.Unmarshal(r.Body, &pub) != nil {
			return false
		}
		return s.Taken == want.Taken && s.Remaining == want.Remaining() &&
			pub.Taken == want.Taken && pub.Remaining == want.Remaining()
	}
	require.Eventually(t, converged, requestTimeout+time.Second-time.Since(killed), 20*time.Millisecond,
		"the display equals the authority within the request timeout and a second of the kill")
	require.False(t, lost.Load(), "the counter is still there")
	require.False(t, over.Load(), "holds never show more taken than capacity")
	t.Logf("display equal to the authority %v after the kill", time.Since(killed).Round(time.Millisecond))
}
