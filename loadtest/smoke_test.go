package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestSmoke seeds a tiny dataset and runs every step very briefly against
// a capacityd the run starts itself, on a database and a Redis of the
// test's own. Its numbers mean nothing. It takes 30–60 s on two busy
// cores (a race-built capacityd, five restarts), so it runs only with
// LOADTEST_SMOKE=1; CI covers the same path with make bench-quick.
func TestSmoke(t *testing.T) {
	if os.Getenv("LOADTEST_SMOKE") == "" {
		t.Skip("set LOADTEST_SMOKE=1 to run (CI runs make bench-quick instead)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name := "capacityd_bench_smoke_" + randomHex(4)
	dbURL, err := withDatabase(testenv.DatabaseURL(), name)
	require.NoError(t, err)
	t.Cleanup(func() { dropDatabase(t, name) })
	rdb := testenv.PrivateRedis(t)

	// activity_read drives its signups and its reads at once: two
	// progress writers.
	var log apptest.SyncBuffer
	seed, err := Seed(ctx, dbURL, Scale{Activities: 8, PerActivity: 10, HotRows: 100}, &log)
	require.NoError(t, err, log.String())
	require.Equal(t, ActivityPublicID(9), seed.HotActivity)

	r, err := Run(ctx, Config{
		// The race-built binary of the other end-to-end tests: built once
		// per test process, and linked from the build cache when they ran.
		DatabaseURL: dbURL, RedisURL: rdb.URL(), Binary: apptest.Binary(t),
		ScenarioDuration: time.Second, BaselineDuration: 300 * time.Millisecond,
		Sizes: Sizes{FlashCrowdUsers: 600, CountedSignups: 300, SSEClients: 20, WaitlistCrowdUsers: 600,
			PromoteCancels: 20, PromoteWaiting: 50, PromoteRounds: 1, CourseActivities: 10, CourseUsers: 200,
			GroupActivities: 10, GroupUsers: 200, PoolPools: 4, PoolUsers: 200, DoorTickets: 200, ReleaseActivities: 2},
		StatsIdleWait: time.Nanosecond,
		Log:           &log,
	})
	require.NoError(t, err, log.String())
	for _, s := range []string{ScenarioSignupHot, ScenarioProduction, ScenarioActivityRead, ScenarioActivityReadReads, ScenarioSignupHotWebhooks, ScenarioCancelHot, ScenarioSignupHot256, ScenarioSignupSpread, ScenarioFlashCrowd,
		ScenarioWaitCrowd, ScenarioPromoteStorm, ScenarioCourseRush, ScenarioGroupRush, ScenarioPoolRush, ScenarioSeatsRead, ScenarioTrivial,
		ScenarioDoorRush, ScenarioDoorRushLoaded, ScenarioDoorRushSignups, ScenarioReleaseStorm, ScenarioReleaseStormBefore, ScenarioReleaseStormSignups} {
		require.Contains(t, r.Scenarios, s, log.String())
		require.Zero(t, r.Scenarios[s].Errors, "%s: %s", s, log.String())
	}
	// The spread's counters (of the seed's 8 activities) were warm when its
	// timed part began.
	require.EqualValues(t, 8, r.Checks[CheckSpreadCountersWarm], log.String())
	// Bounded by count, not time: it always completes.
	require.EqualValues(t, 600, r.Scenarios[ScenarioFlashCrowd].Ops, log.String())
	require.Contains(t, r.Checks, CheckWebhookDrainSeconds, "the webhook deliveries drained: %s", log.String())
	// production's signups were each admitted or waitlisted, with RS256
	// tokens; the hot activity is back as it was for the scenarios after it.
	require.Equal(t, r.Scenarios[ScenarioProduction].Ops,
		r.Checks[CheckProductionAdmitted].(int64)+r.Checks[CheckProductionWaitlisted].(int64), log.String())
	require.Positive(t, r.Checks[CheckProductionAdmitted], log.String())
	require.EqualValues(t, 0, r.Checks[CheckWebhookDuplicates])
	require.NotNil(t, r.Baselines[BaselineHotRow32])
	require.Contains(t, r.Checks[CheckCountHotPlan], "Scan")
	require.LessOrEqual(t, r.Checks[CheckFlashAdmitted], int64(FlashCrowdCapacity))
	// The exactness of the waiting list and of the course, group and pool
	// rushes holds at any size.
	require.EqualValues(t, 600, r.Scenarios[ScenarioWaitCrowd].Ops, log.String())
	require.EqualValues(t, 100, r.Checks[CheckWaitPositions], log.String())
	require.EqualValues(t, 20, r.Checks[CheckPromoteInLine], log.String())
	require.EqualValues(t, 20, r.Checks[CheckPromoteWithCancel], log.String())
	require.EqualValues(t, 30, r.Checks[CheckPromoteWaiting], log.String())
	require.EqualValues(t, 600, r.Scenarios[ScenarioCourseRush].Ops, log.String())
	require.Zero(t, r.Checks[CheckCourseInexact], log.String())
	require.Zero(t, r.Checks[CheckCourseRefusedNotFull], log.String())
	require.Contains(t, r.Scenarios[ScenarioCourseRush].Note, "200 users over 10 activities instead of 20000 users over 300 activities")
	require.EqualValues(t, 600, r.Scenarios[ScenarioGroupRush].Ops, log.String())
	require.Zero(t, r.Checks[CheckGroupInexact], log.String())
	require.Zero(t, r.Checks[CheckGroupRefusedFitting], log.String())
	require.NotNil(t, r.Ratios[RatioGroupRushVsCourseRush], "group_rush is compared with course_rush")
	require.EqualValues(t, 600, r.Scenarios[ScenarioPoolRush].Ops, log.String())
	require.Zero(t, r.Checks[CheckPoolOverCapacity], log.String())
	require.Zero(t, r.Checks[CheckPoolInexactActivities], log.String())
	require.Zero(t, r.Checks[CheckPoolInexactPools], log.String())
	require.Zero(t, r.Checks[CheckPoolRefusedFitting], log.String())
	require.NotNil(t, r.Ratios[RatioPoolRushVsCourseRush], "pool_rush is compared with course_rush")
	// The door rush's exactness holds at any size: 200 tickets, room for
	// 160, 220 scans.
	require.EqualValues(t, 220, r.Scenarios[ScenarioDoorRush].Ops, log.String())
	require.EqualValues(t, 160, r.Checks[CheckDoorEntered], log.String())
	require.EqualValues(t, 200, r.Checks[CheckDoorSyncTickets], log.String())
	for _, c := range []string{CheckDoorEnteredTwice, CheckDoorOverMax, CheckDoorInsideOff, CheckDoorMismatched, CheckDoorOther,
		CheckDoorUnjustified, CheckDoorSyncInexact} {
		require.Zero(t, r.Checks[c], "%s: %s", c, log.String())
	}
	require.NotNil(t, r.Scenarios[ScenarioSignupHotBeforeDoor], "signup_hot just before the rush")
	require.NotNil(t, r.Scenarios[ScenarioSignupHotAfterDoor], "signup_hot just after the rushes")
	require.NotNil(t, r.Ratios[RatioDoorRushVsSignupHot], "door_rush is compared with signup_hot around it")
	// The release storm's exactness holds at any size: 2 activities of 60
	// no-shows each.
	for _, c := range []string{CheckReleaseReleased, CheckReleaseRefilled, CheckReleaseInTx} {
		require.EqualValues(t, 120, r.Checks[c], "%s: %s", c, log.String())
	}
	require.Zero(t, r.Checks[CheckReleaseWrong], log.String())
	require.Zero(t, r.Checks[CheckReleaseInexact], log.String())

	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	require.True(t, json.Valid(js.Bytes()))
}

func dropDatabase(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := withDatabase(testenv.DatabaseURL(), "postgres")
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
}
