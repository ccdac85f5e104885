package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestReconcilerCorrectsPersistentDriftOnly(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{ReconcileInterval: time.Hour}})
	id := inst.CreateActivity(t, "drift", 10)
	signupBurst(t, []*apptest.Instance{inst}, id, "u", 3)
	ctx := context.Background()
	r := capacity.NewReconciler(inst.App.Seats)

	// Drift appears (seats held by signups of an instance that crashed);
	// one pass only observes it.
	require.NoError(t, inst.App.Redis.HSet(ctx, capacity.Key(id), "held", 4).Err())
	r.Pass(ctx)
	require.Equal(t, 7, displayTaken(t, inst, id))

	// A change between passes (a signup in flight) defers the correction.
	signupBurst(t, []*apptest.Instance{inst}, id, "v", 1)
	r.Pass(ctx)
	require.Equal(t, 8, displayTaken(t, inst, id))

	// The same drift over a quiet interval is corrected to the authority.
	r.Pass(ctx)
	require.Equal(t, 4, displayTaken(t, inst, id))
	require.Equal(t, 4, inst.AuthorityTaken(t, id))
	metrics := string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	require.Contains(t, metrics, "capacityd_seat_cache_corrections_total 1")
	require.Contains(t, metrics, `capacityd_seat_cache_drift{activity_id="`+id+`"} 4`)
}
