package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Scenario names, as they appear in the report.
const (
	ScenarioSignupHot    = "signup_hot"
	ScenarioCancelHot    = "cancel_hot"
	ScenarioSignupHot256 = "signup_hot_256"
	ScenarioSignupSpread = "signup_spread"
	ScenarioFlashCrowd   = "flash_crowd"
	ScenarioWaitCrowd    = "flash_crowd_waitlist"
	ScenarioPromoteStorm = "promote_storm"
	ScenarioCourseRush   = "course_rush"
	ScenarioGroupRush    = "group_rush"
	ScenarioPoolRush     = "pool_rush"
	ScenarioSeatsRead    = "seats_read"
	ScenarioTrivial      = "trivial"
	ScenarioViewsHot     = "views_hot"
	ScenarioViewsNaive   = "views_naive"
	ScenarioSSEFanout    = "sse_fanout"
	// ScenarioSignupHotWebhooks is signup_hot with two webhooks for every
	// event.
	ScenarioSignupHotWebhooks = "signup_hot_webhooks"
	// ScenarioSignupHotLimited is signup_hot on the hot activity with a
	// block of reserved seats and in a series with a per-person limit.
	ScenarioSignupHotLimited = "signup_hot_limited"
	// ScenarioSignupHotBefore and ScenarioSignupHotAfter are signup_hot
	// again, on the same capacityd, just before and just after
	// signup_hot_limited: its baseline, measured in the same conditions
	// (the same process, as long after its start), so that what the
	// block and the series cost is not mixed with how the machine and
	// the processes drift over the run.
	ScenarioSignupHotBefore = "signup_hot_before_limited"
	ScenarioSignupHotAfter  = "signup_hot_after_limited"
	// ScenarioActivityRead is signup_hot while as many more clients read
	// the hot activity anonymously: its signups; ScenarioActivityReadReads
	// is its reads.
	ScenarioActivityRead      = "activity_read"
	ScenarioActivityReadReads = "activity_read_reads"
	// ScenarioOnSaleJoin is the joins of an on-sale's queue before it
	// opens; ScenarioOnSalePoll the polls of the tickets once it opened.
	ScenarioOnSaleJoin = "onsale_join"
	ScenarioOnSalePoll = "onsale_poll"
	// ScenarioProduction is signup_hot with a real deployment's options:
	// RS256 tokens checked against a JWK Set, the access log at info, two
	// webhooks for every event, and a waiting list that its signups reach.
	ScenarioProduction = "production"
	// ScenarioDoorRush is the scans of a crowd's tickets at a check-in
	// list by 16 devices; ScenarioDoorRushLoaded the same rush at a
	// second list while ScenarioDoorRushSignups sign up for the hot
	// activity.
	ScenarioDoorRush        = "door_rush"
	ScenarioDoorRushLoaded  = "door_rush_with_signups"
	ScenarioDoorRushSignups = "door_rush_signups"
	// ScenarioSignupHotBeforeDoor and ScenarioSignupHotAfterDoor are
	// signup_hot again just before the first rush and just after the
	// second: the door's baseline, measured as signup_hot_limited's is, so
	// that the machine's drift over the run stays out of its ratios.
	ScenarioSignupHotBeforeDoor = "signup_hot_before_door"
	ScenarioSignupHotAfterDoor  = "signup_hot_after_door"
	// ScenarioReleaseStorm is the release at one moment of the no-shows'
	// seats of many activities, each line promoted; its rps is seats
	// released per second from the moment, its latencies each activity's
	// time from the moment until its line was refilled.
	// ScenarioReleaseStormSignups are the signups for another activity
	// while the storm's transactions ran, ScenarioReleaseStormBefore the
	// same signups just before the moment.
	ScenarioReleaseStorm        = "release_storm"
	ScenarioReleaseStormSignups = "release_storm_signups"
	ScenarioReleaseStormBefore  = "release_storm_signups_before"
	// ScenarioDashboards is signup_hot while the organisers' console's
	// live dashboards watch the hot activity (its seat stream and a check-in
	// list's counts stream each); ScenarioDashboardsBefore and
	// ScenarioDashboardsAfter the same signups just before they opened and
	// just after they closed; ScenarioDashboardsUpdates the dashboards' seat
	// events: each signup's time from its answer to each dashboard's event
	// showing it.
	ScenarioDashboards        = "dashboards"
	ScenarioDashboardsBefore  = "dashboards_signups_before"
	ScenarioDashboardsAfter   = "dashboards_signups_after"
	ScenarioDashboardsUpdates = "dashboards_updates"
)

// Baseline names, as they appear in the report. The first four are always
// in its JSON (null when not measured); the others when measured.
const (
	BaselineHotRow32      = "pg_hot_row_update_tps_32"
	BaselineHotRow256     = "pg_hot_row_update_tps_256"
	BaselineAppend32      = "pg_append_insert_tps_32"
	BaselineNoteUpsert32  = "pg_note_upsert_tps_32"
	BaselineHotRow1       = "pg_hot_row_update_tps_1"
	BaselineShard10x32    = "pg_shard10_update_tps_32"
	BaselineHotRowAsync32 = "pg_hot_row_update_async_tps_32"
	// BaselineLoopbackPostCPU is not PostgreSQL's: the processor time of
	// one bare HTTP POST exchange over loopback (MeasureLoopbackPost).
	BaselineLoopbackPostCPU = "http_loopback_post_cpu_us"
	// BaselineHotRow256Conns is the number of PostgreSQL connections the
	// 256-client UPDATE could really open (max_connections may be lower).
	BaselineHotRow256Conns = "pg_hot_row_update_256_connections"
)

// Ratio names, as they appear in the report.
const (
	RatioSignupHotVsHotRow       = "signup_hot_vs_hot_row_update"
	RatioSignupHot256VsHotRow256 = "signup_hot_256_vs_hot_row_update_256"
	RatioSignupHotVsSpread       = "signup_hot_vs_spread"
	RatioSpreadVsSignupHot       = "signup_spread_vs_signup_hot"
	RatioSpreadVsAppendInsert    = "signup_spread_vs_append_insert"
	RatioCourseRushVsSignupHot   = "course_rush_vs_signup_hot"
	RatioGroupRushVsCourseRush   = "group_rush_vs_course_rush"
	RatioPoolRushVsCourseRush    = "pool_rush_vs_course_rush"
	RatioFlashWaitlistVsFlash    = "flash_crowd_waitlist_vs_flash_crowd"
	RatioPromoteStormVsCancelHot = "promote_storm_vs_cancel_hot"
	RatioCancelHotVsSignupHot    = "cancel_hot_vs_signup_hot"
	RatioViewsHotVsNaive         = "views_hot_vs_naive"
	RatioViewsHotVsPGUpsert      = "views_hot_vs_pg_upsert"
	RatioSeatsReadVsTrivial      = "seats_read_vs_trivial"
	RatioSignupHotWebhooks       = "signup_hot_webhooks_vs_signup_hot"
	RatioSignupHotLimited        = "signup_hot_limited_vs_signup_hot"
	RatioActivityReadVsSignupHot = "activity_read_vs_signup_hot"
	RatioOnSalePollVsSeatsRead   = "onsale_poll_vs_seats_read"
	RatioOnSaleJoinVsSignupHot   = "onsale_join_vs_signup_hot"
	RatioProductionVsSignupHot   = "production_vs_signup_hot"
	RatioDoorRushVsSignupHot     = "door_rush_vs_signup_hot"
	// RatioDoorRushSignups compares the signups made during a door rush
	// with signup_hot's.
	RatioDoorRushSignups = "door_rush_signups_vs_signup_hot"
	// RatioReleaseStormSignups compares the signups for another activity
	// during a release storm with the same signups just before it.
	RatioReleaseStormSignups = "release_storm_signups_vs_before"
	// RatioDashboardsSignups compares the signups made with the dashboards
	// open with the mean of those just before and just after.
	RatioDashboardsSignups = "dashboards_vs_signups_without"
	// RatioProductionServiceCPU compares the processor time of capacityd
	// and PostgreSQL per signup of production with signup_hot's.
	RatioProductionServiceCPU = "production_service_cpu_vs_signup_hot"
	// RatioSignupHotCPUVsTrivial compares capacityd's processor time per
	// signup_hot signup with its time per trivial request.
	RatioSignupHotCPUVsTrivial = "signup_hot_capacityd_cpu_vs_trivial"
	// RatioSignupHotMachineVsTrivial compares the whole machine's
	// processor time per signup_hot signup with its time per trivial
	// request.
	RatioSignupHotMachineVsTrivial = "signup_hot_machine_cpu_vs_trivial"
)

// Check names, as they appear in the report. The first eight are always in
// its JSON (null when not measured).
const (
	CheckFlashAdmitted         = "flash_crowd_admitted"
	CheckFlashCapacity         = "flash_crowd_capacity"
	CheckFlashAdmissionTx      = "flash_crowd_admission_tx"
	CheckFlash5xx              = "flash_crowd_5xx"
	CheckCountHotMS            = "count_hot_ms"
	CheckCountHotPlan          = "count_hot_plan"
	CheckSignupDeadTuples      = "activity_dead_tuples_from_signups"
	CheckSeatsReadPGQueries    = "seats_read_pg_queries"
	CheckCountSmallMS          = "count_small_ms"
	CheckCountSmallPlan        = "count_small_plan"
	CheckHotRowDeadTuples      = "hot_row_dead_tuples_16k"
	CheckSignupDeadActivity    = "signup_dead_tuples_activity_table"
	CheckSignupDeadRegs        = "signup_dead_tuples_registration_table"
	CheckSSEClients            = "sse_fanout_clients"
	CheckSSEP99MS              = "sse_fanout_p99_ms"
	CheckSSERSSMB              = "sse_fanout_rss_mb"
	CheckSSEStreamPGQueries    = "sse_fanout_pg_queries"
	CheckFlashAuthorityTaken   = "flash_crowd_authority_taken"
	CheckWaitUsers             = "flash_crowd_waitlist_users"
	CheckWaitAdmitted          = "flash_crowd_waitlist_admitted"
	CheckWaitWaitlisted        = "flash_crowd_waitlist_waitlisted"
	CheckWaitPositions         = "flash_crowd_waitlist_distinct_positions"
	CheckWait5xx               = "flash_crowd_waitlist_5xx"
	CheckWaitAdmissionTx       = "flash_crowd_waitlist_admission_tx"
	CheckWaitTaken             = "flash_crowd_waitlist_authority_taken"
	CheckWaitWaiting           = "flash_crowd_waitlist_authority_waiting"
	CheckPromoteSeats          = "promote_storm_seats"
	CheckPromoteWaitingBefore  = "promote_storm_waiting_before"
	CheckPromoteCancelled      = "promote_storm_cancelled"
	CheckPromoteTaken          = "promote_storm_taken"
	CheckPromoteWaiting        = "promote_storm_waiting"
	CheckPromotePromoted       = "promote_storm_promoted"
	CheckPromoteInLine         = "promote_storm_promoted_in_line"
	CheckPromoteWithCancel     = "promote_storm_promoted_with_cancel"
	CheckCourseActivities      = "course_rush_activities"
	CheckCourseAdmitted        = "course_rush_admitted"
	CheckCourseFull            = "course_rush_refused_full"
	CheckCourse5xx             = "course_rush_5xx"
	CheckCourseInexact         = "course_rush_inexact_activities"
	CheckCourseRefusedNotFull  = "course_rush_refused_while_not_full"
	CheckCourseP99MS           = "course_rush_p99_ms"
	CheckGroupActivities       = "group_rush_activities"
	CheckGroupAdmitted         = "group_rush_admitted"
	CheckGroupSeats            = "group_rush_seats_admitted"
	CheckGroupFull             = "group_rush_refused_full"
	CheckGroup5xx              = "group_rush_5xx"
	CheckGroupInexact          = "group_rush_inexact_activities"
	CheckGroupRefusedFitting   = "group_rush_refused_while_fitting"
	CheckGroupRefusedNotFull   = "group_rush_refused_while_not_full"
	CheckGroupP99MS            = "group_rush_p99_ms"
	CheckPoolPools             = "pool_rush_pools"
	CheckPoolActivities        = "pool_rush_activities"
	CheckPoolShared            = "pool_rush_activities_in_two_pools"
	CheckPoolAdmitted          = "pool_rush_admitted"
	CheckPoolFull              = "pool_rush_refused_full"
	CheckPool5xx               = "pool_rush_5xx"
	CheckPoolOverCapacity      = "pool_rush_over_capacity"
	CheckPoolInexactActivities = "pool_rush_inexact_activities"
	CheckPoolInexactPools      = "pool_rush_inexact_pools"
	CheckPoolRefusedFitting    = "pool_rush_refused_while_fitting"
	CheckPoolFullPools         = "pool_rush_full_pools"
	CheckPoolP99MS             = "pool_rush_p99_ms"
	CheckSeatsReadRedisErrors  = "seats_read_redis_errors"
	CheckSeatsReadRebuilds     = "seats_read_cache_rebuilds"
	CheckSeatsReadRedisCmds    = "seats_read_redis_commands"
	CheckSeatsReadRedisPerOp   = "seats_read_redis_commands_per_read"
	CheckSpreadCountersWarm    = "signup_spread_counters_warm"
	CheckWebhookDrainSeconds   = "webhook_backlog_drain_seconds"
	CheckWebhookReceived       = "webhook_deliveries_received"
	CheckWebhookDuplicates     = "webhook_duplicate_deliveries"
	CheckWebhookCPUAdded       = "webhook_cpu_us_added_per_signup"
	CheckOnSaleTaken           = "onsale_taken"
	CheckOnSaleTwice           = "onsale_admitted_twice"
	CheckOnSaleUnadmitted      = "onsale_registrations_without_token"
	CheckOnSaleRefused         = "onsale_admitted_then_refused"
	CheckOnSale5xx             = "onsale_5xx"
	CheckOnSaleRho             = "onsale_join_order_rank_correlation"
	CheckProductionAdmitted    = "production_admitted"
	CheckProductionWaitlisted  = "production_waitlisted"
	// The processor time of capacityd and PostgreSQL per signup (µs) of
	// production and of signup_hot, and what production's options add.
	CheckProductionCPU      = "production_service_cpu_us_per_signup"
	CheckSignupHotCPU       = "signup_hot_service_cpu_us_per_signup"
	CheckProductionCPUAdded = "production_service_cpu_us_added_per_signup"
	// door_rush's crowd and answers (its first list), its exactness over
	// both of its lists, and its ticket sync.
	CheckDoorTickets      = "door_rush_tickets"
	CheckDoorScans        = "door_rush_scans"
	CheckDoorDevices      = "door_rush_devices"
	CheckDoorMaxInside    = "door_rush_max_inside"
	CheckDoorEntered      = "door_rush_entered"
	CheckDoorInside       = "door_rush_inside"
	CheckDoorAlready      = "door_rush_refused_already_checked_in"
	CheckDoorRoomFull     = "door_rush_refused_room_full"
	CheckDoorOther        = "door_rush_other_answers"
	CheckDoorEnteredTwice = "door_rush_registrations_entered_twice"
	CheckDoorOverMax      = "door_rush_seats_over_max_inside"
	CheckDoorInsideOff    = "door_rush_inside_off_entries"
	CheckDoorMismatched   = "door_rush_history_mismatches"
	CheckDoorUnjustified  = "door_rush_unjustified_refusals"
	CheckDoorSyncSeconds  = "door_rush_sync_seconds"
	CheckDoorSyncTickets  = "door_rush_sync_tickets"
	CheckDoorSyncInexact  = "door_rush_sync_inexact"
	// release_storm's activities and no-shows, its exactness from their
	// feeds and counts, its transactions and times.
	CheckReleaseActivities   = "release_storm_activities"
	CheckReleaseNoShows      = "release_storm_no_shows"
	CheckReleaseReleased     = "release_storm_released"
	CheckReleaseWrong        = "release_storm_inexact_releases"
	CheckReleaseRefilled     = "release_storm_refilled_in_line"
	CheckReleaseInTx         = "release_storm_promoted_in_release_tx"
	CheckReleaseInexact      = "release_storm_inexact_activities"
	CheckReleaseTransactions = "release_storm_transactions"
	CheckReleaseP99MS        = "release_storm_p99_ms"
	CheckReleaseWaitMS       = "release_storm_wait_ms"
	CheckReleaseWorkMS       = "release_storm_work_ms"
	CheckReleaseTxEveryMS    = "release_storm_transaction_every_ms"
	// The bystanders' signups the storm cost, and their ratio to before
	// over a fixed window from the moment.
	CheckReleaseSignupsLost   = "release_storm_signups_lost"
	CheckReleaseFixedVsBefore = "release_storm_signups_2s_vs_before"
	// dashboards' streams open during the signups, the list's reads (per
	// list stream, in the time it was open) and counts events then, and
	// the p99 of their updates; the bench database's transactions while as
	// many connected and sat idle, and of which each half.
	CheckDashboardsOpen               = "dashboards_open"
	CheckDashboardsListReadsPerStream = "dashboards_list_reads_per_stream_during_signups"
	CheckDashboardsListOpenSeconds    = "dashboards_list_open_seconds_during_signups"
	CheckDashboardsListEvents         = "dashboards_list_events_during_signups"
	CheckDashboardsP99MS              = "dashboards_update_p99_ms"
	CheckDashboardsDisplayBehind      = "dashboards_display_behind_at_start"
	CheckDashboardsPGQueries          = "dashboards_pg_queries"
	CheckDashboardsSeatPGQueries      = "dashboards_seat_pg_queries"
	CheckDashboardsListPGQueries      = "dashboards_list_pg_queries"
	CheckDashboardsListPGPerStream    = "dashboards_list_pg_queries_per_stream"
	CheckDashboardsOtherPGQueries     = "dashboards_other_pg_queries"
	CheckDashboardsAutovacuums        = "dashboards_autovacuum_runs"
	CheckDashboardsBaselinePGQueries  = "dashboards_baseline_pg_queries"
	CheckDashboardsCausedPGQueries    = "dashboards_caused_pg_queries"
	CheckDashboardsSubscriptionLosses = "dashboards_subscription_losses"
)

// Report is everything one run measured; its JSON (WriteJSON) is the
// machine-readable result of make bench. Absent measurements are null (nil
// pointers).
type Report struct {
	Machine   string                     `json:"machine"`
	Scenarios map[string]*ScenarioResult `json:"scenarios"`
	Baselines map[string]*float64        `json:"baselines"`
	Ratios    map[string]*float64        `json:"ratios"`
	Checks    map[string]any             `json:"checks"`
}

// ScenarioResult is one load scenario: successful operations per second,
// latency percentiles of the successful operations in milliseconds, and
// the operations that failed.
type ScenarioResult struct {
	RPS    float64 `json:"rps"`
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
	Errors int64   `json:"errors"`
	// Ops is the number of successful operations.
	Ops int64 `json:"ops"`
	// Clients is the number of concurrent clients.
	Clients int `json:"clients"`
	// Seconds is how long the scenario ran.
	Seconds float64 `json:"seconds"`
	// Note says anything a reader must know (e.g. why it was skipped).
	Note string `json:"note,omitempty"`
	// CPUBusy is the fraction of all the machine's cores that were busy
	// while the scenario ran, and CPUMicrosPerOp the processor time per
	// successful operation, in microseconds, of the whole machine and of
	// each group of processes (CPUCapacityd, CPUPostgres, …). Both are
	// measured from /proc, on Linux only.
	CPUBusy        float64            `json:"cpu_busy,omitempty"`
	CPUMicrosPerOp map[string]float64 `json:"cpu_us_per_op,omitempty"`
	// WALBytesPerOp is the WAL PostgreSQL wrote while the scenario ran,
	// per successful operation: its insert position moved that far, for
	// every database of the server and its background work.
	WALBytesPerOp *float64 `json:"wal_bytes_per_op,omitempty"`
}

// NewReport returns an empty report with every map allocated.
func NewReport(machine string) *Report {
	return &Report{
		Machine:   machine,
		Scenarios: map[string]*ScenarioResult{},
		Baselines: map[string]*float64{},
		Ratios:    map[string]*float64{},
		Checks:    map[string]any{},
	}
}

// Num returns a pointer to v, or nil when v is not a finite number.
func Num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// ratio returns a/b, or nil when either is missing or b is zero.
func ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	return Num(round(*a / *b, 3))
}

// mean returns the mean of a and b, or nil when either is missing.
func mean(a, b *float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	return Num((*a + *b) / 2)
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// scenarioRPS returns a scenario's rps, or nil when it was not measured
// or nothing succeeded.
func (r *Report) scenarioRPS(name string) *float64 {
	s, ok := r.Scenarios[name]
	if !ok || s == nil || s.Ops == 0 {
		return nil
	}
	return Num(s.RPS)
}

// ComputeRatios fills Ratios from the scenarios and baselines measured.
// Every ratio is present, null when unmeasured.
func (r *Report) ComputeRatios() {
	r.Ratios[RatioSignupHotVsHotRow] = ratio(r.scenarioRPS(ScenarioSignupHot), r.Baselines[BaselineHotRow32])
	r.Ratios[RatioSignupHot256VsHotRow256] = ratio(r.scenarioRPS(ScenarioSignupHot256), r.Baselines[BaselineHotRow256])
	r.Ratios[RatioSignupHotVsSpread] = ratio(r.scenarioRPS(ScenarioSignupHot), r.scenarioRPS(ScenarioSignupSpread))
	r.Ratios[RatioSpreadVsSignupHot] = ratio(r.scenarioRPS(ScenarioSignupSpread), r.scenarioRPS(ScenarioSignupHot))
	r.Ratios[RatioSpreadVsAppendInsert] = ratio(r.scenarioRPS(ScenarioSignupSpread), r.Baselines[BaselineAppend32])
	r.Ratios[RatioCourseRushVsSignupHot] = ratio(r.scenarioRPS(ScenarioCourseRush), r.scenarioRPS(ScenarioSignupHot))
	r.Ratios[RatioGroupRushVsCourseRush] = ratio(r.scenarioRPS(ScenarioGroupRush), r.scenarioRPS(ScenarioCourseRush))
	r.Ratios[RatioPoolRushVsCourseRush] = ratio(r.scenarioRPS(ScenarioPoolRush), r.scenarioRPS(ScenarioCourseRush))
	r.Ratios[RatioSignupHotLimited] = ratio(r.scenarioRPS(ScenarioSignupHotLimited),
		mean(r.scenarioRPS(ScenarioSignupHotBefore), r.scenarioRPS(ScenarioSignupHotAfter)))
	r.Ratios[RatioFlashWaitlistVsFlash] = ratio(r.scenarioRPS(ScenarioWaitCrowd), r.scenarioRPS(ScenarioFlashCrowd))
	r.Ratios[RatioCancelHotVsSignupHot] = ratio(r.scenarioRPS(ScenarioCancelHot), r.scenarioRPS(ScenarioSignupHot))
	r.Ratios[RatioPromoteStormVsCancelHot] = ratio(r.scenarioRPS(ScenarioPromoteStorm), r.scenarioRPS(ScenarioCancelHot))
	r.Ratios[RatioViewsHotVsNaive] = ratio(r.scenarioRPS(ScenarioViewsHot), r.scenarioRPS(ScenarioViewsNaive))
	r.Ratios[RatioViewsHotVsPGUpsert] = ratio(r.scenarioRPS(ScenarioViewsHot), r.Baselines[BaselineNoteUpsert32])
	r.Ratios[RatioSeatsReadVsTrivial] = ratio(r.scenarioRPS(ScenarioSeatsRead), r.scenarioRPS(ScenarioTrivial))
	r.Ratios[RatioSignupHotWebhooks] = ratio(r.scenarioRPS(ScenarioSignupHotWebhooks), r.scenarioRPS(ScenarioSignupHot))
	r.Ratios[RatioActivityReadVsSignupHot] = ratio(r.scenarioRPS(ScenarioActivityRead), r.scenarioRPS(ScenarioSignupHot))
	r.Ratios[RatioOnSalePollVsSeatsRead] = ratio(r.scenarioRPS(ScenarioOnSalePoll), r.scenarioRPS(ScenarioSeatsRead))
	r.Ratios[RatioOnSaleJoinVsSignupHot] = ratio(r.scenarioRPS(ScenarioOnSaleJoin), r.scenarioRPS(ScenarioSignupHot))
	r.Ratios[RatioProductionVsSignupHot] = ratio(r.scenarioRPS(ScenarioProduction), r.scenarioRPS(ScenarioSignupHot))
	aroundDoor := mean(r.scenarioRPS(ScenarioSignupHotBeforeDoor), r.scenarioRPS(ScenarioSignupHotAfterDoor))
	r.Ratios[RatioDoorRushVsSignupHot] = ratio(r.scenarioRPS(ScenarioDoorRush), aroundDoor)
	r.Ratios[RatioDoorRushSignups] = ratio(r.scenarioRPS(ScenarioDoorRushSignups), aroundDoor)
	r.Ratios[RatioReleaseStormSignups] = ratio(r.scenarioRPS(ScenarioReleaseStormSignups), r.scenarioRPS(ScenarioReleaseStormBefore))
	r.Ratios[RatioDashboardsSignups] = ratio(r.scenarioRPS(ScenarioDashboards),
		mean(r.scenarioRPS(ScenarioDashboardsBefore), r.scenarioRPS(ScenarioDashboardsAfter)))
	if added, ok := r.cpuAdded(ScenarioSignupHotWebhooks, ScenarioSignupHot); ok {
		r.Checks[CheckWebhookCPUAdded] = added
	}
	r.computeProductionCost()
}

// cpuAdded returns how much more of the machine's processor time an
// operation of scenario took than one of base, in microseconds.
func (r *Report) cpuAdded(scenario, base string) (float64, bool) {
	s, b := r.Scenarios[scenario], r.Scenarios[base]
	if s == nil || b == nil || s.CPUMicrosPerOp == nil || b.CPUMicrosPerOp == nil {
		return 0, false
	}
	return s.CPUMicrosPerOp[CPUMachine] - b.CPUMicrosPerOp[CPUMachine], true
}

// ensureShape adds the keys that are always in the JSON but were not
// measured, as nulls, so a consumer always finds them.
func (r *Report) ensureShape() {
	for _, k := range []string{BaselineHotRow32, BaselineHotRow256, BaselineAppend32, BaselineNoteUpsert32} {
		if _, ok := r.Baselines[k]; !ok {
			r.Baselines[k] = nil
		}
	}
	for _, k := range []string{CheckFlashAdmitted, CheckFlashAdmissionTx, CheckFlash5xx, CheckCountHotMS,
		CheckCountHotPlan, CheckSignupDeadTuples, CheckSeatsReadPGQueries} {
		if _, ok := r.Checks[k]; !ok {
			r.Checks[k] = nil
		}
	}
	r.Checks[CheckFlashCapacity] = FlashCrowdCapacity
}

// WriteJSON writes the report, indented, to w.
func (r *Report) WriteJSON(w io.Writer) error {
	r.ensureShape()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("loadtest: encode report: %w", err)
	}
	return nil
}

// WriteJSONFile writes the report to path, creating its directory.
func (r *Report) WriteJSONFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
