package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

func createPool(t *testing.T, s *store.Store, capacity int) string {
	t.Helper()
	p, err := s.CreatePool(context.Background(), newID("p"), registration.NewPool{Title: "hall", Capacity: capacity})
	require.NoError(t, err)
	return p.ID
}

func createPooled(t *testing.T, s *store.Store, capacity int, waitlist bool, pools ...string) string {
	t.Helper()
	a, err := s.CreateActivity(context.Background(), newID("a"), registration.NewActivity{Title: "pooled", Capacity: capacity,
		HoldSeconds: 900, Waitlist: waitlist, Pools: pools})
	require.NoError(t, err)
	require.Equal(t, append([]string{}, pools...), a.Pools)
	return a.ID
}

// applyOne applies one batch and returns its first outcome.
func applyOne(t *testing.T, s *store.Store, id string, c registration.Command) (registration.Outcome, []registration.Applied) {
	t.Helper()
	applied, err := s.Apply(context.Background(), []registration.CommandBatch{{ActivityID: id, Commands: []registration.Command{c}}}, time.Now())
	require.NoError(t, err)
	require.NoError(t, applied[0].Err)
	return applied[0].Plan.Outcomes[0], applied
}

func cancelOf(id string) registration.CancelCommand {
	return registration.CancelCommand{Origin: registration.Origin{Actor: "admin:a"}, RegistrationID: id,
		Caller: registration.Caller{UserID: "a", Admin: true}}
}

// TestPoolPromotesTheOldestAcrossItsActivities: a pool of 2; A holds both;
// B1 (on B) waits, then A1 (on A), then B2 (on B). One A holder cancels →
// B1 at once; the other → A1; the pool raised to 3 → B2.
func TestPoolPromotesTheOldestAcrossItsActivities(t *testing.T) {
	t.Parallel()
	s := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	p := createPool(t, s, 2)
	a := createPooled(t, s, 10, true, p)
	b := createPooled(t, s, 10, true, p)
	var holders []string
	for i := range 2 {
		o, _ := applyOne(t, s, a, signupOf(fmt.Sprint("h", i)))
		require.Equal(t, registration.Pending, o.Registration.Status)
		holders = append(holders, o.Registration.ID)
	}
	wait := func(act, user string) string {
		o, _ := applyOne(t, s, act, signupOf(user))
		require.Equal(t, registration.Waitlisted, o.Registration.Status, user)
		return o.Registration.ID
	}
	b1, a1, b2 := wait(b, "b1"), wait(a, "a1"), wait(b, "b2")
	status := func(id string) registration.Status {
		rs, err := s.GetRegistrations(context.Background(), []string{id})
		require.NoError(t, err)
		return rs[0].Status
	}

	_, applied := applyOne(t, s, a, cancelOf(holders[0]))
	require.Equal(t, registration.Pending, status(b1), "B1 joined first")
	require.Equal(t, registration.Waitlisted, status(a1))
	require.Len(t, applied, 2, "B's promotion is reported as B's own plan")
	require.Equal(t, b, applied[1].Plan.Activity.ID)
	require.Equal(t, registration.EventPromoted, applied[1].Plan.Events[0].Type)

	applyOne(t, s, a, cancelOf(holders[1]))
	require.Equal(t, registration.Pending, status(a1))
	require.Equal(t, registration.Waitlisted, status(b2))

	three := 3
	o, _ := applyOne(t, s, p, registration.PoolCommand{PoolID: p, Patch: registration.PoolPatch{Capacity: &three}})
	require.Equal(t, 3, o.Pool.Taken)
	require.Equal(t, registration.Pending, status(b2))
	pool, err := s.GetPool(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, [3]int{3, 3, 0}, [3]int{pool.Capacity, pool.Taken, pool.Remaining})
	require.Equal(t, []string{a, b}, slices.Sorted(slices.Values(pool.Activities)))
}

// TestPoolIsNeverOversoldFromTwoStores: 240 signups over 3 activities of
// 20 in a pool of 30, from two stores (two instances) and many
// goroutines: exactly 30 admitted, no activity over 20.
func TestPoolIsNeverOversoldFromTwoStores(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	stores := []*store.Store{store.New(testenv.Pool(t, url, 8)), store.New(testenv.Pool(t, url, 8))}
	p := createPool(t, stores[0], 30)
	acts := []string{createPooled(t, stores[0], 20, false, p), createPooled(t, stores[0], 20, true, p), createPooled(t, stores[0], 20, false, p)}
	var admitted atomic.Int64
	per := make([]atomic.Int64, 3)
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Go(func() {
			for k := range 10 {
				i := (g + k) % 3
				applied, err := stores[g%2].Apply(context.Background(), []registration.CommandBatch{
					{ActivityID: acts[i], Commands: []registration.Command{signupOf(fmt.Sprintf("u%d-%d", g, k))}},
				}, time.Now())
				if !assertNoErr(t, err) {
					return
				}
				if o := applied[0].Plan.Outcomes[0]; o.Err == nil && o.Registration.Status == registration.Pending {
					admitted.Add(1)
					per[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 30, admitted.Load())
	pool, err := stores[1].GetPool(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, 30, pool.Taken)
	for i, id := range acts {
		a, err := stores[1].GetActivity(context.Background(), id)
		require.NoError(t, err)
		require.LessOrEqual(t, a.Taken, 20)
		require.EqualValues(t, per[i].Load(), a.Taken)
		require.Equal(t, 0, a.Remaining)
	}
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("apply: %v", err)
		return false
	}
	return true
}

// TestActivityLeavingAPoolPromotesAcrossIt: A and B share a pool of 2
// that A fills; B's line waits. A leaves the pool: its seats are no
// longer the pool's, and B's first in line takes them in the same
// transaction. Joining a pool that does not exist is refused.
func TestActivityLeavingAPoolPromotesAcrossIt(t *testing.T) {
	t.Parallel()
	s := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	p := createPool(t, s, 2)
	a := createPooled(t, s, 10, true, p)
	b := createPooled(t, s, 10, true, p)
	for i := range 2 {
		applyOne(t, s, a, signupOf(fmt.Sprint("h", i)))
	}
	o, _ := applyOne(t, s, b, signupOf("b1"))
	require.Equal(t, registration.Waitlisted, o.Registration.Status)

	missing := []string{p, newID("p")}
	o, _ = applyOne(t, s, a, registration.ActivityCommand{Patch: registration.ActivityPatch{Pools: &missing}})
	require.ErrorContains(t, o.Err, "pools not found")

	none := []string{}
	o, applied := applyOne(t, s, a, registration.ActivityCommand{Patch: registration.ActivityPatch{Pools: &none}})
	require.NoError(t, o.Err)
	require.Empty(t, o.Activity.Pools)
	require.Len(t, applied, 2)
	require.Equal(t, b, applied[1].Plan.Activity.ID)
	require.Equal(t, registration.Pending, applied[1].Plan.Updates[0].Status)
	pool, err := s.GetPool(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, []string{b}, pool.Activities)
	require.Equal(t, 1, pool.Taken)
}

// TestAStaleMembershipIsReadAgainUnderTheLocks: one store knows an
// activity in no pool; another puts it in a full pool. The first store's
// next signup on it is refused by the pool: the memberships read under
// the locks differ from its guess, so it locks the pool and runs again.
func TestAStaleMembershipIsReadAgainUnderTheLocks(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	s1, s2 := store.New(testenv.Pool(t, url, 4)), store.New(testenv.Pool(t, url, 4))
	p := createPool(t, s1, 1)
	b := createPooled(t, s1, 5, false, p)
	a := createPooled(t, s1, 5, false)
	o, _ := applyOne(t, s1, a, signupOf("first"))
	require.Equal(t, registration.Pending, o.Registration.Status)
	joined := []string{p}
	o, _ = applyOne(t, s2, a, registration.ActivityCommand{Patch: registration.ActivityPatch{Pools: &joined}})
	require.NoError(t, o.Err)
	require.Equal(t, joined, o.Activity.Pools)

	o, _ = applyOne(t, s1, a, signupOf("second"))
	require.ErrorContains(t, o.Err, "no seats left", "the pool holds 1 seat, taken by the first signup")
	o, _ = applyOne(t, s1, b, signupOf("third"))
	require.ErrorContains(t, o.Err, "no seats left")
}
