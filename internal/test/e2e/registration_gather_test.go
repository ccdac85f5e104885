package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// crowdOnOneActivity has clients each sign rounds users up, one after the
// other, for a new activity of the instance, and returns the commands per
// change transaction meanwhile.
func crowdOnOneActivity(t *testing.T, inst *apptest.Instance, clients, rounds int) float64 {
	t.Helper()
	id := inst.CreateActivity(t, "crowd", clients*rounds)
	before := string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	apis := make([][]*client.Client, clients)
	for c := range apis {
		for r := range rounds {
			apis[c] = append(apis[c], inst.API(t, fmt.Sprintf("crowd-%d-%d", c, r), false))
		}
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for _, api := range apis[c] {
				_, err := api.Signup(context.Background(), id, client.SignupOptions{})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	after := string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	delta := func(name string) float64 { return metricValue(t, after, name) - metricValue(t, before, name) }
	commands, txs := delta("capacityd_admission_batch_size_sum"), delta("capacityd_admission_batch_size_count")
	require.EqualValues(t, clients*rounds, commands)
	require.Equal(t, clients*rounds, inst.AuthorityTaken(t, id))
	return commands / txs
}

// TestACrowdOnOneActivityCommitsInBatchesNearItsSize: with one change
// transaction in flight per activity, the clients in a transaction are not
// queued for the next one, so batches of a crowd of N clients that wait
// for their answers stay near N/2. A gathering activity waits for the
// clients it answered: its batches grow past N/2. (The deadline is longer
// than the default here, for clients slowed down by the race detector.)
func TestACrowdOnOneActivityCommitsInBatchesNearItsSize(t *testing.T) {
	t.Parallel()
	const clients, rounds = 160, 12
	// A zero Change.GatherFor never gathers.
	plain := crowdOnOneActivity(t, apptest.Start(t, apptest.Options{}), clients, rounds)
	inst := apptest.Start(t, apptest.Options{App: app.Options{Change: registration.ChangeConfig{GatherFor: time.Second}}})
	gathered := crowdOnOneActivity(t, inst, clients, rounds)
	t.Logf("commands per change transaction: %.1f gathering, %.1f not", gathered, plain)
	require.Greater(t, gathered, float64(clients)/2)
	require.Greater(t, gathered, plain)
	metrics := string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	require.Positive(t, metricValue(t, metrics, `capacityd_admission_gathers_total{ended="filled"}`), "gathers that filled are counted")
}
