package chaos

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// duration is the length of TestChaos's history: CHAOS_DURATION (make
// chaos sets it, e.g. 10m), else a short run that make test affords.
func duration(t *testing.T) time.Duration {
	s := os.Getenv("CHAOS_DURATION")
	if s == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, "CHAOS_DURATION")
	return d
}

// writesBackWithin is how soon after the primary's SIGKILL the service
// must answer a signup again, without any action.
const writesBackWithin = 30 * time.Second

// TestChaos runs two real instances, on a pg_auto_failover formation (a
// primary and a synchronous standby), under a workload of signups (parties
// of 1 to 4 seats on activities with a strict or a fill waiting list, one
// seat on the others; most activities in one or two of three overlapping
// pools; some with a block for a code, which signups send, right or
// wrong, or for a role, which some signups' tokens hold, or both, and
// which are deleted; some in series of 1 or 2 registrations per
// user; buyers following two on-sales' admission queues; some with a
// confirm_by or a release of no-shows at their start a few seconds on,
// confirmations and scans at their doors racing the release),
// cancellations, seat reductions, status and capacity changes, authority,
// pool and seat reads, and note views, waters and reads, while every
// fault class is
// injected in turn, and checks the history: linearizable activities
// (blocks' seats included) and notes, no pool over its capacity and no
// line left with a party that fits, no user over a series' limit and no
// refusal at it without reason, admission in position order with
// single-use tokens, releases only of seats their rule releases (none
// confirmed, none with a check-in) at or after its moment with the line
// promoted in their transaction, a display that
// exceeds the authority only by changes in flight and converges once
// quiet. A failure writes the history and the visualization of what has no
// linearization to artifacts/.
func TestChaos(t *testing.T) {
	d := duration(t)
	cfg := Config{Duration: d, Faults: HAClasses, HA: true}
	if d < 2*time.Minute {
		// Short: every class at least once but the standby's loss and the
		// switchover (the formation's longest faults, which make chaos
		// and make test-ha run), one failover, links broken in the request
		// direction only. A lost answer after PostgreSQL committed an
		// increment is a 503 for a counted increment: the long runs find
		// it, and make test must not fail at random on it.
		cfg.Faults = slices.DeleteFunc(slices.Clone(HAClasses), func(c Class) bool {
			return c == PostgresStandbyLoss || c == PostgresSwitchover
		})
		cfg.Hold, cfg.Gap = 1500*time.Millisecond, time.Second
	} else {
		// Long: HAProxy in front of the instances too, and its restart.
		cfg.Hold, cfg.Gap, cfg.LostAnswers = 3*time.Second, 3*time.Second, true
		cfg.Proxies, cfg.Faults = true, append(slices.Clone(HAClasses), HAProxyRestart)
	}
	res := runChecked(t, cfg)
	require.Len(t, res.Recoveries, res.Faults[PostgresFailover], "a signup answered after every failover")
	for _, r := range res.Recoveries {
		require.LessOrEqual(t, r, writesBackWithin, "signups answered again after the primary's SIGKILL")
	}
	p := PartiesOf(res.History)
	require.Positive(t, p.Strict, "no activity with a strict waiting list took parties")
	require.Positive(t, p.Activities-p.Strict, "no activity with a fill waiting list took parties")
	require.Positive(t, p.Seated, "no party of several seats was seated")
	require.Positive(t, p.Reduced, "no seat reduction was answered")
	pl := PoolsOf(res.History)
	require.Positive(t, pl.InOne, "no activity in one pool")
	require.Positive(t, pl.InTwo, "no activity in two pools")
	require.Positive(t, pl.Seated, "no signup seated in a pool")
	require.Positive(t, pl.Reads, "no pool read answered")
	require.Positive(t, res.Report.Pools.Registrations, "no registration of a pool's activities seen occupying")
	bl := BlocksOf(res.History)
	require.Positive(t, bl.Created, "no block created")
	require.Positive(t, bl.Seated+bl.Waitlisted, "no signup with a code taken")
	require.Positive(t, bl.BadCode, "no signup refused for a code no live block has")
	require.Positive(t, bl.RoleBlocks, "no block for a role created")
	// Whether one of them is seated from the role's block depends on what
	// the run's faults leave of its few role-block activities: the
	// summary counts it, and the check holds whatever the answers were.
	require.Positive(t, bl.RoleSignups, "no signup with a token of a block's role answered")
	require.Positive(t, res.Report.Series.Registrations, "no registration of a series' activities seen active")
	require.Positive(t, res.Report.Series.Refusals, "no signup refused at a series' limit")
	sa := SalesOf(res.History)
	require.Positive(t, sa.Places, "the authority's queue places were not recorded")
	require.Positive(t, sa.Admitted, "no queue place admitted")
	require.Positive(t, sa.Taken, "no signup taken with an admission token")
	lc := LifecycleOf(res.History)
	require.Positive(t, lc.Confirmed, "no confirmation answered 200")
	require.Positive(t, res.Releases.Unconfirmed, "no unconfirmed seat released at confirm_by")
	require.Positive(t, res.Releases.NoShows, "no no-show's seat released at the door")
}

// runChecked runs cfg, logs its summary, fails t (history and
// visualizations written to artifacts/) when the history broke a promise,
// and requires every class of cfg to have been injected.
func runChecked(t *testing.T, cfg Config) Result {
	t.Helper()
	res := Run(t, cfg)
	t.Logf("chaos run of %s:\n%s", cfg.Duration, res.Summary())
	if !res.OK() {
		paths, err := res.Report.WriteArtifacts(testenv.ArtifactsDir(t), fmt.Sprintf("chaos-%d", time.Now().Unix()), res.History)
		require.NoError(t, err)
		t.Fatalf("the history broke a promise; history and visualizations: %v", paths)
	}
	for _, cl := range cfg.Faults {
		require.Positive(t, res.Faults[cl], "fault class %s was never injected", cl)
	}
	return res
}

// TestChaosBehindProxies runs the chaos workload on a single PostgreSQL
// server behind PgBouncer (transaction pooling) with HAProxy in front of
// the two instances, as docs/deploy.md's reference topology has them, the
// clients sending to each instance and through HAProxy, while PgBouncer and
// HAProxy are killed (SIGKILL) and started again on their ports, and
// checks the history as TestChaos does. make test runs a short history of
// those two classes; make chaos one of CHAOS_DURATION with every class of
// a single server too.
func TestChaosBehindProxies(t *testing.T) {
	d := duration(t)
	cfg := Config{Duration: d, Proxies: true, Faults: slices.Concat(AllClasses, ProxyClasses)}
	if d < 2*time.Minute {
		cfg.Duration, cfg.Faults = 15*time.Second, ProxyClasses
		cfg.Hold, cfg.Gap = 1500*time.Millisecond, time.Second
	} else {
		cfg.Hold, cfg.Gap, cfg.LostAnswers = 3*time.Second, 3*time.Second, true
	}
	runChecked(t, cfg)
}

// TestBrokenBuildIsCaught builds capacityd with the brokenexactness tag,
// whose instances trust the counts they cached after their own last
// commit even when the other instance changed the activity since, runs
// two of them, and requires the checker to find the oversell: a checker
// that cannot fail proves nothing.
func TestBrokenBuildIsCaught(t *testing.T) {
	res := Run(t, Config{Duration: 8 * time.Second, Tags: []string{"brokenexactness"}})
	t.Logf("broken build:\n%s", res.Summary())
	require.Equal(t, porcupine.Illegal, res.Report.Authority.Result, "the checker must catch the broken build")
	require.NotEmpty(t, res.Report.Authority.Failed)

	dir := t.TempDir()
	paths, err := res.Report.WriteArtifacts(dir, "broken", res.History)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(paths), 2, "the history and at least one visualization")
	for _, p := range paths {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Positive(t, st.Size(), p)
	}
}

// TestBrokenDoorIsCaught builds capacityd with the brokendoor tag, whose
// "once" lists accept a registration's entry again, runs the workload, and
// requires the door check to find the second entries.
func TestBrokenDoorIsCaught(t *testing.T) {
	res := Run(t, Config{Duration: 8 * time.Second, Tags: []string{"brokendoor"}})
	t.Logf("broken door:\n%s", res.Summary())
	require.False(t, res.Doors.OK(), "the door check must catch the broken build")
	require.Contains(t, strings.Join(res.Doors.Violations, "\n"), "entered again on a once list")
}
