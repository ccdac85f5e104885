package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

func TestRedisClusterFailsOverToAReplica(t *testing.T) {
	t.Parallel()
	c := testenv.PrivateRedisCluster(t)
	cc := c.Client(t)
	ctx := context.Background()
	require.NoError(t, cc.Set(ctx, "seats:{a}", "1", 0).Err())
	// Replication is asynchronous: wait for the replica to have the key.
	owner, err := cc.MasterForKey(ctx, "seats:{a}")
	require.NoError(t, err)
	require.EqualValues(t, 1, owner.Wait(ctx, 1, 5*time.Second).Val())
	master := c.MasterOf(t, "seats:{a}")
	master.Kill()
	c.WaitHealthy(t)
	require.NotEqual(t, master.Addr, c.MasterOf(t, "seats:{a}").Addr, "a replica took over")
	require.Eventually(t, func() bool { return cc.Get(ctx, "seats:{a}").Val() == "1" }, 10*time.Second, 100*time.Millisecond, "the client finds the promoted replica")
	master.Start(t)
	c.WaitHealthy(t)
}
