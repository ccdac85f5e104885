package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

var ids atomic.Int64

// newID returns a fresh public id of the given prefix in the API's form.
func newID(prefix string) string {
	return fmt.Sprintf("%s_%026d", prefix, ids.Add(1))
}

func signupOf(user string) registration.SignupCommand {
	return registration.SignupCommand{Origin: registration.Origin{Actor: "user:" + user},
		RegistrationID: newID("r"), UserID: user, Metadata: []byte(`{}`)}
}

func createActivities(t *testing.T, s *store.Store, n, capacity int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		a, err := s.CreateActivity(context.Background(), newID("a"),
			registration.NewActivity{Title: fmt.Sprint("store ", i), Capacity: capacity, HoldSeconds: 900})
		require.NoError(t, err)
		out[i] = a.ID
	}
	return out
}

// TestApplyAcrossManyActivitiesFromTwoStoresIsExact: two stores (as two
// instances) apply batches of signups spread over 200 activities of 5
// seats, each batch many activities in random order. No deadlock, every
// activity exactly full, a refusal only where the activity was full.
func TestApplyAcrossManyActivitiesFromTwoStoresIsExact(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	stores := []*store.Store{store.New(testenv.Pool(t, url, 8)), store.New(testenv.Pool(t, url, 8))}
	acts := createActivities(t, stores[0], 200, 5)

	var admitted, refused sync.Map // activity → count
	add := func(m *sync.Map, id string) {
		v, _ := m.LoadOrStore(id, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var failures atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for k := range 20 {
				var batches []registration.CommandBatch
				for _, i := range rng.Perm(len(acts))[:12] {
					var cmds []registration.Command
					for j := range 2 {
						cmds = append(cmds, signupOf(fmt.Sprintf("w%d-%d-%d", w, k, j)))
					}
					batches = append(batches, registration.CommandBatch{ActivityID: acts[i], Commands: cmds})
				}
				applied, err := stores[w%2].Apply(context.Background(), batches, time.Now())
				if err != nil {
					failures.Add(1)
					t.Errorf("apply: %v", err)
					continue
				}
				for i, ap := range applied {
					require.NoError(t, ap.Err)
					for _, o := range ap.Plan.Outcomes {
						switch {
						case o.Err == nil:
							add(&admitted, batches[i].ActivityID)
						case capacityd.IsCode(o.Err, capacityd.EActivityFull):
							add(&refused, batches[i].ActivityID)
							require.Equal(t, 5, ap.Plan.Activity.Taken, "refused only when full")
						default:
							t.Errorf("unexpected outcome %v", o.Err)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failures.Load(), "no deadlock, no failure")
	for _, id := range acts {
		st, err := stores[0].SeatState(context.Background(), id)
		require.NoError(t, err)
		n := int64(0)
		if v, ok := admitted.Load(id); ok {
			n = v.(*atomic.Int64).Load()
		}
		require.Equal(t, int(n), st.Taken, "%s: every admission is a row", id)
		require.LessOrEqual(t, st.Taken, 5)
		if _, ok := refused.Load(id); ok {
			require.Equal(t, 5, st.Taken, "%s refused someone while not full", id)
		}
		require.Equal(t, int64(st.Taken), st.LastSeq, "one event per admission")
	}
}

// TestApplyCountsAgainWhenAnotherStoreChangedTheActivity: a store that
// knows an activity's counts at its last seq counts again once another
// store (instance) changed it.
func TestApplyCountsAgainWhenAnotherStoreChangedTheActivity(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	a, b := store.New(testenv.Pool(t, url, 2)), store.New(testenv.Pool(t, url, 2))
	id := createActivities(t, a, 1, 2)[0]
	ctx := context.Background()
	apply := func(s *store.Store, cmds ...registration.Command) registration.Plan {
		t.Helper()
		out, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: id, Commands: cmds}}, time.Now())
		require.NoError(t, err)
		require.NoError(t, out[0].Err)
		return out[0].Plan
	}
	u1, u2 := signupOf("u1"), signupOf("u2")
	p := apply(a, u1, u2)
	require.Equal(t, 2, p.Activity.Taken)
	require.Equal(t, capacityd.EActivityFull, capacityd.ErrorCode(apply(a, signupOf("u3")).Outcomes[0].Err))

	p = apply(b, registration.CancelCommand{RegistrationID: u1.RegistrationID, Caller: registration.Caller{UserID: "u1"}})
	require.Equal(t, 1, p.Activity.Taken)
	p = apply(a, signupOf("u4"))
	require.NoError(t, p.Outcomes[0].Err, "a counts again: the seat b freed is free")
	require.Equal(t, 2, p.Activity.Taken)
	require.Equal(t, int64(4), p.LastSeq)
}

// TestAFailedChangeTransactionWritesNothing: when one write of a change
// transaction fails, no activity of it changed: no rows, no events, no
// seq, and the store counts again afterwards.
func TestAFailedChangeTransactionWritesNothing(t *testing.T) {
	t.Parallel()
	pool := testenv.DB(t)
	s := store.New(pool)
	acts := createActivities(t, s, 2, 5)
	ctx := context.Background()
	good := signupOf("good")
	bad := signupOf("bad")
	bad.Metadata = []byte(`{not json`) // refused by the database, as only a bug could send it
	_, err := s.Apply(ctx, []registration.CommandBatch{
		{ActivityID: acts[0], Commands: []registration.Command{good}},
		{ActivityID: acts[1], Commands: []registration.Command{bad}},
	}, time.Now())
	require.Error(t, err)
	var rows, events, seqs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM registration), (SELECT count(*) FROM registration_event),
		(SELECT coalesce(sum(last_seq), 0) FROM activity_state)`).Scan(&rows, &events, &seqs))
	require.Equal(t, [3]int{0, 0, 0}, [3]int{rows, events, seqs})

	out, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: acts[0], Commands: []registration.Command{good}}}, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, out[0].Plan.Activity.Taken)
	require.Equal(t, int64(1), out[0].Plan.LastSeq)
}

func TestApplyRefusesAnUnknownActivityAlone(t *testing.T) {
	t.Parallel()
	s := store.New(testenv.DB(t))
	acts := createActivities(t, s, 1, 5)
	out, err := s.Apply(context.Background(), []registration.CommandBatch{
		{ActivityID: newID("a"), Commands: []registration.Command{signupOf("x")}},
		{ActivityID: acts[0], Commands: []registration.Command{signupOf("y")}},
	}, time.Now())
	require.NoError(t, err)
	require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(out[0].Err))
	require.NoError(t, out[1].Err)
	require.Equal(t, 1, out[1].Plan.Activity.Taken)
}

func TestCheckFullAnswersFromTheAuthority(t *testing.T) {
	t.Parallel()
	s := store.New(testenv.DB(t))
	acts := createActivities(t, s, 2, 1)
	ctx := context.Background()
	lined, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "store lined", Capacity: 1, HoldSeconds: 900, Waitlist: true})
	require.NoError(t, err)
	holder, seated, waiter := signupOf("holder"), signupOf("seated"), signupOf("waiter")
	_, err = s.Apply(ctx, []registration.CommandBatch{
		{ActivityID: acts[0], Commands: []registration.Command{holder}},
		{ActivityID: lined.ID, Commands: []registration.Command{seated, waiter}},
	}, time.Now())
	require.NoError(t, err)
	ans, err := s.CheckFull(ctx, []registration.FullCheck{
		{ActivityID: acts[0], UserIDs: []string{"holder", "other"}},
		{ActivityID: acts[1], UserIDs: []string{"holder"}},
		{ActivityID: lined.ID, UserIDs: []string{"waiter", "other"}},
	})
	require.NoError(t, err)
	require.Equal(t, registration.Counts{Capacity: 1, Taken: 1}, ans[0].Counts())
	require.Equal(t, registration.AdmitFull, registration.Admit(ans[0].Counts()))
	require.Equal(t, map[string]string{"holder": holder.RegistrationID}, ans[0].Holders)
	require.Equal(t, registration.Counts{Capacity: 1}, ans[1].Counts())
	require.Equal(t, registration.AdmitSeat, registration.Admit(ans[1].Counts()))
	require.Empty(t, ans[1].Holders)
	require.Equal(t, registration.Counts{Capacity: 1, Taken: 1, Waiting: 1, Waitlist: true}, ans[2].Counts())
	require.Equal(t, registration.AdmitWaitlist, registration.Admit(ans[2].Counts()))
	require.Equal(t, map[string]string{"waiter": waiter.RegistrationID}, ans[2].Holders, "one who waits holds a place too")
}

func TestClaimDueHoldsSkipsRowsOthersHold(t *testing.T) {
	t.Parallel()
	pool := testenv.DB(t)
	s := store.New(pool)
	act := createActivities(t, s, 1, 5)[0]
	ctx := context.Background()
	now := time.Now()
	var cmds []registration.Command
	var regs []string
	for i := range 3 {
		c := signupOf(fmt.Sprint("h", i))
		regs = append(regs, c.RegistrationID)
		cmds = append(cmds, c, registration.StatusCommand{RegistrationID: c.RegistrationID, To: registration.AwaitingPayment})
	}
	_, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: act, Commands: cmds}}, now.Add(-time.Hour))
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT 1 FROM registration WHERE public_id = $1 FOR UPDATE`, regs[0])
	require.NoError(t, err)
	due, err := s.ClaimDueHolds(ctx, now, 10)
	require.NoError(t, err)
	require.ElementsMatch(t, []registration.DueHold{{RegistrationID: regs[1], ActivityID: act}, {RegistrationID: regs[2], ActivityID: act}}, due)
}

// TestChangeTransactionsTakeLocksInIDOrder: while another session holds
// the lock of the middle of three activities, a change transaction over
// all three holds the lower one and waits, without having taken the
// higher one: locks are taken one by one in ascending order, so two
// transactions can wait for each other but never deadlock.
func TestChangeTransactionsTakeLocksInIDOrder(t *testing.T) {
	t.Parallel()
	pool := testenv.DB(t)
	s := store.New(pool)
	acts := createActivities(t, s, 3, 5)
	ctx := context.Background()
	var aids []int64
	for _, id := range acts {
		aids = append(aids, internalID(t, pool, id))
	}
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	// Should the test fail, the lock must not outlive it: the pool waits
	// for every connection when it closes.
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, int32(0x43415041), int32(aids[1]))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		var batches []registration.CommandBatch
		for _, i := range []int{2, 0, 1} { // any order in; id order at the database
			batches = append(batches, registration.CommandBatch{ActivityID: acts[i], Commands: []registration.Command{signupOf(fmt.Sprint("o", i))}})
		}
		_, err := s.Apply(ctx, batches, time.Now())
		done <- err
	}()
	held := func() map[int64]bool {
		// This test's database only: parallel tests have databases of
		// their own, with activities of the same ids.
		rows, err := pool.Query(ctx, `SELECT objid::bigint FROM pg_locks
			WHERE locktype = 'advisory' AND classid = $1 AND granted AND pid <> pg_backend_pid()
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, int64(0x43415041))
		require.NoError(t, err)
		out := map[int64]bool{}
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			out[id] = true
		}
		return out
	}
	require.Eventually(t, func() bool { return held()[aids[0]] }, 2*time.Second, 10*time.Millisecond, "the lowest lock is taken first")
	require.False(t, held()[aids[2]], "the highest lock waits for the middle one")
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-done)
}

// TestLockActivitySerializesWithChanges: a transaction that holds
// LockActivity makes the activity's change transactions wait until it
// ends, and their changes are made after it.
func TestLockActivitySerializesWithChanges(t *testing.T) {
	t.Parallel()
	pool := testenv.DB(t)
	s := store.New(pool)
	act := createActivities(t, s, 1, 5)[0]
	ctx := context.Background()
	aid := internalID(t, pool, act)

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	require.NoError(t, store.LockActivity(ctx, holder, aid))
	// What the holder writes directly: the activity's last seq, which the
	// change transaction must then read and continue from.
	_, err = holder.Exec(ctx, `INSERT INTO activity_state (activity_id, last_seq) VALUES ($1, 41)
		ON CONFLICT (activity_id) DO UPDATE SET last_seq = 41`, aid)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: act, Commands: []registration.Command{signupOf("waiter")}}}, time.Now())
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the change transaction did not wait for the lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, holder.Commit(ctx))
	require.NoError(t, <-done)
	var seq int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(seq) FROM registration_event WHERE activity_id = $1`, aid).Scan(&seq))
	require.EqualValues(t, 42, seq, "the change came after the holder's write and continued its seq")
}

// internalID returns the internal id of the activity publicID.
func internalID(t *testing.T, pool *pgxpool.Pool, publicID string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id FROM activity WHERE public_id = $1`, publicID).Scan(&id))
	return id
}

// TestReadmissionSeesTheUsersOtherPlace: re-admitting an expired
// registration is refused while its user holds another place of the
// activity, and allowed once that place is cancelled earlier in the same
// transaction: the change transaction reads the active registrations of
// the users whose registrations status changes name.
func TestReadmissionSeesTheUsersOtherPlace(t *testing.T) {
	t.Parallel()
	s := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	act := createActivities(t, s, 1, 5)[0]
	admin := registration.Origin{Actor: "admin:test"}
	now := time.Now()
	apply := func(at time.Time, cmds ...registration.Command) []registration.Outcome {
		t.Helper()
		applied, err := s.Apply(context.Background(), []registration.CommandBatch{{ActivityID: act, Commands: cmds}}, at)
		require.NoError(t, err)
		require.NoError(t, applied[0].Err)
		return applied[0].Plan.Outcomes
	}

	first := signupOf("u1")
	apply(now, first)
	apply(now, registration.StatusCommand{Origin: admin, RegistrationID: first.RegistrationID, To: registration.AwaitingPayment})
	out := apply(now.Add(time.Hour), registration.ExpireCommand{Origin: admin, RegistrationID: first.RegistrationID})
	require.Equal(t, registration.Expired, out[0].Registration.Status)
	again := signupOf("u1")
	apply(now.Add(time.Hour), again)

	readmit := registration.StatusCommand{Origin: admin, RegistrationID: first.RegistrationID, To: registration.Approved}
	out = apply(now.Add(time.Hour), readmit)
	require.Equal(t, string(capacityd.EAlreadyRegistered), capacityd.ErrorCode(out[0].Err), "%v", out[0].Err)

	cancel := registration.CancelCommand{Origin: admin, RegistrationID: again.RegistrationID, Caller: registration.Caller{Admin: true}}
	out = apply(now.Add(time.Hour), cancel, readmit)
	require.Equal(t, registration.Cancelled, out[0].Registration.Status)
	require.NoError(t, out[1].Err)
	require.Equal(t, registration.Approved, out[1].Registration.Status)
}
