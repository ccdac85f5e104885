package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
)

// onCluster starts two instances on one database and a Redis Cluster,
// each with a cluster client of its own.
func onCluster(t *testing.T, opts app.Options) (*testenv.RedisCluster, *apptest.Instance, *apptest.Instance) {
	t.Helper()
	cluster := testenv.PrivateRedisCluster(t)
	a := apptest.Start(t, apptest.Options{Redis: cluster.Client(t), App: opts})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, Redis: cluster.Client(t), App: opts})
	return cluster, a, b
}

func TestSeatStreamOnARedisClusterCrossesInstancesWithinASecond(t *testing.T) {
	t.Parallel()
	cluster, a, b := onCluster(t, app.Options{})
	id := a.CreateActivity(t, "cluster stream", 50)
	c := openStream(t, b.URL, id)
	require.Equal(t, 0, c.Next(t, time.Second).seats(t).Taken)
	require.Eventually(t, b.App.Changes.Healthy, 5*time.Second, 10*time.Millisecond)

	// The stream spaces its events 100 ms apart, so a signup right after
	// the previous event may wait that long: within the second all the same.
	for i := 1; i <= 3; i++ {
		start := time.Now()
		a.MustSignup(t, id, fmt.Sprintf("u%d", i))
		ev := c.NextTaken(t, i, time.Second)
		t.Logf("signup %d through instance A reached B's stream in %s", i, ev.At.Sub(start))
	}
	// B listens on the activity's shard channel, on the master of the
	// activity's slot only.
	owner := cluster.MasterOf(t, capacity.Key(id))
	for _, n := range cluster.Nodes {
		chans, err := cluster.Node(t, n).PubSubShardChannels(context.Background(), "*").Result()
		require.NoError(t, err)
		if n == owner {
			require.Contains(t, chans, stream.ShardChannel(id))
		} else {
			require.NotContains(t, chans, stream.ShardChannel(id))
		}
	}
}

// TestRedisClusterFailoverMidBurst kills the master of a hot activity's
// slot during a signup burst: its replica takes over, nothing is
// oversold, the seat stream resumes and the display converges.
func TestRedisClusterFailoverMidBurst(t *testing.T) {
	t.Parallel()
	cluster, a, b := onCluster(t, app.Options{ReconcileInterval: 500 * time.Millisecond, Notifier: stream.NotifierConfig{RefreshInterval: 200 * time.Millisecond}})
	id := a.CreateActivity(t, "failover", 150)
	c := openStream(t, b.URL, id)
	require.Equal(t, 0, c.Next(t, time.Second).seats(t).Taken)
	master := cluster.MasterOf(t, capacity.Key(id))

	// The master dies once the burst has begun to commit.
	killed := make(chan time.Time, 1)
	go func() {
		a.WaitCommitted(id, 1)
		master.Kill()
		killed <- time.Now()
	}()
	counts := apptest.SignupBurst(t, []*apptest.Instance{a, b}, id, "w1-", 1200)
	ended := time.Now()
	require.True(t, (<-killed).Before(ended), "the master died before the burst ended")
	require.Zero(t, counts[-1]+counts[http.StatusInternalServerError]+counts[http.StatusServiceUnavailable], "%v", counts)
	taken := a.AuthorityTaken(t, id)
	require.Equal(t, counts[http.StatusCreated], taken, "every 201 is a row, every row a 201")
	require.LessOrEqual(t, taken, 150)

	cluster.WaitHealthy(t)
	require.NotEqual(t, master.Addr, cluster.MasterOf(t, capacity.Key(id)).Addr, "the replica took over")
	counts2 := apptest.SignupBurst(t, []*apptest.Instance{a, b}, id, "w2-", 300)
	require.Equal(t, 150, counts[http.StatusCreated]+counts2[http.StatusCreated])
	require.Equal(t, 150, a.AuthorityTaken(t, id))

	// The stream follows (through its timer while the shard subscription
	// moves, then through announcements), and the display converges.
	c.NextTaken(t, 150, 10*time.Second)
	require.Eventually(t, b.App.Changes.Healthy, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		for _, inst := range []*apptest.Instance{a, b} {
			s, err := inst.Public().Seats(t.Context(), id)
			require.NoError(t, err)
			if s.Source != registration.SourceCache || s.Taken != 150 {
				return false
			}
		}
		return a.DisplayTaken(t, id) == 150
	}, 15*time.Second, 50*time.Millisecond, "the display converges on the promoted replica")
	cancelOne(t, a, id)
	c.NextTaken(t, 149, time.Second)
}

// cancelOne cancels one registration of the activity as an admin.
func cancelOne(t *testing.T, inst *apptest.Instance, activityID string) {
	t.Helper()
	admin := inst.API(t, "admin", true)
	page, err := admin.ListRegistrations(t.Context(), activityID, client.RegistrationListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, page.Items)
	_, err = admin.CancelRegistration(t.Context(), page.Items[0].ID)
	require.NoError(t, err)
}
