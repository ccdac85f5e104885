package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestPoolsRandomHistoryFromTwoStores runs a random history over six
// activities in one to three overlapping pools (strict and fill
// policies, parties of 1–3) from two stores (two instances): signups,
// cancellations, seat reductions, activity and pool capacity raises.
// While it runs, no pool or activity is ever over its capacity at the
// authority; no transaction fails (no lock timeout); and when it is quiet,
// no waiting registration fits all its limits (by its policy).
func TestPoolsRandomHistoryFromTwoStores(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	db := testenv.Pool(t, url, 4)
	stores := []*store.Store{store.New(testenv.Pool(t, url, 8)), store.New(testenv.Pool(t, url, 8))}
	ctx := context.Background()
	var pools []string
	for _, c := range []int{6, 8, 10} {
		pools = append(pools, createPool(t, stores[0], c))
	}
	memberships := [][]int{{0}, {0, 1}, {1}, {1, 2}, {0, 2}, {0, 1, 2}}
	var acts []string
	for i, m := range memberships {
		var ps []string
		for _, k := range m {
			ps = append(ps, pools[k])
		}
		policy := registration.PolicyStrict
		if i%2 == 1 {
			policy = registration.PolicyFill
		}
		a, err := stores[0].CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "pooled", Capacity: 3 + i,
			HoldSeconds: 900, Waitlist: true, MaxSeats: 3, Policy: policy, Pools: slices.Sorted(slices.Values(ps))})
		require.NoError(t, err)
		acts = append(acts, a.ID)
	}

	var mu sync.Mutex
	var regs []string // registrations made, to cancel or shrink
	stop := make(chan struct{})
	var checks sync.WaitGroup
	checks.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			requireWithinLimits(t, db)
		}
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			s := stores[g%2]
			for k := range 60 {
				var batch registration.CommandBatch
				switch op := rng.IntN(10); {
				case op < 5:
					c := signupOf(fmt.Sprintf("u%d-%d", g, k))
					c.Seats = 1 + rng.IntN(3)
					batch = registration.CommandBatch{ActivityID: acts[rng.IntN(len(acts))], Commands: []registration.Command{c}}
				case op < 8:
					mu.Lock()
					if len(regs) == 0 {
						mu.Unlock()
						continue
					}
					id := regs[rng.IntN(len(regs))]
					mu.Unlock()
					r, err := s.GetRegistrations(ctx, []string{id})
					require.NoError(t, err)
					var c registration.Command = cancelOf(id)
					if op == 7 && r[0].Seats > 1 {
						c = registration.SeatsCommand{Origin: registration.Origin{Actor: "admin:a"}, RegistrationID: id,
							Caller: registration.Caller{UserID: "a", Admin: true}, Seats: r[0].Seats - 1}
					}
					batch = registration.CommandBatch{ActivityID: r[0].ActivityID, Commands: []registration.Command{c}}
				case op == 8:
					a, err := s.GetActivity(ctx, acts[rng.IntN(len(acts))])
					require.NoError(t, err)
					raised := a.Capacity + 1
					batch = registration.CommandBatch{ActivityID: a.ID, Commands: []registration.Command{
						registration.ActivityCommand{Patch: registration.ActivityPatch{Capacity: &raised}}}}
				default:
					p, err := s.GetPool(ctx, pools[rng.IntN(len(pools))])
					require.NoError(t, err)
					raised := p.Capacity + 1
					batch = registration.CommandBatch{ActivityID: p.ID, Commands: []registration.Command{
						registration.PoolCommand{PoolID: p.ID, Patch: registration.PoolPatch{Capacity: &raised}}}}
				}
				applied, err := s.Apply(ctx, []registration.CommandBatch{batch}, time.Now())
				if !assertNoErr(t, err) {
					return
				}
				require.NoError(t, applied[0].Err)
				if o := applied[0].Plan.Outcomes[0]; o.Err == nil && o.Registration != nil {
					mu.Lock()
					regs = append(regs, o.Registration.ID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	requireNoFittingWaiter(t, db)
	// Then half the activities empty their lines and give up their
	// seats, many at once: what they free can only go to the lines of the
	// other activities of their pools.
	var occupying []string
	rows, err := db.Query(ctx, `SELECT r.public_id FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.status IN ('waitlisted', 'pending') AND a.public_id = ANY($1)
		ORDER BY r.status = 'pending', r.id`, []string{acts[0], acts[2], acts[4]})
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		occupying = append(occupying, id)
	}
	require.NoError(t, rows.Err())
	for g := range 4 {
		wg.Go(func() {
			for k := g; k < len(occupying); k += 4 {
				r, err := stores[g%2].GetRegistrations(ctx, []string{occupying[k]})
				require.NoError(t, err)
				_, err = stores[g%2].Apply(ctx, []registration.CommandBatch{{ActivityID: r[0].ActivityID,
					Commands: []registration.Command{cancelOf(occupying[k])}}}, time.Now())
				if !assertNoErr(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	checks.Wait()
	requireWithinLimits(t, db)
	requireNoFittingWaiter(t, db)
}

// requireWithinLimits checks, in one snapshot, that no activity and no
// pool holds more seats than its capacity.
func requireWithinLimits(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	var over int
	require.NoError(t, db.QueryRow(context.Background(), `
		WITH taken AS (
			SELECT a.id, a.capacity, (SELECT coalesce(sum(seats), 0) FROM registration r
				WHERE r.activity_id = a.id AND r.status IN ('pending', 'awaiting_payment', 'approved')) AS seats
			FROM activity a)
		SELECT (SELECT count(*) FROM taken WHERE seats > capacity)
			+ (SELECT count(*) FROM pool p WHERE p.capacity < (SELECT coalesce(sum(t.seats), 0) FROM activity_pool m
				JOIN taken t ON t.id = m.activity_id WHERE m.pool_id = p.id))`).Scan(&over))
	require.Zero(t, over, "an activity or pool holds more seats than its capacity")
}

// requireNoFittingWaiter checks that no waiting registration fits all its
// limits: under strict only the head of a line may be promoted, under
// fill any that fits.
func requireNoFittingWaiter(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	var fitting []string
	rows, err := db.Query(context.Background(), `
		WITH taken AS (
			SELECT a.id, a.capacity - (SELECT coalesce(sum(seats), 0) FROM registration r
				WHERE r.activity_id = a.id AND r.status IN ('pending', 'awaiting_payment', 'approved')) AS free
			FROM activity a),
		pool_free AS (
			SELECT p.id, p.capacity - (SELECT coalesce(sum(r.seats), 0) FROM activity_pool m JOIN registration r
				ON r.activity_id = m.activity_id AND r.status IN ('pending', 'awaiting_payment', 'approved')
				WHERE m.pool_id = p.id) AS free
			FROM pool p),
		line AS (
			SELECT r.public_id, r.activity_id, r.seats, a.waitlist_policy,
				row_number() OVER (PARTITION BY r.activity_id ORDER BY r.waitlist_seq) AS place
			FROM registration r JOIN activity a ON a.id = r.activity_id WHERE r.status = 'waitlisted')
		SELECT l.public_id FROM line l JOIN taken t ON t.id = l.activity_id
		WHERE (l.waitlist_policy = 'fill' OR l.place = 1) AND l.seats <= t.free
			AND l.seats <= ALL (SELECT f.free FROM activity_pool m JOIN pool_free f ON f.id = m.pool_id
				WHERE m.activity_id = l.activity_id)`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		fitting = append(fitting, id)
	}
	require.NoError(t, rows.Err())
	require.Empty(t, fitting, "waiting registrations that fit every limit")
}
