package testenv_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestAutoFailoverPromotesTheStandby kills the primary of a formation: the
// standby takes over with every synchronously committed row, the old
// primary rejoins as its standby, and a planned switchover gives the
// primary back. make test-ha runs it (TEST_HA=1): make test's failover
// test is in internal/test/hatest.
func TestAutoFailoverPromotesTheStandby(t *testing.T) {
	if os.Getenv("TEST_HA") == "" {
		t.Skip("make test-ha runs the formation's own tests (TEST_HA=1)")
	}
	f := testenv.PrivateAutoFailover(t, testenv.AutoFailoverOptions{})
	ctx := context.Background()
	pool := testenv.Pool(t, f.URL(), 2)
	_, err := pool.Exec(ctx, `CREATE TABLE kept (n int)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO kept VALUES (1)`)
	require.NoError(t, err)

	killed := f.KillPrimary(t)
	start := time.Now()
	require.Eventually(t, func() bool {
		_, err := pool.Exec(ctx, `INSERT INTO kept VALUES (2)`)
		return err == nil
	}, 60*time.Second, 100*time.Millisecond, "the standby takes writes")
	t.Logf("writes again %s after the primary's SIGKILL", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 1-killed, f.Primary())
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n))
	require.Equal(t, 2, n, "the committed row survived")

	f.StartNode(t, killed)
	f.WaitHealthy(t, 90*time.Second)
	f.Switchover(t)
	require.Equal(t, killed, f.Primary(), "the switchover gave the primary back")
}
