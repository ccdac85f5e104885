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
