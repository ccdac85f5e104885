package capacity

import (
	"context"
	"log/slog"
	"time"

	"github.com/physiciansnet/capacityd/internal/loop"
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
// active activities and corrects drift that persists: seats held by
// signups that never finished (an instance that crashed), or a commit the
// counter missed. Run it with Run.
type Reconciler struct {
	c    *Counter
	prev map[string]driftSeen
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
// with no change to the activity seen here in between, is corrected to the
// authority. Signups in flight make a counter briefly higher than the
// authority; requiring the drift to persist across a quiet interval keeps
// their holds from being wiped.
func (r *Reconciler) Pass(ctx context.Context) {
	c := r.c
	if c.usable() != nil {
		return
	}
	active, forgotten := c.recent(reconcileWindow)
	for _, id := range forgotten {
		delete(r.prev, id)
	}
	for id, touched := range active {
		if ctx.Err() != nil {
			return
		}
		rd, ok, err := c.compare(ctx, id)
		if err != nil || !ok {
			delete(r.prev, id)
			if err != nil && c.usable() != nil {
				return
			}
			continue
		}
		drift := rd.display - rd.state.Taken
		seen := driftSeen{drift: drift, gen: rd.gen, touched: touched}
		if p, ok := r.prev[id]; ok && drift != 0 && p == seen && c.correct(ctx, id, rd.gen, rd.state) {
			delete(r.prev, id)
			continue
		}
		r.prev[id] = seen
	}
}
