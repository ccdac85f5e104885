package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/history"
)

// createActivity creates an activity with a small capacity, with or
// without a waiting list, retrying on another node until one is created.
// In turn, one of one seat per registration, one that takes parties of up
// to maxParty seats with a strict waiting list, and one with a fill
// waiting list; those that take parties have a few more seats and mostly
// keep a waiting list. Most join one or two of the workload's pools; in
// turn, some join the workload's series, some get blocks, and some get
// a release rule (release.go).
func (w *workload) createActivity(rng *rand.Rand, worker int) (*activity, bool) {
	in := history.Input{Capacity: 2 + rng.IntN(2), Waitlist: rng.IntN(2) == 0, Users: users}
	n := w.created.Add(1)
	if kind := n % 3; kind > 0 {
		in.MaxSeats, in.Policy = maxParty, []string{"", "strict", "fill"}[kind]
		in.Capacity, in.Waitlist = 4+rng.IntN(3), rng.IntN(4) > 0
	}
	blocked := n%blockEvery == 2
	in.Pools = w.choosePools(rng, worker, n, blocked)
	if n%seriesEvery == 1 {
		if s := w.seriesToJoin(rng, worker); s != nil {
			in.Series = s.id
		}
	}
	rule, raceSeed := releaseRuleOf(n), rng.Uint64()
	if rule != noRelease {
		in.Waitlist = true // the released seats go to a line
	}
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		// Each attempt is an operation of its own: one without an answer
		// may have created an activity that no operation names.
		na := client.NewActivity{Title: "chaos", Capacity: in.Capacity, Waitlist: in.Waitlist, HoldSeconds: 86400,
			MaxSeatsPerRegistration: in.MaxSeats, WaitlistPolicy: in.Policy, Pools: in.Pools, SeriesID: in.Series}
		rule.schedule(rng, &na)
		out, ok := w.once(rng, worker, history.CreateActivity, in, func(ctx context.Context, base string) (history.Output, error) {
			a, err := client.New(base, w.admin, w.hc).CreateActivity(ctx, na)
			return history.Output{Status: http.StatusCreated, ID: a.ID, Capacity: a.Capacity, Waitlist: a.Waitlist}, err
		})
		if ok && out.Status == http.StatusCreated {
			a := &activity{id: out.ID, maxSeats: max(in.MaxSeats, 1), pools: in.Pools, series: in.Series, confirmBy: na.ConfirmBy}
			if na.StartsAt != nil {
				a.noShowsAt = na.StartsAt
			}
			if rule != noRelease {
				w.racers.Go(func() { w.race(a, raceSeed) })
			}
			if blocked {
				w.createBlocks(rng, worker, a)
			}
			w.mu.Lock()
			w.activities = append(w.activities, a)
			w.mu.Unlock()
			return a, true
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
	return nil, false
}

// choosePools picks the pools of the n-th activity: two distinct pools of
// the workload's, then one, none, one, in turn, so that the activities
// created before any fault already hold every shape; the activities with
// blocks (every blockEvery-th, which would always fall on the same turn)
// take turns of their own at one, two and none.
func (w *workload) choosePools(rng *rand.Rand, worker int, n int64, blocked bool) []string {
	count := []int{2, 1, 0, 1}[(n-1)%4]
	if blocked {
		count = []int{1, 2, 0}[(n/blockEvery)%3]
	}
	var ids []string
	for _, i := range rng.Perm(poolSlots)[:count] {
		ids = append(ids, w.poolIn(rng, worker, i).id)
	}
	return ids
}

// poolIn returns the pool of slot i for a new activity to join, replacing
// one that poolJoins activities joined already.
func (w *workload) poolIn(rng *rand.Rand, worker, i int) *pool {
	w.mu.Lock()
	p := w.pools[i]
	w.mu.Unlock()
	if p.joins.Add(1) > poolJoins && p.retiring.CompareAndSwap(false, true) {
		if q, ok := w.createPool(rng, worker); ok {
			q.joins.Add(1)
			w.mu.Lock()
			w.pools[i] = q
			w.mu.Unlock()
			return q
		}
		p.retiring.Store(false)
	}
	return p
}

// createPool creates a pool of 4 to 7 seats, fewer than its activities
// have together, retrying on another node until one is created.
func (w *workload) createPool(rng *rand.Rand, worker int) (*pool, bool) {
	in := history.Input{Capacity: 4 + rng.IntN(4)}
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		// Each attempt is an operation of its own, as for activities.
		out, ok := w.once(rng, worker, history.CreatePool, in, func(ctx context.Context, base string) (history.Output, error) {
			p, err := client.New(base, w.admin, w.hc).CreatePool(ctx, client.NewPool{Title: "chaos", Capacity: in.Capacity})
			return history.Output{Status: http.StatusCreated, ID: p.ID, Capacity: p.Capacity}, err
		})
		if ok && out.Status == http.StatusCreated {
			p := &pool{id: out.ID}
			w.mu.Lock()
			w.allPools = append(w.allPools, p)
			w.mu.Unlock()
			return p, true
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
	return nil, false
}

// seriesToJoin returns the series for a new activity to join, replacing
// one that seriesJoins activities joined already; nil when none could be
// created.
func (w *workload) seriesToJoin(rng *rand.Rand, worker int) *series {
	w.mu.Lock()
	s := w.series
	w.mu.Unlock()
	if s == nil || (s.joins.Add(1) > seriesJoins && s.retiring.CompareAndSwap(false, true)) {
		n, ok := w.createSeries(rng, worker)
		if !ok {
			if s != nil {
				s.retiring.Store(false)
			}
			return s
		}
		n.joins.Add(1)
		w.mu.Lock()
		w.series = n
		w.mu.Unlock()
		return n
	}
	return s
}

// createSeries creates a series allowing each user 1 or 2 active
// registrations (in turn), retrying on another node until one is created.
func (w *workload) createSeries(rng *rand.Rand, worker int) (*series, bool) {
	w.mu.Lock()
	in := history.Input{MaxPerUser: 1 + w.seriesMade%2}
	w.seriesMade++
	w.mu.Unlock()
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		// Each attempt is an operation of its own, as for activities.
		out, ok := w.once(rng, worker, history.CreateSeries, in, func(ctx context.Context, base string) (history.Output, error) {
			s, err := client.New(base, w.admin, w.hc).CreateSeries(ctx, client.NewSeries{Title: "chaos", MaxPerUser: in.MaxPerUser})
			return history.Output{Status: http.StatusCreated, ID: s.ID}, err
		})
		if ok && out.Status == http.StatusCreated {
			return &series{id: out.ID}, true
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
	return nil, false
}

// createBlocks gives a new activity (before any signup) its blocks, in
// turn: both one for a code of its own and one for blockRole (so that the
// first, made before any fault, has every kind), the code's only, or the
// role's only; the older of two is picked by rng (a signup with the code
// and the role takes the older's seats while it has room).
func (w *workload) createBlocks(rng *rand.Rand, worker int, a *activity) {
	w.mu.Lock()
	w.blocked++
	n := w.blocked
	w.mu.Unlock()
	if n%3 != 0 {
		a.code = fmt.Sprintf("chaos-%s-%d", w.run, n)
	}
	if n%3 != 2 {
		a.role = blockRole
	}
	audiences := []history.Input{{Code: a.code}, {Role: a.role}}
	if rng.IntN(2) == 0 {
		slices.Reverse(audiences)
	}
	for _, in := range audiences {
		if in.Code != "" || in.Role != "" {
			w.createBlock(rng, worker, a, in)
		}
	}
}

// createBlock holds 1 or 2 seats of a's for aud's code or role, retrying
// on another node until one is created: each attempt an operation of its
// own, since one without an answer may have made a block of the same
// audience, which the model allows.
func (w *workload) createBlock(rng *rand.Rand, worker int, a *activity, aud history.Input) {
	in := history.Input{Key: a.id, Seats: 1 + rng.IntN(2), Code: aud.Code, Role: aud.Role}
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		out, ok := w.once(rng, worker, history.CreateBlock, in, func(ctx context.Context, base string) (history.Output, error) {
			b, err := client.New(base, w.admin, w.hc).CreateBlock(ctx, a.id, client.NewBlock{Seats: in.Seats, Code: in.Code, Role: in.Role})
			return history.Output{Status: http.StatusCreated, ID: b.ID, Seats: b.Seats}, err
		})
		if ok {
			if out.Status == http.StatusCreated {
				a.blockMade(out.ID)
			}
			return
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
}

// deleteBlock deletes a's block, retried until answered (a retry may find
// it gone by the hand of an attempt without an answer).
func (w *workload) deleteBlock(rng *rand.Rand, worker int, a *activity, id string) {
	in := history.Input{Key: a.id, Block: id}
	out, ok := w.retried(rng, worker, history.DeleteBlock, in, func(ctx context.Context, base string) (history.Output, error) {
		return history.Output{Status: http.StatusNoContent}, client.New(base, w.admin, w.hc).DeleteBlock(ctx, id)
	})
	if ok && (out.Status == http.StatusNoContent || out.Status == http.StatusNotFound) {
		a.blockGone(id)
	}
}

// pickActivity returns a live activity, replacing one that has served
// its share of operations.
func (w *workload) pickActivity(rng *rand.Rand, worker int) *activity {
	w.mu.Lock()
	i := rng.IntN(len(w.slots))
	a := w.slots[i]
	w.mu.Unlock()
	if a.ops.Add(1) > w.opsPer && a.retiring.CompareAndSwap(false, true) {
		if b, ok := w.createActivity(rng, worker); ok {
			w.mu.Lock()
			w.slots[i] = b
			w.mu.Unlock()
			return b
		}
		a.retiring.Store(false)
	}
	return a
}

// pickNote returns a live note, replacing one that has served its share.
func (w *workload) pickNote(rng *rand.Rand) *note {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := rng.IntN(len(w.notes))
	if w.notes[i].ops.Add(1) > w.opsPer {
		w.nextNote++
		w.notes[i] = &note{id: fmt.Sprintf("chaos-%s-%d", w.run, w.nextNote)}
	}
	return w.notes[i]
}
