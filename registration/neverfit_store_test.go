package registration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// gatedService is a service on a database of its own with the display
// tier's gate on Redis, as the app wires them.
func gatedService(t *testing.T) (*registration.Service, *capacity.Counter) {
	st := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	counter := capacity.New(capacity.Config{Redis: testenv.Redis(t), Authority: st, TTL: time.Minute})
	svc := registration.NewService(registration.Config{Store: st, Gate: counter,
		Observers: []registration.Observer{counter}})
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return svc, counter
}

// TestAPartyNoCapacityCanHoldIsRefusedAtTheAuthorityAndTheGate: capacity 3
// with max_seats_per_registration 10, on PostgreSQL and Redis: a party of
// 10 is refused as full with the seats left, first at the authority (no
// counter yet) and then at the gate, and 1-seat signups after it take
// seats while the line stays empty.
func TestAPartyNoCapacityCanHoldIsRefusedAtTheAuthorityAndTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, counter := gatedService(t)
	a, err := svc.CreateActivity(ctx, registration.NewActivity{Title: "small room", Capacity: 3, HoldSeconds: 600,
		Waitlist: true, MaxSeats: 10})
	require.NoError(t, err)
	signup := func(user string, seats int) (registration.Registration, error) {
		r, _, err := svc.Signup(ctx, registration.SignupInput{ActivityID: a.ID, Seats: seats, Metadata: []byte(`{}`),
			Caller: registration.Caller{UserID: user, RequestID: "req-" + user}})
		return r, err
	}
	for i := range 2 {
		_, err = signup(fmt.Sprintf("party%d", i), 10)
		require.Equal(t, capacityd.EActivityFull, capacityd.ErrorCode(err), "attempt %d", i)
		var e *capacityd.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, 3-i, *e.Remaining)
		r, err := signup(fmt.Sprintf("one%d", i), 1)
		require.NoError(t, err)
		require.Equal(t, registration.Pending, r.Status, "attempt %d: nobody waits in front", i)
	}
	seats, err := counter.Seats(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, 1, seats.Remaining)
	require.Equal(t, 0, seats.Waiting)
}

// TestAnActivityCannotOverfillAPoolByJoiningIt: on PostgreSQL, an activity
// whose taken seats exceed a pool's seats left is refused as full when it
// joins the pool, and the pool's numbers stay as they were.
func TestAnActivityCannotOverfillAPoolByJoiningIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _ := gatedService(t)
	pool, err := svc.CreatePool(ctx, registration.NewPool{Title: "hall", Capacity: 2})
	require.NoError(t, err)
	a, err := svc.CreateActivity(ctx, registration.NewActivity{Title: "talk", Capacity: 5, HoldSeconds: 600})
	require.NoError(t, err)
	for i := range 3 {
		_, _, err := svc.Signup(ctx, registration.SignupInput{ActivityID: a.ID, Metadata: []byte(`{}`),
			Caller: registration.Caller{UserID: fmt.Sprintf("u%d", i)}})
		require.NoError(t, err)
	}
	admin := registration.Caller{UserID: "root", Admin: true}
	_, err = svc.UpdateActivity(ctx, a.ID, registration.ActivityPatch{Pools: &[]string{pool.ID}}, admin)
	require.Equal(t, capacityd.EActivityFull, capacityd.ErrorCode(err))
	require.ErrorContains(t, err, "pool "+pool.ID+" has 2 seats left")
	got, err := svc.GetActivity(ctx, a.ID)
	require.NoError(t, err)
	require.Empty(t, got.Pools)
}
