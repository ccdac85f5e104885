package capacity

import (
	"context"
	"log/slog"
	"time"

	"github.com/physiciansnet/capacityd/internal/loop"
	"github.com/physiciansnet/capacityd/registration"
)

// reconcileWindow is how long after its last change an activity is still
// reconciled.
const reconcileWindow = 10 * time.Minute

type driftSeen struct {
	drift   int
	gen     string
	touched time.Time
}

// Reconciler compares display counters with the authority for recently
// active activities and pools and corrects drift that persists: seats held
// by signups that never finished (an instance that crashed), or a commit
// the counter missed. Run it with Run.
type Reconciler struct {
	c    *Counter
	prev map[string]driftSeen // by activity or pool id
}

// NewReconciler returns a Reconciler of c's counters.
func NewReconciler(c *Counter) *Reconciler {
	return &Reconciler{c: c, prev: make(map[string]driftSeen)}
}

// Run reconciles every interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context, every time.Duration, log *slog.Logger) {
	loop.Every(ctx, every, log, "reconcile display counters", func(ctx context.Context) error {
		r.Pass(ctx)
		return nil
	})
}

// Pass runs one reconciliation. A counter whose difference from the
// authority is the same, in the same generation, as in the previous pass,
// with no change to the activity (or pool) seen here in between, is
// corrected to the authority. Signups in flight make a counter briefly
// higher than the authority; requiring the drift to persist across a quiet
// interval keeps their holds from being wiped. Pools' counters are
// reconciled like activities' (activity and pool ids never collide: a_…
// and p_…).
func (r *Reconciler) Pass(ctx context.Context) {
	c := r.c
	if c.usable() != nil {
		return
	}
	active, pools, forgotten := c.recent(reconcileWindow)
	for _, id := range forgotten {
		delete(r.prev, id)
	}
	if !r.reconcile(ctx, active, c.compare) {
		return
	}
	r.reconcile(ctx, pools, c.comparePool)
}

// reconcile reconciles the counters of ids with compare; it reports false
// when the pass must stop (ctx ended, or the display tier failed).
func (r *Reconciler) reconcile(ctx context.Context, ids map[string]time.Time,
	compare func(context.Context, string) (reading, bool, error),
) bool {
	c := r.c
	for id, touched := range ids {
		if ctx.Err() != nil {
			return false
		}
		rd, ok, err := compare(ctx, id)
		if err != nil || !ok {
			delete(r.prev, id)
			if err != nil && c.usable() != nil {
				return false
			}
			continue
		}
		drift := rd.display - rd.taken
		seen := driftSeen{drift: drift, gen: rd.gen, touched: touched}
		if p, ok := r.prev[id]; ok && drift != 0 && p == seen && rd.correct(ctx) {
			delete(r.prev, id)
			continue
		}
		r.prev[id] = seen
	}
	return true
}

// touch records a change of the activity through this instance, for the
// reconciler (recent).
func (c *Counter) touch(activityID string) {
	c.activeMu.Lock()
	c.active[activityID] = c.now()
	c.activeMu.Unlock()
}

// touchPool records a change of the pool through this instance, for the
// reconciler (recent).
func (c *Counter) touchPool(poolID string) {
	c.activeMu.Lock()
	c.activePools[poolID] = c.now()
	c.activeMu.Unlock()
}

// recent returns the activities and the pools changed through this
// instance within window, with the time of their last change, and forgets
// older ones (and their drift).
func (c *Counter) recent(window time.Duration) (active, pools map[string]time.Time, forgotten []string) {
	now := c.now()
	c.activeMu.Lock()
	defer c.activeMu.Unlock()
	active = make(map[string]time.Time, len(c.active))
	for id, at := range c.active {
		if now.Sub(at) > window {
			delete(c.active, id)
			c.metrics.drift.DeleteLabelValues(id)
			forgotten = append(forgotten, id)
			continue
		}
		active[id] = at
	}
	pools = make(map[string]time.Time, len(c.activePools))
	for id, at := range c.activePools {
		if now.Sub(at) > window {
			delete(c.activePools, id)
			forgotten = append(forgotten, id)
			continue
		}
		pools[id] = at
	}
	return active, pools, forgotten
}

// reading is one read of a counter next to the authority.
type reading struct {
	display int // taken + held + reserved
	gen     string
	taken   int // taken + reserved at the authority
	// correct resets the counter, if still of generation gen, to the
	// authority's state read; it reports whether it did.
	correct func(ctx context.Context) bool
}

// readDisplay reads a counter's taken + held + reserved (the seats not
// free to the public) and generation; ok is false when there is no
// counter.
func (c *Counter) readDisplay(ctx context.Context, key string) (display int, gen string, ok bool, err error) {
	v, err := c.readFields(ctx, key, "taken", "held", "gen", "reserved")
	if err != nil {
		return 0, "", false, c.redisError("reconcile", err)
	}
	n, ok := parseInts(v[:2])
	gen, _ = v[2].(string)
	if !ok || gen == "" {
		return 0, "", false, nil
	}
	return n[0] + n[1] + optionalInt(v[3]), gen, true, nil
}

// compare reads an activity's counter and then its state at the authority,
// and records their difference as the activity's drift; ok is false when
// there is no counter.
func (c *Counter) compare(ctx context.Context, activityID string) (r reading, ok bool, err error) {
	display, gen, ok, err := c.readDisplay(ctx, Key(activityID))
	if !ok || err != nil {
		return r, false, err
	}
	st, err := c.authority.SeatState(ctx, activityID)
	if err != nil {
		return r, false, err
	}
	r = reading{display: display, gen: gen, taken: st.Taken + st.Reserved,
		correct: func(ctx context.Context) bool { return c.correct(ctx, activityID, gen, st) }}
	c.metrics.drift.WithLabelValues(activityID).Set(float64(r.display - r.taken))
	return r, true, nil
}

// correct resets an activity's counter of generation gen to the
// authority's state, and announces the change. It reports whether the
// counter was still of that generation.
func (c *Counter) correct(ctx context.Context, activityID, gen string, st registration.SeatState) bool {
	n, err := correctScript.Run(ctx, c.rdb, keys(Key(activityID)), gen, st.Taken, st.Waiting, st.LastSeq, st.Reserved).Int()
	if err != nil || n != 1 {
		return false
	}
	c.metrics.corrections.Inc()
	c.log.Info("display counter corrected", "activity_id", activityID)
	c.announce(ctx, activityID)
	return true
}

// comparePool reads a pool's counter and then its state at the authority;
// ok is false when there is no counter.
func (c *Counter) comparePool(ctx context.Context, poolID string) (r reading, ok bool, err error) {
	display, gen, ok, err := c.readDisplay(ctx, PoolKey(poolID))
	if !ok || err != nil {
		return r, false, err
	}
	st, err := c.authority.PoolSeatState(ctx, poolID)
	if err != nil {
		return r, false, err
	}
	return reading{display: display, gen: gen, taken: st.Taken + st.Reserved,
		correct: func(ctx context.Context) bool { return c.correctPool(ctx, gen, st) }}, true, nil
}

// correctPool resets a pool's counter of generation gen to the authority's
// state, unless a newer commit reached it, and announces the change to
// the streams of its activities. It reports whether it corrected.
func (c *Counter) correctPool(ctx context.Context, gen string, st registration.PoolSeatState) bool {
	n, err := poolCorrectScript.Run(ctx, c.rdb, keys(PoolKey(st.PoolID)), gen, st.Taken, st.LastSeq, st.Reserved).Int()
	if err != nil || n != 1 {
		return false
	}
	c.metrics.corrections.Inc()
	c.log.Info("display counter corrected", "pool_id", st.PoolID)
	for _, id := range st.Activities {
		c.announce(ctx, id)
	}
	return true
}
