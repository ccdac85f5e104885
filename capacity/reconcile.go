package capacity

import (
	"context"
	"strconv"
	"time"
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
// active activities and corrects drift that persists. Run it with Run.
type Reconciler struct {
	c    *Counter
	prev map[string]driftSeen
}

// NewReconciler returns a Reconciler of c's counters.
func NewReconciler(c *Counter) *Reconciler {
	return &Reconciler{c: c, prev: make(map[string]driftSeen)}
}

// Run reconciles every interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Pass(ctx)
		}
	}
}

// Pass runs one reconciliation. A counter whose difference from the
// authority is the same, in the same generation, as in the previous pass,
// with no change to the activity seen here in between, is corrected to the
// authority. In-flight signups make a counter briefly higher than the
// authority; requiring the drift to persist across a quiet interval keeps
// those holds from being wiped.
func (r *Reconciler) Pass(ctx context.Context) {
	c := r.c
	if c.rdb == nil {
		return
	}
	now := c.now()
	c.activeMu.Lock()
	active := make(map[string]time.Time, len(c.active))
	for id, at := range c.active {
		if now.Sub(at) > reconcileWindow {
			delete(c.active, id)
			delete(r.prev, id)
			c.metrics.drift.DeleteLabelValues(id)
			continue
		}
		active[id] = at
	}
	c.activeMu.Unlock()

	for id, touched := range active {
		if ctx.Err() != nil {
			return
		}
		v, err := c.rdb.HMGet(ctx, Key(id), "taken", "gen").Result()
		if err != nil {
			_ = c.redisError("reconcile", err)
			return
		}
		ts, ok1 := v[0].(string)
		gen, ok2 := v[1].(string)
		if !ok1 || !ok2 {
			delete(r.prev, id)
			continue
		}
		display, err := strconv.Atoi(ts)
		if err != nil {
			continue
		}
		_, taken, err := c.authority.SeatCount(ctx, id)
		if err != nil {
			continue
		}
		drift := display - taken
		c.metrics.drift.WithLabelValues(id).Set(float64(drift))
		seen := driftSeen{drift: drift, gen: gen, touched: touched}
		if p, ok := r.prev[id]; ok && drift != 0 && p == seen {
			if n, err := correctScript.Run(ctx, c.rdb, []string{Key(id)}, gen, taken).Int(); err == nil && n == 1 {
				c.metrics.corrections.Inc()
				c.log.Info("display counter corrected", "activity_id", id, "drift", drift)
				c.Changed(ctx, id)
				delete(r.prev, id)
				continue
			}
		}
		r.prev[id] = seen
	}
}
