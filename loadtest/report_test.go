package loadtest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleReport() *Report {
	r := NewReport("2 CPUs")
	r.Scenarios[ScenarioSignupHot] = &ScenarioResult{RPS: 4000, Ops: 40000, P50MS: 10, P95MS: 20, P99MS: 30}
	r.Scenarios[ScenarioSignupHot256] = &ScenarioResult{RPS: 6000, Ops: 60000}
	r.Scenarios[ScenarioSignupSpread] = &ScenarioResult{RPS: 5000, Ops: 50000}
	r.Scenarios[ScenarioViewsHot] = &ScenarioResult{RPS: 30000, Ops: 300000}
	r.Scenarios[ScenarioViewsNaive] = &ScenarioResult{RPS: 3000, Ops: 30000}
	r.Scenarios[ScenarioSeatsRead] = &ScenarioResult{RPS: 20000, Ops: 200000}
	r.Scenarios[ScenarioTrivial] = &ScenarioResult{RPS: 0, Ops: 0, Errors: 5}
	r.Baselines[BaselineHotRow32] = Num(3200)
	r.Baselines[BaselineHotRow256] = Num(3000)
	r.Baselines[BaselineNoteUpsert32] = Num(4000)
	return r
}

func TestComputeRatios(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.ComputeRatios()
	require.InDelta(t, 1.25, *r.Ratios[RatioSignupHotVsHotRow], 1e-9)
	require.InDelta(t, 2.0, *r.Ratios[RatioSignupHot256VsHotRow256], 1e-9)
	require.InDelta(t, 0.8, *r.Ratios[RatioSignupHotVsSpread], 1e-9)
	require.InDelta(t, 10.0, *r.Ratios[RatioViewsHotVsNaive], 1e-9)
	require.InDelta(t, 7.5, *r.Ratios[RatioViewsHotVsPGUpsert], 1e-9)
	// trivial measured nothing successful: the ratio is unknown, not infinite.
	require.Contains(t, r.Ratios, RatioSeatsReadVsTrivial)
	require.Nil(t, r.Ratios[RatioSeatsReadVsTrivial])
}

func TestReportJSONHasItsShape(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.ComputeRatios()
	var buf bytes.Buffer
	require.NoError(t, r.WriteJSON(&buf))

	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	require.ElementsMatch(t, []string{"machine", "scenarios", "baselines", "ratios", "checks"}, keys(got))

	var scen map[string]map[string]any
	require.NoError(t, json.Unmarshal(got["scenarios"], &scen))
	for _, k := range []string{"rps", "p50_ms", "p95_ms", "p99_ms", "errors"} {
		require.Contains(t, scen[ScenarioSignupHot], k)
	}
	var base, ratios, checks map[string]any
	require.NoError(t, json.Unmarshal(got["baselines"], &base))
	require.NoError(t, json.Unmarshal(got["ratios"], &ratios))
	require.NoError(t, json.Unmarshal(got["checks"], &checks))
	for _, k := range []string{BaselineHotRow32, BaselineHotRow256, BaselineAppend32, BaselineNoteUpsert32} {
		require.Contains(t, base, k)
	}
	for _, k := range []string{RatioSignupHotVsHotRow, RatioSignupHot256VsHotRow256, RatioSignupHotVsSpread,
		RatioViewsHotVsNaive, RatioViewsHotVsPGUpsert, RatioSeatsReadVsTrivial} {
		require.Contains(t, ratios, k)
	}
	for _, k := range []string{CheckFlashAdmitted, CheckFlashCapacity, CheckFlashAdmissionTx, CheckFlash5xx,
		CheckCountHotMS, CheckCountHotPlan, CheckSignupDeadTuples, CheckSeatsReadPGQueries} {
		require.Contains(t, checks, k)
	}
	require.EqualValues(t, 500, checks[CheckFlashCapacity])
	require.Nil(t, base[BaselineAppend32], "an unmeasured baseline is null")
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTargets(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.ComputeRatios()
	r.Checks[CheckFlashAdmitted] = int64(500)
	r.Checks[CheckFlash5xx] = int64(0)
	r.Checks[CheckFlashAdmissionTx] = float64(51) // as decoded from JSON
	r.Checks[CheckCountHotPlan] = "Aggregate > Index Only Scan using i on registration"

	byWhat := targetsByWhat(t, r)
	met := func(what string) *bool {
		tg, ok := byWhat[what]
		require.True(t, ok, what)
		return tg.Met
	}
	require.True(t, *met("hot signups/s at 64 clients vs one-row UPDATE at 32 clients"))
	require.True(t, *met("hot signups/s vs signups spread over 1,000 activities"), "0.8 meets ≥ 0.8")
	require.True(t, *met("flash crowd: admitted of 500 seats"))
	require.False(t, *met("flash crowd: admission transactions that reached PostgreSQL"))
	require.Nil(t, met("seat reads: PostgreSQL transactions with a warm cache"), "not measured")
	require.True(t, *met("authority COUNT plan on the hot activity after 20 executions"))

	r.Checks[CheckCountHotPlan] = "Aggregate > Seq Scan on registration (Filter (status = ANY) removed 9 rows)"
	for _, tg := range Targets(r) {
		if tg.What == "authority COUNT plan on the hot activity after 20 executions" {
			require.False(t, *tg.Met)
		}
	}
}

func TestTrimFloat(t *testing.T) {
	t.Parallel()
	require.Equal(t, "1.5", trimFloat(1.5))
	require.Equal(t, "500", trimFloat(500))
	require.Equal(t, "0.001", trimFloat(0.0012))
	require.Equal(t, "0", trimFloat(-0.0001))
}

func TestComputeRatiosOfSpreadAndWaitingList(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Scenarios[ScenarioCancelHot] = &ScenarioResult{RPS: 3200, Ops: 32000}
	r.Scenarios[ScenarioFlashCrowd] = &ScenarioResult{RPS: 10000, Ops: 20000}
	r.Scenarios[ScenarioWaitCrowd] = &ScenarioResult{RPS: 6000, Ops: 20000}
	r.Scenarios[ScenarioPromoteStorm] = &ScenarioResult{RPS: 2400, Ops: 1000}
	r.Scenarios[ScenarioCourseRush] = &ScenarioResult{RPS: 3000, Ops: 60000}
	r.Baselines[BaselineAppend32] = Num(10000)
	r.ComputeRatios()
	require.InDelta(t, 1.25, *r.Ratios[RatioSpreadVsSignupHot], 1e-9)
	require.InDelta(t, 0.5, *r.Ratios[RatioSpreadVsAppendInsert], 1e-9)
	require.InDelta(t, 0.75, *r.Ratios[RatioCourseRushVsSignupHot], 1e-9)
	require.InDelta(t, 0.6, *r.Ratios[RatioFlashWaitlistVsFlash], 1e-9)
	require.InDelta(t, 0.75, *r.Ratios[RatioPromoteStormVsCancelHot], 1e-9)

	delete(r.Scenarios, ScenarioCancelHot)
	r.ComputeRatios()
	require.Contains(t, r.Ratios, RatioPromoteStormVsCancelHot)
	require.Nil(t, r.Ratios[RatioPromoteStormVsCancelHot], "no cancel_hot in the run: unknown, not a ratio to another run")
}

// targetsByWhat judges r and indexes the targets by measure.
func targetsByWhat(t *testing.T, r *Report) map[string]Target {
	t.Helper()
	out := map[string]Target{}
	for _, tg := range Targets(r) {
		require.NotContains(t, out, tg.What, "measures are named once")
		require.NotEmpty(t, tg.Topic, tg.What)
		out[tg.What] = tg
	}
	return out
}

func TestTargetsOfTheWaitingList(t *testing.T) {
	t.Parallel()
	r := NewReport("x")
	r.Checks[CheckWaitUsers] = int64(20000)
	r.Checks[CheckWaitAdmitted] = int64(500)
	r.Checks[CheckWaitPositions] = float64(19499) // as decoded from JSON
	r.Checks[CheckWaitAdmissionTx] = int64(100)
	r.Checks[CheckPromoteSeats] = int64(1000)
	r.Checks[CheckPromoteTaken] = int64(1000)
	r.Checks[CheckPromoteWaitingBefore] = int64(5000)
	r.Checks[CheckPromoteCancelled] = int64(1000)
	r.Checks[CheckPromoteWaiting] = int64(4000)
	r.Checks[CheckPromoteInLine] = int64(999)
	got := targetsByWhat(t, r)

	positions := got["waiting-list crowd: waitlisted at distinct positions (every other user)"]
	require.Equal(t, "= 19500", positions.Want, "the target follows the crowd's size")
	require.Equal(t, "19499", positions.Got)
	require.False(t, *positions.Met)
	require.True(t, *got["waiting-list crowd: admitted of 500 seats"].Met)
	require.True(t, *got["waiting-list crowd: admission transactions that reached PostgreSQL"].Met, "100 meets ≤ 100")
	require.True(t, *got["promote storm: seats taken afterwards (every freed seat refilled)"].Met)
	waiting := got["promote storm: waiting afterwards (one fewer per cancellation)"]
	require.Equal(t, "= 4000", waiting.Want)
	require.True(t, *waiting.Met)
	require.False(t, *got["promote storm: promotions to the first in line, in order"].Met)

	withCancel := got["promote storm: promotions in the transaction of the cancellation that freed the seat"]
	require.Nil(t, withCancel.Met, "not measured")
	require.Equal(t, "not measured", withCancel.Got)
	require.Equal(t, "= 1000", withCancel.Want)

	delete(r.Checks, CheckPromoteCancelled)
	inLine := targetsByWhat(t, r)["promote storm: promotions to the first in line, in order"]
	require.Equal(t, "= ?", inLine.Want, "a target read from a missing measure is unknown")
	require.Equal(t, "999", inLine.Got)
	require.Nil(t, inLine.Met)
}

func TestPromoteStormTargetIsARegressionFloor(t *testing.T) {
	t.Parallel()
	const what = "promote storm cancellations/s vs hot cancellations/s (regression floor)"
	r := NewReport("x")
	r.Scenarios[ScenarioCancelHot] = &ScenarioResult{RPS: 3000, Ops: 30000}
	r.Scenarios[ScenarioPromoteStorm] = &ScenarioResult{RPS: 1950, Ops: 5000}
	r.ComputeRatios()
	floor := targetsByWhat(t, r)[what]
	require.Equal(t, "≥ 0.6", floor.Want)
	require.Equal(t, "0.65", floor.Got)
	require.True(t, *floor.Met, "0.65× is above the floor, though below the 0.8× it usually runs at")

	r.Scenarios[ScenarioPromoteStorm].RPS = 1650
	r.ComputeRatios()
	require.False(t, *targetsByWhat(t, r)[what].Met, "0.55× is a regression")
}

func TestTargetsOfTheSpread(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Scenarios[ScenarioCourseRush] = &ScenarioResult{RPS: 3100, Ops: 60000}
	r.Baselines[BaselineAppend32] = Num(20000)
	r.Checks[CheckCourseInexact] = int64(0)
	r.Checks[CheckCourseRefusedNotFull] = int64(1)
	r.Checks[CheckCourse5xx] = int64(0)
	r.Checks[CheckCourseP99MS] = 1000.0
	r.ComputeRatios()
	got := targetsByWhat(t, r)
	require.True(t, *got["signups/s spread over 1,000 activities vs hot signups/s at 64 clients"].Met, "5000/4000")
	require.False(t, *got["signups/s spread over 1,000 activities vs append-only INSERT at 32 clients"].Met, "0.25 < 0.3")
	require.True(t, *got["course rush: activities not exact"].Met)
	require.False(t, *got["course rush: activities that refused someone as full while not full"].Met)
	require.False(t, *got["course rush: p99 latency (ms)"].Met, "1000 is not < 1000")
	require.False(t, *got["course rush signups/s vs hot signups/s"].Met, "0.775 < 0.8")
	// The group rush beside it.
	r.Scenarios[ScenarioGroupRush] = &ScenarioResult{RPS: 2480, Ops: 60000}
	r.Checks[CheckGroupInexact] = int64(0)
	r.Checks[CheckGroupRefusedFitting] = int64(2)
	r.Checks[CheckGroup5xx] = int64(0)
	r.Checks[CheckGroupP99MS] = 999.9
	r.ComputeRatios()
	require.InDelta(t, 0.8, *r.Ratios[RatioGroupRushVsCourseRush], 1e-9)
	got = targetsByWhat(t, r)
	require.True(t, *got["group rush signups/s vs course rush signups/s"].Met, "0.8 meets ≥ 0.8")
	require.True(t, *got["group rush: activities not exact (taken = seats answered 201, at most 50)"].Met)
	require.False(t, *got["group rush: activities that refused a party that fitted"].Met)
	require.True(t, *got["group rush: 5xx responses"].Met)
	require.True(t, *got["group rush: p99 latency (ms)"].Met)
	// The pool rush beside it.
	r.Scenarios[ScenarioPoolRush] = &ScenarioResult{RPS: 2170, Ops: 60000}
	r.Checks[CheckPoolOverCapacity] = int64(0)
	r.Checks[CheckPoolInexactActivities] = int64(0)
	r.Checks[CheckPoolInexactPools] = int64(1)
	r.Checks[CheckPoolRefusedFitting] = int64(0)
	r.Checks[CheckPool5xx] = int64(3)
	r.Checks[CheckPoolP99MS] = 400.0
	r.ComputeRatios()
	require.InDelta(t, 0.7, *r.Ratios[RatioPoolRushVsCourseRush], 1e-9)
	got = targetsByWhat(t, r)
	require.True(t, *got["pool rush signups/s vs course rush signups/s"].Met, "0.7 meets ≥ 0.7")
	require.True(t, *got["pool rush: activities and pools over capacity"].Met)
	require.True(t, *got["pool rush: activities not exact (taken = signups answered 201, remaining = least free of it and its pools)"].Met)
	require.False(t, *got["pool rush: pools not exact (taken = signups answered 201 of its activities)"].Met)
	require.True(t, *got["pool rush: activities that refused a signup that fitted it and its pools"].Met)
	require.False(t, *got["pool rush: 5xx responses"].Met)
	require.True(t, *got["pool rush: p99 latency (ms)"].Met)
	r.Scenarios[ScenarioPoolRush].RPS = 2150
	r.ComputeRatios()
	require.False(t, *targetsByWhat(t, r)["pool rush signups/s vs course rush signups/s"].Met, "0.694 < 0.7")
	delete(r.Scenarios, ScenarioCourseRush)
	r.ComputeRatios()
	require.Nil(t, targetsByWhat(t, r)["group rush signups/s vs course rush signups/s"].Met, "no course_rush in the run: not measured")
	require.Nil(t, targetsByWhat(t, r)["pool rush signups/s vs course rush signups/s"].Met, "no course_rush in the run: not measured")
	for _, topic := range []string{TopicAdmission, TopicSeatReads, TopicSeatChanges, TopicNotes, TopicStreams, TopicWaitlist, TopicSpread} {
		require.Contains(t, topicsText, "**"+topic+"**", "the page introduces every topic")
	}
}

func TestEveryScenarioAndCheckIsDescribed(t *testing.T) {
	t.Parallel()
	for _, s := range scenarioOrder {
		require.NotEmpty(t, scenarioDescriptions[s], s)
	}
	for _, c := range []string{CheckWaitUsers, CheckWaitAdmitted, CheckWaitWaitlisted, CheckWaitPositions, CheckWait5xx,
		CheckWaitAdmissionTx, CheckWaitTaken, CheckWaitWaiting, CheckPromoteSeats, CheckPromoteWaitingBefore,
		CheckPromoteCancelled, CheckPromoteTaken, CheckPromoteWaiting, CheckPromotePromoted, CheckPromoteInLine,
		CheckPromoteWithCancel, CheckCourseActivities, CheckCourseAdmitted, CheckCourseFull, CheckCourse5xx,
		CheckCourseInexact, CheckCourseRefusedNotFull, CheckCourseP99MS, CheckSpreadCountersWarm,
		CheckGroupActivities, CheckGroupAdmitted, CheckGroupSeats, CheckGroupFull, CheckGroup5xx,
		CheckGroupInexact, CheckGroupRefusedFitting, CheckGroupRefusedNotFull, CheckGroupP99MS,
		CheckPoolPools, CheckPoolActivities, CheckPoolShared, CheckPoolAdmitted, CheckPoolFull, CheckPool5xx,
		CheckPoolOverCapacity, CheckPoolInexactActivities, CheckPoolInexactPools, CheckPoolRefusedFitting,
		CheckPoolFullPools, CheckPoolP99MS, CheckReleaseActivities, CheckReleaseNoShows, CheckReleaseReleased, CheckReleaseWrong,
		CheckReleaseRefilled, CheckReleaseInTx, CheckReleaseInexact, CheckReleaseTransactions, CheckReleaseP99MS, CheckReleaseWaitMS,
		CheckReleaseWorkMS, CheckReleaseTxEveryMS, CheckReleaseSignupsLost, CheckReleaseFixedVsBefore} {
		require.NotEmpty(t, checkDescriptions[c], c)
	}
	r := NewReport("x")
	for _, s := range []string{ScenarioPoolRush, ScenarioGroupRush, ScenarioCourseRush, ScenarioFlashCrowd, ScenarioPromoteStorm, ScenarioWaitCrowd} {
		r.Scenarios[s] = &ScenarioResult{}
	}
	require.Equal(t, []string{ScenarioFlashCrowd, ScenarioWaitCrowd, ScenarioPromoteStorm, ScenarioCourseRush, ScenarioGroupRush, ScenarioPoolRush}, orderedScenarios(r),
		"group_rush and pool_rush next to course_rush")
}

func TestDoorRateTargetIsJudgedAtMakeBenchDevicesOnly(t *testing.T) {
	t.Parallel()
	const what = "door rush scans/s at 16 devices vs hot signups/s just before and after the rushes (mean)"
	r := NewReport("x")
	r.Scenarios[ScenarioSignupHotBeforeDoor] = &ScenarioResult{RPS: 4000, Ops: 40000}
	r.Scenarios[ScenarioSignupHotAfterDoor] = &ScenarioResult{RPS: 4000, Ops: 40000}
	r.Scenarios[ScenarioDoorRush] = &ScenarioResult{RPS: 3600, Ops: 11000}
	r.ComputeRatios()
	r.Checks[CheckDoorDevices] = int64(64)
	atOther := targetsByWhat(t, r)[what]
	require.Nil(t, atOther.Met, "a rush at 64 devices does not judge the rate at 16")
	require.Equal(t, "not measured", atOther.Got)
	require.InDelta(t, 0.9, *r.Ratios[RatioDoorRushVsSignupHot], 1e-9, "its ratio is still reported")

	r.Checks[CheckDoorDevices] = float64(16) // as decoded from JSON
	require.True(t, *targetsByWhat(t, r)[what].Met)
	delete(r.Checks, CheckDoorDevices)
	require.True(t, *targetsByWhat(t, r)[what].Met, "a report from before the devices were recorded")
}
