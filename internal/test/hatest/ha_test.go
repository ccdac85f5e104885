package hatest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/chaos"
	"github.com/physiciansnet/capacityd/internal/test/history"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// requireHA skips unless make test-ha runs the test.
func requireHA(t *testing.T) {
	if os.Getenv("TEST_HA") == "" {
		t.Skip("make test-ha runs the failover tests (TEST_HA=1)")
	}
}

// writesBackWithin is how soon after the primary's SIGKILL signups must be
// taken again, without any action.
const writesBackWithin = 30 * time.Second

// run runs the chaos workload on a formation with the faults, and fails
// the test with the history written to artifacts/ when check says so.
func run(t *testing.T, cfg chaos.Config) chaos.Result {
	t.Helper()
	cfg.HA = true
	res := chaos.Run(t, cfg)
	t.Logf("run of %s:\n%s", cfg.Duration, res.Summary())
	return res
}

// keepHistory writes the run's history and visualizations to artifacts/.
func keepHistory(t *testing.T, res chaos.Result, name string) {
	t.Helper()
	paths, err := res.Report.WriteArtifacts(testenv.ArtifactsDir(t), fmt.Sprintf("%s-%d", name, time.Now().Unix()), res.History)
	require.NoError(t, err)
	t.Logf("history and visualizations: %v", paths)
}

// TestHAFailoverKeepsEveryAcknowledgedWrite kills the primary (SIGKILL)
// at least five times under the mixed workload of two instances, with
// synchronous replication: the history stays linearizable, every
// acknowledged signup, cancellation and status change is in the rows and
// events of the server that took over, every activity's event feed is
// gapless, the display converges, and signups are taken again within 30 s
// of each kill. It reports the median and the longest time to the first
// signup taken after a kill.
func TestHAFailoverKeepsEveryAcknowledgedWrite(t *testing.T) {
	requireHA(t)
	res := run(t, chaos.Config{Duration: 3 * time.Minute, Faults: []chaos.Class{chaos.PostgresFailover},
		Hold: 1500 * time.Millisecond, Gap: 3 * time.Second})
	if !res.OK() {
		keepHistory(t, res, "ha-failover")
		t.Fatalf("the history broke a promise")
	}
	missing := acknowledgedMissing(t, res.Cluster.Formation.URL(), res.History)
	require.Empty(t, missing, "acknowledged writes missing after the failovers")
	requireGaplessFeeds(t, res.Cluster.Formation.URL())
	require.GreaterOrEqual(t, len(res.Recoveries), 5, "five failovers with a signup taken after each")
	require.Len(t, res.Recoveries, res.Faults[chaos.PostgresFailover])
	for _, r := range res.Recoveries {
		require.LessOrEqual(t, r, writesBackWithin)
	}
	median, longest := medianMax(res.Recoveries)
	t.Logf("MEASURED: %d failovers; primary SIGKILL to first signup taken: median %s, max %s (all: %v)",
		len(res.Recoveries), median.Round(10*time.Millisecond), longest.Round(10*time.Millisecond), res.Recoveries)
}

// TestHAStandbyLossAndSwitchover loses the standby while the primary runs
// and switches over on purpose, under the same workload: nothing
// acknowledged is lost, and the history stays linearizable.
func TestHAStandbyLossAndSwitchover(t *testing.T) {
	requireHA(t)
	res := run(t, chaos.Config{Duration: 90 * time.Second,
		Faults: []chaos.Class{chaos.PostgresStandbyLoss, chaos.PostgresSwitchover}, Gap: 3 * time.Second})
	if !res.OK() {
		keepHistory(t, res, "ha-standby-switchover")
		t.Fatalf("the history broke a promise")
	}
	require.Positive(t, res.Faults[chaos.PostgresStandbyLoss])
	require.Positive(t, res.Faults[chaos.PostgresSwitchover])
	require.Empty(t, acknowledgedMissing(t, res.Cluster.Formation.URL(), res.History))
	requireGaplessFeeds(t, res.Cluster.Formation.URL())
}

// TestHAAsyncReplicationLosesAcknowledgedWrites is the same failover with
// the standby left asynchronous on purpose: it measures how many
// acknowledged writes the promoted standby lacks, which is why the
// formation's standby is synchronous. The number need not be 0; the
// history's verdict is reported, not required.
func TestHAAsyncReplicationLosesAcknowledgedWrites(t *testing.T) {
	requireHA(t)
	res := run(t, chaos.Config{Duration: 75 * time.Second, Faults: []chaos.Class{chaos.PostgresFailover},
		Hold: 1500 * time.Millisecond, Gap: 3 * time.Second, Async: true})
	acked := len(acknowledged(res.History))
	missing := acknowledgedMissing(t, res.Cluster.Formation.URL(), res.History)
	t.Logf("MEASURED: asynchronous standby, %d failovers: %d of %d acknowledged writes lost; history verdict OK=%v",
		res.Faults[chaos.PostgresFailover], len(missing), acked, res.OK())
	require.Positive(t, res.Faults[chaos.PostgresFailover])
}

// ack is an acknowledged write: what the rows must show.
type ack struct {
	kind         history.Kind
	registration string
	to           string
}

// acknowledged returns the writes of h that were acknowledged: signups
// taken (201, 202), cancellations (200) and status changes (200).
func acknowledged(h history.History) []ack {
	var out []ack
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		o := op.Output
		switch {
		case op.Kind == history.Signup && (o.Status == http.StatusCreated || o.Status == http.StatusAccepted):
			out = append(out, ack{kind: op.Kind, registration: o.Registration})
		case op.Kind == history.Cancel && o.Status == http.StatusOK:
			out = append(out, ack{kind: op.Kind, registration: op.Input.Registration})
		case op.Kind == history.SetStatus && o.Status == http.StatusOK:
			out = append(out, ack{kind: op.Kind, registration: op.Input.Registration, to: op.Input.To})
		}
	}
	return out
}

// acknowledgedMissing returns the acknowledged writes of h whose rows or
// events the database at url lacks: a signup's registration and its
// created or waitlisted event, a cancellation's cancelled status and
// event, a status change's event to that status.
func acknowledgedMissing(t *testing.T, url string, h history.History) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var missing []string
	for _, a := range acknowledged(h) {
		var ok bool
		switch a.kind {
		case history.Signup:
			err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registration WHERE public_id = $1)
				AND EXISTS (SELECT 1 FROM registration_event WHERE registration_id = $1
					AND type IN ('registration.created', 'registration.waitlisted'))`, a.registration).Scan(&ok)
		case history.Cancel:
			err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registration WHERE public_id = $1 AND status = 'cancelled')
				AND EXISTS (SELECT 1 FROM registration_event WHERE registration_id = $1
					AND type = 'registration.cancelled')`, a.registration).Scan(&ok)
		case history.SetStatus:
			err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM registration_event WHERE registration_id = $1
					AND to_status = $2)`, a.registration, a.to).Scan(&ok)
		}
		require.NoError(t, err)
		if !ok {
			missing = append(missing, fmt.Sprintf("%s %s %s", a.kind, a.registration, a.to))
		}
	}
	return missing
}

// requireGaplessFeeds checks every activity's event feed: its events are
// numbered 1 to the activity's last sequence number, none missing.
func requireGaplessFeeds(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var gaps, feeds int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE n <> s.last_seq OR lo <> 1 OR hi <> s.last_seq), count(*)
		FROM activity_state s JOIN (SELECT activity_id, count(*) AS n, min(seq) AS lo, max(seq) AS hi
			FROM registration_event GROUP BY activity_id) e USING (activity_id)`).Scan(&gaps, &feeds))
	require.Positive(t, feeds, "no event feed to check")
	require.Zero(t, gaps, "event feeds with a gap or a number beyond the last")
}

// medianMax returns the median and the longest of ds.
func medianMax(ds []time.Duration) (median, longest time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}
