package loadtest

import (
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// MarkdownMeta is what the report page says about how it was made.
type MarkdownMeta struct {
	Date             time.Time
	Command          string
	Scale            Scale
	ScenarioDuration time.Duration
	BaselineDuration time.Duration
	// ChartDir is where the charts are, relative to the page; empty: no
	// charts.
	ChartDir string
}

// topicsText introduces the targets' topics.
const topicsText = "Each target names the part of the service it measures: " +
	"**admission** (signups, group admission into PostgreSQL), **seat reads** (the display tier), " +
	"**seat changes** (cancellations on the same path as signups), **notes** (view and water counters), " +
	"**streams** (live seat streams, the console's dashboards), **waiting list** (waitlisted signups and promotion on release), " +
	"**spread** (signups over many activities at once, one seat each, in parties or sharing pools), " +
	"**webhooks** (deliveries of every event) and **doors** (tickets scanned at a check-in list, its ticket sync)."

// productionDescription says what production does, in the page's table.
const productionDescription = "signup_hot as a real deployment runs it: RS256 tokens of an identity provider checked against its JWK Set " +
	"(served by the load test), the access log at info, two webhooks for every event, and a waiting list on the hot activity " +
	"with a quarter of the signups expected free (the rest waitlisted, 202), 64 clients"

// scenarioDescriptions say what each scenario does, in the page's table.
var scenarioDescriptions = map[string]string{
	ScenarioSignupHot:         "POST signup, each a distinct user, to the hot activity (24k occupying of 80k rows at the start), 64 clients",
	ScenarioProduction:        productionDescription,
	ScenarioSignupHotWebhooks: "signup_hot with two webhooks for every event, delivered to a fast receiver in the load test, 64 clients",
	ScenarioSignupHotLimited:  "signup_hot on the hot activity with a code block of 10 reserved seats and in a series of at most 2 per user, 64 clients",
	ScenarioSignupHotBefore:   "signup_hot again just before signup_hot_limited, on the same capacityd: half of its baseline",
	ScenarioSignupHotAfter:    "signup_hot again just after signup_hot_limited (the block deleted, the activity out of the series): the other half",
	ScenarioOnSaleJoin:        "POST queue join, distinct users, to an activity of 2,000 seats with an admission queue (500 admitted a second) before it opens, 64 clients",
	ScenarioOnSalePoll:        "GET queue/me of those users round-robin once it opened, 64 clients; the admitted sign up with their tokens on the side",
	ScenarioCancelHot:         "POST cancel (as an admin) of the registrations signup_hot made on the hot activity, 64 clients",
	ScenarioSignupHot256:      "the same at 256 clients",
	ScenarioSignupSpread:      "POST signup, distinct users, round-robin over 1,000 ordinary activities (their seat counters warmed first, as the hot activity's), 64 clients",
	ScenarioFlashCrowd:        "20,000 distinct users, once each, for 500 seats of a new activity, 256 clients",
	ScenarioWaitCrowd:         "the flash crowd on an activity with a waiting list: 500 admitted (201), the others waitlisted (202)",
	ScenarioPromoteStorm:      "POST cancel (as an admin) of the 1,000 seats of a full activity with 5,000 waiting, each promoting the first in line, 64 clients; five such storms one after another, each on an activity of its own (rps: their cancellations over their summed durations)",
	ScenarioCourseRush:        "20,000 distinct users each signing up for 3 of 300 activities of 50 seats at once (60,000 requests), 256 clients",
	ScenarioGroupRush:         "course_rush with parties: each of the 20,000 users signs up a party of 1 to 4 seats (uniformly at random; all or nothing) for 3 of 300 activities of 50 seats (at most 4 seats per registration) at once (60,000 requests), 256 clients",
	ScenarioPoolRush:          "course_rush over pools: 100 pools of 60 seats, each shared by 3 activities of 40 seats (300 activities, 30 of them in the next pool too); 20,000 users each sign up for 3 of the activities at once, one seat each, a signup fitting its activity and every pool of it (60,000 requests), 256 clients",
	ScenarioSeatsRead:         "GET seats of the hot activity, cache warm, 64 clients",
	ScenarioActivityRead:      "signup_hot (64 clients) while 64 more clients read GET /v1/activities/{id} of the hot activity anonymously: its signups",
	ScenarioActivityReadReads: "the reads of activity_read: GET /v1/activities/{id} of the hot activity without a token, 64 clients",
	ScenarioTrivial:           "GET /healthz: the HTTP stack's ceiling on this machine, 64 clients",
	ScenarioViewsHot:          "POST views of one note, combining on, 64 clients",
	ScenarioViewsNaive:        "the same with NOTE_COMBINING=off (one upsert per request)",
	ScenarioSSEFanout:         "1,000 stream clients on one activity; latency from a signup to each client's event",
	ScenarioDoorRush: "POST redeem of 10,000 tickets (an activity's registrations, seeded in bulk) at a check-in list with entry once and room for 8,000, " +
		"each ticket once and 10% of them again at another device, each scan with its own Idempotency-Key, 16 devices (door-role tokens); " +
		"rps counts the scans answered (entered, already_checked_in or room_full)",
	ScenarioDoorRushLoaded:      "door_rush again at a second check-in list of the same activity while door_rush_signups run",
	ScenarioDoorRushSignups:     "POST signup, distinct users, to the hot activity, 64 clients, for as long as door_rush_with_signups lasts: its signups",
	ScenarioSignupHotBeforeDoor: "signup_hot again just before door_rush (its tickets read, its list made), on the same capacityd: half of the door's baseline",
	ScenarioSignupHotAfterDoor:  "signup_hot again just after door_rush_with_signups (its check-ins deleted): the other half",
	ScenarioReleaseStorm: "the no-shows' seats of 20 activities of 100 seats (60 seated without a check-in and 80 waiting on each) released at one moment " +
		"(their start, release_no_shows_after_minutes 0) by a capacityd restarted with the due work every second; " +
		"rps: seats released per second from the moment until the last line was refilled; latencies: each activity's time from the moment until " +
		"its 60 freed seats were refilled from its line, at the authority (read every 5 ms); errors: activities not refilled within 30 s",
	ScenarioReleaseStormBefore:  "POST signup, distinct users, to another activity, 64 clients, in the 3 s before the storm's moment",
	ScenarioReleaseStormSignups: "the same signups from the storm's first release transaction until its last line was refilled",
	ScenarioDashboards: "POST signup, distinct users, to the hot activity, 64 clients, while 200 organisers' dashboards watch it: each read its seats once, " +
		"then holds its seat stream and the counts stream of a check-in list of it (admin) open",
	ScenarioDashboardsBefore: "the same signups just before the dashboards opened (no dashboard)",
	ScenarioDashboardsAfter:  "the same signups just after the dashboards closed (no dashboard)",
	ScenarioDashboardsUpdates: "the dashboards' seat events during dashboards: for each signup and dashboard, from the signup's answer to the first event " +
		"sure to show it (taken at least as many above the start as signups were sent before the answer, less those that failed); " +
		"rps: updates shown per second; errors: not shown within 3 s of the end",
}

// baselineDescriptions say what each baseline runs.
var baselineDescriptions = map[string]string{
	BaselineHotRow1:        "`UPDATE lt_counter SET n = n + 1 WHERE id = 1`, 1 client (tps)",
	BaselineHotRow32:       "the same one-row UPDATE, 32 clients (tps)",
	BaselineHotRow256:      "the same one-row UPDATE, 256 clients (tps)",
	BaselineHotRow256Conns: "connections the 256 clients had",
	BaselineShard10x32:     "the UPDATE on one of 10 rows at random, 32 clients (tps)",
	BaselineAppend32:       "`INSERT` of one row per event into an append-only table, 32 clients (tps)",
	BaselineNoteUpsert32:   "one note's `INSERT … ON CONFLICT DO UPDATE SET views = views + 1 RETURNING`, 32 clients (tps)",
	BaselineHotRowAsync32:  "the one-row UPDATE with `synchronous_commit=off`, 32 clients (tps)",
	BaselineLoopbackPostCPU: "not PostgreSQL: processor time (µs) of one bare HTTP POST of an event-sized body over loopback, client and receiver both in the load test's process, " +
		"16 clients with keep-alive: the least a webhook delivery costs this machine",
}

// checkDescriptions say what each check measures.
var checkDescriptions = map[string]string{
	CheckFlashAdmitted:             "flash crowd signups answered 201",
	CheckFlashCapacity:             "the flash crowd activity's seats",
	CheckFlashAdmissionTx:          "admission transactions that reached PostgreSQL during the flash crowd (`/metrics` delta)",
	CheckFlash5xx:                  "flash crowd responses with a 5xx status",
	CheckFlashAuthorityTaken:       "the flash crowd activity's `taken` from the authority afterwards",
	CheckWaitUsers:                 "users of the waiting-list crowd",
	CheckWaitAdmitted:              "its signups answered 201 (500 seats)",
	CheckWaitWaitlisted:            "its signups answered 202 (waitlisted)",
	CheckWaitPositions:             "distinct `waitlist_position`s among the 202 answers",
	CheckWait5xx:                   "its responses with a 5xx status",
	CheckWaitAdmissionTx:           "admission transactions that reached PostgreSQL during it (`/metrics` delta)",
	CheckWaitTaken:                 "its activity's `taken` from the authority afterwards",
	CheckWaitWaiting:               "its activity's `waiting` from the authority afterwards",
	CheckPromoteSeats:              "seats of the promote storms' activities (five of 1,000), all taken and all cancelled",
	CheckPromoteWaitingBefore:      "registrations waiting before the cancellations (5,000 on each activity)",
	CheckPromoteCancelled:          "cancellations answered 200",
	CheckPromoteTaken:              "the activities' `taken` afterwards (GET /v1/activities/{id}), summed",
	CheckPromoteWaiting:            "the activities' `waiting` afterwards, summed",
	CheckPromotePromoted:           "`registration.promoted` events in the activities' feeds",
	CheckPromoteInLine:             "promotions that went, in order, to the first in line of their activity",
	CheckPromoteWithCancel:         "promotions recorded right after the cancellation that freed the seat, by the same request (in its transaction)",
	CheckCourseActivities:          "course rush activities (50 seats each)",
	CheckCourseAdmitted:            "course rush signups answered 201",
	CheckCourseFull:                "course rush signups refused as full (409 `activity_full`)",
	CheckCourse5xx:                 "course rush responses with a 5xx status",
	CheckCourseInexact:             "course rush activities whose `taken` is not min(capacity, users who asked for it)",
	CheckCourseRefusedNotFull:      "course rush activities that refused someone as full yet are not full",
	CheckCourseP99MS:               "course rush p99 latency (ms)",
	CheckGroupActivities:           "group rush activities (50 seats each, at most 4 per registration)",
	CheckGroupAdmitted:             "group rush parties answered 201",
	CheckGroupSeats:                "seats of the group rush parties answered 201",
	CheckGroupFull:                 "group rush parties refused as full (409 `activity_full`)",
	CheckGroup5xx:                  "group rush responses with a 5xx status",
	CheckGroupInexact:              "group rush activities whose `taken` is not the sum of the seats of their parties answered 201, or exceeds 50",
	CheckGroupRefusedFitting:       "group rush activities that refused as full a party no larger than the seats they have left (nothing is released: it fitted when refused)",
	CheckGroupRefusedNotFull:       "group rush activities that refused a party and yet are not full: rightly, each party refused was larger than the seats left (else counted above)",
	CheckGroupP99MS:                "group rush p99 latency (ms)",
	CheckPoolPools:                 "pool rush pools (60 seats each)",
	CheckPoolActivities:            "pool rush activities (40 seats each, 3 per pool)",
	CheckPoolShared:                "pool rush activities that also belong to the next pool",
	CheckPoolAdmitted:              "pool rush signups answered 201",
	CheckPoolFull:                  "pool rush signups refused as full (409 `activity_full`: the activity or one of its pools had no seat left)",
	CheckPool5xx:                   "pool rush responses with a 5xx status",
	CheckPoolOverCapacity:          "pool rush activities and pools whose `taken` exceeds their capacity",
	CheckPoolInexactActivities:     "pool rush activities whose `taken` is not their signups answered 201, or whose `remaining` is not the least of their own free seats and their pools'",
	CheckPoolInexactPools:          "pool rush pools whose `taken` is not the sum of their activities' signups answered 201, or whose `remaining` or activities are not what they should be",
	CheckPoolRefusedFitting:        "pool rush activities that refused someone as full yet have a seat left in themselves and every pool of them (nothing is released: it fitted when refused)",
	CheckPoolFullPools:             "pool rush pools with no seat left at the end",
	CheckPoolP99MS:                 "pool rush p99 latency (ms)",
	CheckCountHotMS:                "authority COUNT of the hot activity: median ms of prepared executions 7–20",
	CheckCountHotPlan:              "its plan after 20 executions (EXPLAIN ANALYZE, BUFFERS)",
	CheckCountSmallMS:              "the same COUNT for an ordinary activity (ms)",
	CheckCountSmallPlan:            "its plan",
	CheckHotRowDeadTuples:          "`n_dead_tup` after 16,000 updates of one row (autovacuum off)",
	CheckSignupDeadTuples:          "dead tuples left by 16,000 signups (activity + registration tables, autovacuum off)",
	CheckSignupDeadActivity:        "of which in `activity`",
	CheckSignupDeadRegs:            "of which in `registration`",
	CheckSeatsReadPGQueries:        "transactions in the bench database during seats_read (`pg_stat_database`)",
	CheckSeatsReadRedisErrors:      "Redis errors the service counted during seats_read (each suspends the cache for a second: reads go to PostgreSQL)",
	CheckSeatsReadRebuilds:         "display counters the service rebuilt from the authority during seats_read",
	CheckSeatsReadRedisCmds:        "commands the bench Redis ran during seats_read (`INFO commandstats`, INFO left out; the server's count: anything else on it counts too)",
	CheckSeatsReadRedisPerOp:       "of them per read (0 while the hot activity is warm in the instance's seat memory)",
	CheckSpreadCountersWarm:        "signup_spread's activities whose display counter existed when its timed part began (all of them expected: without one, an activity's first signup skips the gate and its commit builds the counter)",
	CheckSSEClients:                "stream clients that received the initial event",
	CheckSSEP99MS:                  "p99 ms from a signup to a stream client's event",
	CheckSSERSSMB:                  "capacityd's RSS with every stream open (MB)",
	CheckSSEStreamPGQueries:        "transactions in the bench database while the streams connected",
	CheckWebhookDrainSeconds:       "seconds from the end of signup_hot_webhooks until no webhook delivery was pending",
	CheckWebhookReceived:           "deliveries (event and webhook) the receiver got during signup_hot_webhooks",
	CheckWebhookDuplicates:         "deliveries the receiver got more than once",
	CheckWebhookCPUAdded:           "processor time of the whole machine per signup (µs) that the two webhooks added: signup_hot_webhooks' less signup_hot's",
	CheckProductionAdmitted:        "production signups answered 201 (a seat)",
	CheckProductionWaitlisted:      "production signups answered 202 (waitlisted, once the free seats ran out)",
	CheckProductionCPU:             "processor time of capacityd and PostgreSQL per production signup (µs)",
	CheckSignupHotCPU:              "the same per signup_hot signup (µs)",
	CheckProductionCPUAdded:        "what production's options (RS256 tokens, access log, two webhooks, waiting list) added to it per signup (µs): production's less signup_hot's",
	CheckDoorTickets:               "door rush tickets (registrations of its activity, one seat each)",
	CheckDoorScans:                 "door rush scans: every ticket once, 10% of them twice",
	CheckDoorDevices:               "door rush devices scanning at once",
	CheckDoorMaxInside:             "door rush check-in list's max_inside",
	CheckDoorEntered:               "door rush scans answered 200 entered (its first list)",
	CheckDoorInside:                "the list's `inside` afterwards",
	CheckDoorAlready:               "door rush scans refused 409 `already_checked_in`",
	CheckDoorRoomFull:              "door rush scans refused 409 `room_full`",
	CheckDoorOther:                 "door rush answers other than those three (another refusal, a 5xx, no answer), both rushes",
	CheckDoorEnteredTwice:          "registrations with more than one entry in a list's history (or answered 200 twice), both rushes",
	CheckDoorOverMax:               "seats inside over max_inside, both rushes' lists",
	CheckDoorInsideOff:             "how far each list's `inside` and `checked_in` are from its entries answered 200, summed over both",
	CheckDoorMismatched:            "entries answered 200 that are not in the list's history at the seq answered, and check-ins of the history no scan was answered 200 with (or not a one-seat, unforced entry at the next seq), both rushes",
	CheckDoorUnjustified:           "refusals as already checked in of a ticket with no entry in the history, and as room full while the room never filled, both rushes",
	CheckDoorSyncSeconds:           "seconds to read the door rush list's whole first ticket sync (GET tickets, pages of 1,000) after its rush, as a door device",
	CheckDoorSyncTickets:           "distinct registrations of the door rush's activity in that sync",
	CheckDoorSyncInexact:           "sync items not valid, whose entries or inside disagree with the history, or not of the crowd or named twice",
	CheckReleaseActivities:         "release storm activities (100 seats, 60 no-shows and 80 waiting each)",
	CheckReleaseNoShows:            "their seated registrations without a check-in",
	CheckReleaseReleased:           "`registration.released` events of a no-show, reason no_show, by the service, at or after the moment, once each",
	CheckReleaseWrong:              "every other release (of a registration that checked in, twice, early, by another reason) and every no-show left unreleased",
	CheckReleaseRefilled:           "promotions that went, in order, to the first in line of their activity",
	CheckReleaseInTx:               "promotions recorded right after the releases of their transaction (same transaction time, the service's, no request)",
	CheckReleaseInexact:            "release storm activities whose `taken` is not 100 or `waiting` not 20 afterwards",
	CheckReleaseTransactions:       "release transactions (distinct transaction times of the releases)",
	CheckReleaseP99MS:              "p99 across the activities of the time from the moment until the line was refilled at the authority (ms; the due work's wait for its pass included)",
	CheckReleaseWaitMS:             "from the moment until the first release transaction began (ms): the due work's wait for its pass and its claim",
	CheckReleaseWorkMS:             "from the first release transaction's start until the last line was seen refilled (ms)",
	CheckReleaseTxEveryMS:          "mean time between the starts of the release transactions (ms)",
	CheckReleaseSignupsLost:        "the bystanders' signups the storm cost: their rate in the 3 s before the moment over the window from the first release transaction to the last refill, less those answered in it",
	CheckReleaseFixedVsBefore:      "the bystanders' signups/s in the 2 s from the moment (a window of the same length whatever the storm's) over their rate in the 3 s before",
	CheckDashboardsOpen:            "dashboards whose seat stream and list stream both opened, for the signups of dashboards",
	CheckDashboardsListOpenSeconds: "how long their list streams were open (s), from their opening until their close after the signups",
	CheckDashboardsListReadsPerStream: "reads of `checkin_list` (its scans in `pg_stat_user_tables`, flushed) from before they opened until after they closed, per list stream: " +
		"the list streams of one instance share one read of their list as the first connects and one per announced change of it, whatever the signups do",
	CheckDashboardsListEvents: "counts events the list streams sent while the signups ran (signups change no list's counts)",
	CheckDashboardsP99MS:      "p99 ms from a signup's answer to each dashboard's seat event showing it",
	CheckDashboardsDisplayBehind: "seats the display (`GET …/seats`) was behind the authority just before those signups began, " +
		"nothing in flight: the updates count from the authority's taken",
	CheckDashboardsPGQueries: "transactions in the bench database while as many dashboards again connected (seat read, seat stream, list stream) and sat idle 6 s, " +
		"nothing else running, read once every backend had flushed its statistics",
	CheckDashboardsSeatPGQueries:   "of them while the seat halves (seat read and seat stream) connected, read 1.5 s after",
	CheckDashboardsListPGQueries:   "of them the list streams' reads of their list (`checkin_list` scans)",
	CheckDashboardsListPGPerStream: "of them per list stream: the streams of one instance share one read of their list as the first connects",
	CheckDashboardsOtherPGQueries: "of them neither: the connection pool's liveness pings (`-- ping`, a transaction each, on a connection idle over a second) " +
		"and the service's periodic work (the bench service's expiry, reconciliation, webhook backlog, on-sale listing and key reading are hourly), and autovacuum",
	CheckDashboardsBaselinePGQueries: "transactions in the bench database in a window as long just after, with no dashboard open: the service's periodic work and the pool's pings",
	CheckDashboardsCausedPGQueries:   "the dashboards' window's transactions less the baseline's: those the dashboards caused",
	CheckDashboardsAutovacuums:       "autovacuum and autoanalyze runs on the bench tables meanwhile",
	CheckDashboardsSubscriptionLosses: "times the service's Redis subscription to change announcements failed in that window and as long after " +
		"(`capacityd_seat_stream_subscription_losses_total`): after each, its streams re-read what they follow for about 10 s, PostgreSQL included",
}

// scenarioOrder is the order of the page's table; others follow sorted.
var scenarioOrder = []string{ScenarioSignupHot, ScenarioProduction, ScenarioActivityRead, ScenarioActivityReadReads,
	ScenarioDashboardsBefore, ScenarioDashboards, ScenarioDashboardsAfter, ScenarioDashboardsUpdates, ScenarioSignupHotWebhooks,
	ScenarioSignupHotBefore, ScenarioSignupHotLimited, ScenarioSignupHotAfter, ScenarioCancelHot, ScenarioSignupHot256, ScenarioSignupSpread, ScenarioFlashCrowd,
	ScenarioWaitCrowd, ScenarioPromoteStorm, ScenarioCourseRush, ScenarioGroupRush, ScenarioPoolRush,
	ScenarioSignupHotBeforeDoor, ScenarioDoorRush, ScenarioDoorRushLoaded, ScenarioDoorRushSignups, ScenarioSignupHotAfterDoor, ScenarioReleaseStorm, ScenarioReleaseStormBefore, ScenarioReleaseStormSignups,
	ScenarioOnSaleJoin, ScenarioOnSalePoll, ScenarioSeatsRead, ScenarioTrivial, ScenarioViewsHot, ScenarioViewsNaive, ScenarioSSEFanout}

// orderedScenarios returns the report's scenario names in page order.
func orderedScenarios(r *Report) []string {
	var names []string
	for _, n := range scenarioOrder {
		if _, ok := r.Scenarios[n]; ok {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range r.Scenarios {
		if !slices.Contains(scenarioOrder, n) {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// WriteMarkdown renders the report as BENCHMARKS.md.
func WriteMarkdown(w io.Writer, r *Report, m MarkdownMeta) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmarks\n\n")
	p("Generated by `make bench` — do not edit by hand; every figure below is measured by that run.\n\n")
	p("- **Date:** %s\n", m.Date.UTC().Format("2006-01-02 15:04 MST"))
	p("- **Machine:** %s\n", r.Machine)
	p("- **Command:** `%s`\n", m.Command)
	p("- **Dataset:** %d activities of %d registrations plus a hot activity of %d (70%% cancelled, %d occupying): %d rows, the hot rows interleaved among the others\n",
		m.Scale.Activities, m.Scale.PerActivity, m.Scale.HotRows, m.Scale.HotOccupying(), m.Scale.Rows())
	p("- **Durations:** %s per HTTP scenario, %s per baseline; the load generator shares the machine with capacityd, PostgreSQL and Redis\n\n",
		m.ScenarioDuration, m.BaselineDuration)

	p("## Targets\n\n")
	p("%s\n\n", topicsText)
	p("| topic | measure | target | measured | met |\n|---|---|---|---|---|\n")
	for _, t := range Targets(r) {
		met := "not measured"
		if t.Met != nil {
			met = map[bool]string{true: "**yes**", false: "**no**"}[*t.Met]
		}
		p("| %s | %s | %s | %s | %s |\n", t.Topic, t.What, t.Want, mdCell(t.Got), met)
	}

	p("\n## HTTP scenarios\n\n")
	p("rps counts successful operations per second; latencies (HdrHistogram) are of successful operations.\n\n")
	p("| scenario | what | clients | ok | rps | p50 ms | p95 ms | p99 ms | max ms | errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range orderedScenarios(r) {
		s := r.Scenarios[n]
		what := scenarioDescriptions[n]
		if s.Note != "" {
			what = strings.TrimPrefix(what+"; "+s.Note, "; ")
		}
		p("| %s | %s | %d | %d | %.0f | %s | %s | %s | %s | %d |\n", n, mdCell(what), s.Clients, s.Ops, s.RPS,
			trimFloat(s.P50MS), trimFloat(s.P95MS), trimFloat(s.P99MS), trimFloat(s.MaxMS), s.Errors)
	}

	if cpu := cpuRows(r); cpu != "" {
		p("\n## Processor time per operation\n\n")
		p("Measured from /proc while each scenario ran: the share of all cores that were busy, and the processor time per successful operation, in µs, " +
			"of the whole machine and of each process (the load test's own includes its webhook receiver and stream clients).\n\n")
		p("| scenario | cores busy | machine µs/op | capacityd | PostgreSQL | Redis | load test |\n|---|---|---|---|---|---|---|\n")
		p("%s", cpu)
		if line := productionCostLine(r); line != "" {
			p("\n%s", line)
		}
	}

	if wal := walRows(r); wal != "" {
		p("\n## WAL per operation\n\n")
		p("The write-ahead log PostgreSQL wrote while each scenario ran, per successful operation: how far the server's WAL insert position moved, " +
			"in bytes. It covers the whole server, with its background work (autovacuum, checkpoints), and it includes the full-page images " +
			"written for pages first changed since the last checkpoint, so a scenario that runs just after a checkpoint begins writes more.\n\n")
		p("| scenario | WAL bytes/op |\n|---|---|\n")
		p("%s", wal)
	}

	p("\n## Baselines\n\n")
	p("pgbench-like scripts run through pgx in the load test's process, one connection per client (prepared statements), against the bench database; "+
		"and one that is not PostgreSQL's, %s.\n\n", BaselineLoopbackPostCPU)
	p("| baseline | what | value |\n|---|---|---|\n")
	for _, k := range sortedKeys(r.Baselines) {
		p("| %s | %s | %s |\n", k, baselineDescriptions[k], numCell(r.Baselines[k]))
	}
	if c := r.Baselines[BaselineHotRow256Conns]; c != nil && *c < 256 {
		p("\nThe server's `max_connections` left room for %s connections, so the 256 clients of %s shared them (a pool), as a connection pooler would make them.\n",
			trimFloat(*c), BaselineHotRow256)
	}

	p("\n## Ratios\n\n| ratio | value |\n|---|---|\n")
	for _, k := range sortedKeys(r.Ratios) {
		p("| %s | %s |\n", k, numCell(r.Ratios[k]))
	}

	p("\n## Checks\n\n| check | what | value |\n|---|---|---|\n")
	checks := make([]string, 0, len(r.Checks))
	for k := range r.Checks {
		checks = append(checks, k)
	}
	sort.Strings(checks)
	for _, k := range checks {
		p("| %s | %s | %s |\n", k, checkDescriptions[k], mdCell(anyCell(r.Checks[k])))
	}

	if m.ChartDir != "" {
		p("\n## Charts\n\n")
		p("![Throughput by scenario](%s)\n\n", path.Join(m.ChartDir, ThroughputChart))
		p("![Latency percentiles by scenario](%s)\n", path.Join(m.ChartDir, LatencyChart))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cpuRows returns the rows of the processor-time table, one per scenario
// measured with it, in page order.
func cpuRows(r *Report) string {
	var b strings.Builder
	for _, n := range orderedScenarios(r) {
		s := r.Scenarios[n]
		c := s.CPUMicrosPerOp
		if c == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f%% | %.0f | %.0f | %.0f | %.0f | %.0f |\n", n, 100*s.CPUBusy,
			c[CPUMachine], c[CPUCapacityd], c[CPUPostgres], c[CPURedis], c[CPULoadTest])
	}
	return b.String()
}

// walRows returns the rows of the WAL table, one per scenario measured
// with it, in page order.
func walRows(r *Report) string {
	var b strings.Builder
	for _, n := range orderedScenarios(r) {
		if w := r.Scenarios[n].WALBytesPerOp; w != nil {
			fmt.Fprintf(&b, "| %s | %.0f |\n", n, *w)
		}
	}
	return b.String()
}

// WriteMarkdownFile writes the page to path.
func WriteMarkdownFile(path string, r *Report, m MarkdownMeta) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	if err := WriteMarkdown(f, r, m); err != nil {
		f.Close()
		return fmt.Errorf("loadtest: write %s: %w", path, err)
	}
	return f.Close()
}

func sortedKeys(m map[string]*float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func numCell(v *float64) string {
	if v == nil {
		return "not measured"
	}
	return trimFloat(*v)
}

func anyCell(v any) string {
	if v == nil {
		return "not measured"
	}
	if f, ok := checkNumber(v); ok {
		return trimFloat(f)
	}
	return fmt.Sprint(v)
}

// mdCell escapes a value for a table cell.
func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
