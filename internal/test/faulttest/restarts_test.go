package faulttest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// finishAfterRestart stops the load and checks what a restart of a part
// in the way may cost: requests that failed only with a transport error or
// a 503, signups all taken in the end (sent again with the same
// Idempotency-Key), each acknowledged signup one registration, and every
// acknowledged view counted (a view whose answer was lost may be counted
// too: the client saw an error, not an acknowledgement).
func (c *rollingCluster) finishAfterRestart(t *testing.T, rowsURL string) {
	t.Helper()
	load := c.load
	rows, dbViews := c.stop(t, rowsURL)
	t.Logf("signups %d (sent again by the client: %d), views %d acknowledged, %d counted, %d failed; seat reads %d, %d failed; failures seen: %v",
		load.signups.Load(), load.signupRetries.Load(), load.views.Load(), dbViews, load.viewFailures.Load(),
		load.reads.Load(), load.readFailures.Load(), load.failures)
	require.Zero(t, load.unexpected.Load(), "only transport errors and 503s: %v", load.failures)
	require.Positive(t, load.signups.Load())
	require.Zero(t, load.signupsGivenUp.Load(), "every signup succeeded, if need be sent again")
	require.EqualValues(t, load.signups.Load(), rows, "each acknowledged signup is one registration")
	require.GreaterOrEqual(t, dbViews, load.views.Load(), "no acknowledged view lost")
	require.LessOrEqual(t, dbViews, load.views.Load()+load.viewFailures.Load(), "no view counted that was not sent")
}

// restartMidLoad waits for the load to go on, runs restart, and waits for
// acknowledgements after it.
func (c *rollingCluster) restartMidLoad(t *testing.T, restart func()) {
	t.Helper()
	require.Eventually(t, func() bool { return c.acknowledged() > 10 }, 60*time.Second, 20*time.Millisecond,
		"the load goes on before the restart")
	restart()
	after := c.acknowledged()
	require.Eventually(t, func() bool { return c.acknowledged() > after+10 }, 60*time.Second, 20*time.Millisecond,
		"the load goes on after the restart")
}

// TestHAProxyRestartedMidLoadLosesNothing kills HAProxy (SIGKILL) in front
// of three instances under signups, note views and seat reads, and starts
// it again: clients see connection errors (or the proxy's 503 while it
// checks the instances anew), their signups sent again with the same
// Idempotency-Key are taken once, and nothing acknowledged is lost.
func TestHAProxyRestartedMidLoadLosesNothing(t *testing.T) {
	t.Parallel()
	c := startRollingCluster(t)
	c.restartMidLoad(t, func() {
		before := c.load.failed.Load()
		c.proxy.Kill()
		c.waitForClientsToFail(t, before)
		c.proxy.Start(t)
	})
	c.finishAfterRestart(t, c.db)
}

// TestPgBouncerRestartedMidLoadLosesNothing runs three instances through
// PgBouncer (transaction pooling, deploy/pgbouncer/pgbouncer.ini) behind
// HAProxy under the same load, kills PgBouncer (SIGKILL) and starts it
// again: requests that needed PostgreSQL meanwhile answer 503, the
// instances reconnect by themselves, and nothing acknowledged is lost.
func TestPgBouncerRestartedMidLoadLosesNothing(t *testing.T) {
	t.Parallel()
	direct := testenv.NewDatabase(t)
	bouncer := testenv.PrivatePgBouncer(t, direct, 20)
	c := startRollingClusterOn(t, bouncer.URL(direct))
	c.restartMidLoad(t, func() {
		before := c.load.failed.Load()
		bouncer.Kill()
		c.waitForClientsToFail(t, before)
		bouncer.Start(t)
	})
	c.finishAfterRestart(t, direct)
}

// waitForClientsToFail waits until the load has seen more failures than
// before: the clients met the outage before it ends.
func (c *rollingCluster) waitForClientsToFail(t *testing.T, before int64) {
	t.Helper()
	require.Eventually(t, func() bool { return c.load.failed.Load() > before+5 }, 30*time.Second, 10*time.Millisecond,
		"the clients see the outage")
}
