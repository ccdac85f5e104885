package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
)

// mixActivity is one activity of a randomized mix, as the test drives it.
type mixActivity struct {
	id string
	mu sync.Mutex
	// regs are the registration ids the test has seen, by user.
	regs map[string][]string
	// maxCapacity is the highest capacity ever set.
	maxCapacity int
	// maxSeats is the most seats a registration may hold (parties when
	// above 1), policy the waiting-list policy.
	maxSeats int
	policy   string
}

func (m *mixActivity) remember(user, id string) {
	m.mu.Lock()
	m.regs[user] = append(m.regs[user], id)
	m.mu.Unlock()
}

func (m *mixActivity) any(rng *rand.Rand) (user, id string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.regs) == 0 {
		return "", "", false
	}
	users := make([]string, 0, len(m.regs))
	for u := range m.regs {
		users = append(users, u)
	}
	sort.Strings(users)
	user = users[rng.IntN(len(users))]
	ids := m.regs[user]
	return user, ids[rng.IntN(len(ids))], true
}

// TestRandomizedChangesKeepAnExactHistory runs a randomized mix of
// signups (many of them duplicates), cancellations, status changes,
// expiries on a fake clock, capacity changes and waiting-list toggles on
// four small activities of one seat per registration and two of parties
// of 1 to 4 (one strict, one fill, with seat reductions) from two
// instances, while Redis is flushed now and then; then checks, per
// activity, that the event history is gapless and replays to every
// registration's status and seats, that promotions followed the policy
// (strict: the head of the line), that the authority's counts match the
// rows and the capacity, that the line is quiet (strict: the head does
// not fit in what is free; fill: nobody waiting fits), and that the
// display converges to the authority.
func TestRandomizedChangesKeepAnExactHistory(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	rds := testenv.PrivateRedis(t)
	opts := app.Options{Now: clock.Now, ExpiryInterval: time.Hour, ReconcileInterval: time.Hour, Seats: capacity.Config{TTL: time.Second}}
	a := apptest.Start(t, apptest.Options{RedisURL: rds.URL(), App: opts})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, RedisURL: rds.URL(), App: opts})
	insts := []*apptest.Instance{a, b}
	ctx := t.Context()

	acts := make([]*mixActivity, 6)
	for i := range acts {
		in := client.NewActivity{Title: fmt.Sprint("mix ", i), Capacity: 3 + i, HoldSeconds: 60, Waitlist: i%2 == 0}
		if i >= 4 { // parties
			in.Waitlist, in.MaxSeatsPerRegistration, in.WaitlistPolicy = true, 4, []string{"strict", "fill"}[i-4]
		}
		act, err := a.API(t, "root", true).CreateActivity(ctx, in)
		require.NoError(t, err)
		acts[i] = &mixActivity{id: act.ID, regs: map[string][]string{}, maxCapacity: act.Capacity,
			maxSeats: act.MaxSeatsPerRegistration, policy: act.WaitlistPolicy}
	}

	stop := make(chan struct{})
	var background sync.WaitGroup
	var flushes, expiries atomic.Int64
	background.Go(func() { // Redis flushed now and then
		flusher := testenv.RedisClient(t, rds.URL())
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(40+rand.IntN(60)) * time.Millisecond):
			}
			if flusher.FlushAll(context.Background()).Err() == nil {
				flushes.Add(1)
			}
		}
	})
	background.Go(func() { // the clock runs; both instances expire holds
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
			clock.Advance(20 * time.Second)
			if n, err := insts[i%2].App.Registrations.ExpireDue(context.Background()); err == nil {
				expiries.Add(int64(n))
			}
		}
	})

	var ops, fivexx atomic.Int64
	var workers sync.WaitGroup
	for w := range 16 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 60 {
				inst := insts[rng.IntN(2)]
				act := acts[rng.IntN(len(acts))]
				var err error
				switch k := rng.IntN(20); {
				case k < 9: // signup, often a user who already has one
					user := fmt.Sprint("u", rng.IntN(14))
					var res client.SignupResult
					res, err = inst.Signup(t, act.id, user, client.SignupOptions{Seats: 1 + rng.IntN(act.maxSeats)})
					if err == nil {
						act.remember(user, res.Registration.ID)
					}
				case k < 13: // cancel, by the owner or an admin
					user, id, ok := act.any(rng)
					if !ok {
						continue
					}
					api := inst.API(t, user, false)
					if rng.IntN(3) == 0 {
						api = inst.API(t, "root", true)
					}
					_, err = api.CancelRegistration(ctx, id)
				case k < 15 && act.maxSeats > 1: // seats given back
					user, id, ok := act.any(rng)
					if !ok {
						continue
					}
					_, err = inst.API(t, user, false).ReduceSeats(ctx, id, 1+rng.IntN(2))
				case k < 18: // status change
					_, id, ok := act.any(rng)
					if !ok {
						continue
					}
					to := []client.Status{client.AwaitingPayment, client.Approved}[rng.IntN(2)]
					_, err = inst.API(t, "admin", true).SetRegistrationStatus(ctx, id, to)
				default: // capacity change, sometimes the list toggled
					patch := client.ActivityPatch{Capacity: new(1 + rng.IntN(7))}
					if rng.IntN(4) == 0 {
						patch.Waitlist = new(rng.IntN(2) == 0)
					}
					_, err = inst.API(t, "root", true).UpdateActivity(ctx, act.id, patch)
					act.mu.Lock()
					act.maxCapacity = max(act.maxCapacity, *patch.Capacity)
					act.mu.Unlock()
				}
				ops.Add(1)
				var e *client.Error
				switch {
				case errors.As(err, &e) && e.Status >= 500:
					fivexx.Add(1)
					t.Errorf("%v", e)
				case err != nil && e == nil:
					t.Errorf("no answer: %v", err)
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	background.Wait()
	t.Logf("%d operations, %d Redis flushes, %d holds expired", ops.Load(), flushes.Load(), expiries.Load())
	require.Zero(t, fivexx.Load())
	require.Positive(t, expiries.Load(), "the mix expired holds")

	pool := testenv.Pool(t, a.DatabaseURL, 2)
	var reductions, partiesPromoted int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE type = 'registration.seats_changed'),
		count(*) FILTER (WHERE type = 'registration.promoted' AND seats > 1)
		FROM registration_event`).Scan(&reductions, &partiesPromoted))
	t.Logf("%d seat reductions, %d parties promoted", reductions, partiesPromoted)
	require.Positive(t, reductions, "the mix gave seats back")
	require.Positive(t, partiesPromoted, "the mix promoted parties")
	for _, act := range acts {
		checkHistory(t, pool, act.id)
		got, err := a.Public().GetActivity(ctx, act.id)
		require.NoError(t, err)
		require.LessOrEqual(t, got.Taken, act.maxCapacity, "%s: never above the highest capacity", act.id)
		if got.Waiting > 0 && act.maxSeats == 1 {
			require.GreaterOrEqual(t, got.Taken, got.Capacity, "%s: someone waits while a seat is free: %+v", act.id, got)
		}
		checkQuiet(t, a, act, got)
		require.Eventually(t, func() bool {
			s, err := a.Public().Seats(ctx, act.id)
			require.NoError(t, err)
			return s.Taken == got.Taken && s.Waiting == got.Waiting && s.Capacity == got.Capacity
		}, 5*time.Second, 50*time.Millisecond, "%s: the display converges to the authority %+v", act.id, got)
	}
}

// checkHistory checks an activity's event history against its rows: seqs
// 1..N with no gap and last_seq N; every event's from is the status the
// replay had reached; the replay reproduces every row's status; every
// promotion took the first in line; the rows' counts are the authority's.
func checkHistory(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, activityID string) {
	t.Helper()
	ctx := context.Background()
	type ev struct {
		seq       int64
		reg, typ  string
		from      *string
		to        string
		seats     int
		seatsFrom *int
	}
	var policy string
	require.NoError(t, pool.QueryRow(ctx, `SELECT waitlist_policy FROM activity WHERE public_id = $1`, activityID).Scan(&policy))
	rows, err := pool.Query(ctx, `SELECT e.seq, e.registration_id, e.type, e.from_status, e.to_status, e.seats, e.seats_from
		FROM registration_event e JOIN activity a ON a.id = e.activity_id WHERE a.public_id = $1 ORDER BY e.seq`, activityID)
	require.NoError(t, err)
	var evs []ev
	for rows.Next() {
		var e ev
		require.NoError(t, rows.Scan(&e.seq, &e.reg, &e.typ, &e.from, &e.to, &e.seats, &e.seatsFrom))
		evs = append(evs, e)
	}
	require.NoError(t, rows.Err())
	var lastSeq int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(s.last_seq, 0) FROM activity a
		LEFT JOIN activity_state s ON s.activity_id = a.id WHERE a.public_id = $1`, activityID).Scan(&lastSeq))
	require.Equal(t, int64(len(evs)), lastSeq, "%s: last_seq is the number of events", activityID)

	status := map[string]string{}
	seats := map[string]int{}
	var queue []string
	for i, e := range evs {
		require.Equal(t, int64(i+1), e.seq, "%s: seqs are 1..N with no gap", activityID)
		prev, seen := status[e.reg]
		switch e.typ {
		case "registration.created", "registration.waitlisted":
			require.False(t, seen, "%s: %s created twice", activityID, e.reg)
			require.Nil(t, e.from)
		default:
			require.True(t, seen, "%s: event %d of %s before its creation", activityID, e.seq, e.reg)
			require.NotNil(t, e.from)
			require.Equal(t, prev, *e.from, "%s: event %d's from is the replayed status", activityID, e.seq)
		}
		if e.typ == "registration.seats_changed" {
			require.NotNil(t, e.seatsFrom, "%s: event %d says the seats before", activityID, e.seq)
			require.Equal(t, seats[e.reg], *e.seatsFrom, "%s: event %d's seats_from is the replayed seats", activityID, e.seq)
			require.Less(t, e.seats, *e.seatsFrom, "%s: seats are only given back", activityID)
			require.Equal(t, prev, e.to, "%s: a seat change keeps the status", activityID)
		} else if seen {
			require.Equal(t, seats[e.reg], e.seats, "%s: event %d keeps the replayed seats", activityID, e.seq)
		}
		seats[e.reg] = e.seats
		switch {
		case e.typ == "registration.waitlisted":
			queue = append(queue, e.reg)
		case e.typ == "registration.promoted":
			require.NotEmpty(t, queue, "%s: promotion %d with nobody in line", activityID, e.seq)
			k := slices.Index(queue, e.reg)
			require.GreaterOrEqual(t, k, 0, "%s: promotion %d of one not in line", activityID, e.seq)
			if policy == "strict" {
				require.Zero(t, k, "%s: promotion %d skipped the first in line", activityID, e.seq)
			}
			queue = slices.Delete(queue, k, k+1)
		case prev == "waitlisted" && e.to != "waitlisted":
			for k, q := range queue {
				if q == e.reg {
					queue = append(queue[:k:k], queue[k+1:]...)
				}
			}
		}
		status[e.reg] = e.to
	}

	rows, err = pool.Query(ctx, `SELECT r.public_id, r.status, r.seats FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE a.public_id = $1`, activityID)
	require.NoError(t, err)
	n, occupying, waitlisted := 0, 0, 0
	for rows.Next() {
		var id, st string
		var n0 int
		require.NoError(t, rows.Scan(&id, &st, &n0))
		require.Equal(t, st, status[id], "%s: replaying the events gives %s's status", activityID, id)
		require.Equal(t, n0, seats[id], "%s: replaying the events gives %s's seats", activityID, id)
		n++
		switch registration.Status(st) {
		case registration.Pending, registration.AwaitingPayment, registration.Approved:
			occupying += n0
		case registration.Waitlisted:
			waitlisted++
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(status), n, "%s: every registration has its events", activityID)
	require.Equal(t, waitlisted, len(queue), "%s: the replayed line is the waitlisted rows", activityID)
	var taken, waiting int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(r.seats), 0) FROM registration r WHERE r.activity_id = a.id AND r.status IN ('pending','awaiting_payment','approved')),
		(SELECT count(*) FROM registration r WHERE r.activity_id = a.id AND r.status = 'waitlisted')
		FROM activity a WHERE a.public_id = $1`, activityID).Scan(&taken, &waiting))
	require.Equal(t, occupying, taken)
	require.Equal(t, waitlisted, waiting)
}

// checkQuiet checks that an activity's line is quiet by its policy, as
// the authority's activity got says: strict, the head of the line asks
// for more seats than are free; fill, everyone waiting does.
func checkQuiet(t *testing.T, inst *apptest.Instance, act *mixActivity, got client.Activity) {
	t.Helper()
	page, err := inst.API(t, "root", true).ListRegistrations(t.Context(), act.id, client.RegistrationListOptions{Status: client.Waitlisted, Limit: 500})
	require.NoError(t, err)
	line := page.Items
	slices.SortFunc(line, func(x, y client.Registration) int { return *x.WaitlistPosition - *y.WaitlistPosition })
	free := got.Capacity - got.Taken
	for k, r := range line {
		if act.policy == "strict" && k > 0 {
			break
		}
		require.Greater(t, r.Seats, free, "%s (%s): %s waits for %d seats with %d free", act.id, act.policy, r.ID, r.Seats, free)
	}
}
