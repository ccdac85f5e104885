package loadtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// dashboards' timing.
const (
	// dashboardClients sign distinct users up, as signup_hot's do.
	dashboardClients = 64
	// dashboardWindowMax is the length of each of the three signup windows
	// while the scenario duration is at most twice it (half the duration
	// beyond).
	dashboardWindowMax = 5 * time.Second
	// dashboardIdle is how long the counted dashboards sit idle once open:
	// one period of the check-in list stream's poll (listStreamPoll, 5 s,
	// in httpapi) and a second, so that each list stream polls once.
	dashboardIdle = 6 * time.Second
	// dashboardSettle bounds the wait, after the signups, for every
	// dashboard to show the last of them.
	dashboardSettle = 3 * time.Second
	// dashboardConnect bounds the wait for the streams to open.
	dashboardConnect = 30 * time.Second
)

// dashboardRun is the state of one dashboards scenario.
type dashboardRun struct {
	hot, list string
	// toks are the three windows' users, n each.
	toks   []string
	n      int
	window time.Duration
	// open is the dashboards open during the signups, listsFor how long
	// their list streams were open; shown and missing their updates.
	open           int64
	listsFor       time.Duration
	shown, missing int64
	listEvents     int64
	updates        *ScenarioResult
	// stats are the bench tables' statistics before the dashboards
	// opened for the signups, after they closed (and before the counted
	// ones opened), and after the counted ones closed.
	stats            [3]tableStats
	seatsIdle, lists int64
	// tx are the bench database's transactions before the counted
	// dashboards opened, once their seat halves were open, once their
	// list streams had sat idle and closed, and as long again after (no
	// dashboard open: the baseline); txOK is false without a monitor,
	// baselineOK when the last read failed.
	tx               [4]int64
	txOK, baselineOK bool
	// losses are the service's subscription losses from before the
	// counted dashboards opened until the baseline's window ended;
	// lossesOK when both ends were read.
	losses   int64
	lossesOK bool
	// displayBehind is the authority's taken less the display's, read
	// just before the signups.
	displayBehind int64
}

// dashboards is the organisers' console's live activity dashboard under
// signup_hot's load: Sizes.Dashboards dashboards, each reading the hot
// activity's seats once (the page's render, from the display tier), then
// holding its public seat stream and the counts stream of a check-in list
// of it open (admin). 64 clients sign distinct users up for the hot
// activity for a window just before the dashboards open
// (dashboards_signups_before), one with them open (dashboards), and one
// just after they closed (dashboards_signups_after). Every signup's time
// from its answer to each dashboard's seat event showing it is recorded
// (dashboards_updates), and the dashboards' reads of the list, from the
// table's statistics, from before they opened until after they closed.
// Then, with nothing else running, as many dashboards again open and sit
// idle through one poll of the list stream, and the bench database's
// transactions are counted.
func (b *bench) dashboards(ctx context.Context) error {
	r, err := b.setupDashboards(ctx)
	if err != nil {
		return err
	}
	defer b.dropDashboardList(context.WithoutCancel(ctx), r.list)
	b.dashboardSignups(ctx, ScenarioDashboardsBefore, r.toks[:r.n], r.window, nil)
	// The signups read no list: the scans read now and after the
	// statistics of the dashboards' reads were flushed are theirs.
	r.stats[0] = b.tableStats(ctx)
	if err := b.dashboardsUnderSignups(ctx, r); err != nil {
		return errors.Join(err, b.resetHot(ctx))
	}
	b.dashboardSignups(ctx, ScenarioDashboardsAfter, r.toks[2*r.n:], r.window, nil)
	if err := b.resetHot(ctx); err != nil {
		return err
	}
	// The reset dropped the display counter: the counted dashboards read
	// a warm one. Idle backends flush their statistics up to 10 s late,
	// those of the reset's and the warm-up's transactions too.
	if err := b.warmSeats(ctx, r.hot); err != nil {
		return err
	}
	if err := sleep(ctx, b.cfg.StatsIdleWait); err != nil {
		return err
	}
	r.stats[1] = b.tableStats(ctx)
	if err := b.countDashboards(ctx, r); err != nil {
		return err
	}
	b.recordDashboards(r)
	return nil
}

// setupDashboards warms the hot activity's seats, creates its check-in
// list and signs the users of the three windows.
func (b *bench) setupDashboards(ctx context.Context) (*dashboardRun, error) {
	r := &dashboardRun{hot: b.seed.HotActivity, window: b.dashboardWindow()}
	r.n = int(r.window.Seconds()*maxSignupRate) + 1000
	var err error
	if r.toks, err = b.tokens(ScenarioDashboards, 3*r.n); err != nil {
		return nil, err
	}
	l, err := b.api.WithToken(b.admin).CreateCheckinList(ctx, client.NewCheckinList{
		Name: "Dashboards " + b.nonce, ActivityIDs: []string{r.hot}})
	if err != nil {
		return nil, fmt.Errorf("loadtest: create the dashboards' check-in list: %w", err)
	}
	r.list = l.ID
	return r, b.warmSeats(ctx, r.hot)
}

// dashboardWindow is the length of each signup window: the scenario
// duration up to dashboardWindowMax, half of it beyond twice that.
func (b *bench) dashboardWindow() time.Duration {
	d := b.cfg.ScenarioDuration
	return max(d/2, min(d, dashboardWindowMax))
}

// dropDashboardList deletes the scenario's check-in list.
func (b *bench) dropDashboardList(ctx context.Context, list string) {
	if err := b.api.WithToken(b.admin).DeleteCheckinList(ctx, list); err != nil {
		fmt.Fprintf(b.log, "%-16s cleanup: %v\n", ScenarioDashboards, err)
	}
}

// dashboardSignups signs toks' users up for the hot activity from 64
// clients for d, reported as name. A signup started before d passed runs
// to its answer (the window's time is until the last answer): one
// withdrawn at the deadline would leave the marks answered just before it
// waiting for a seat that is never taken. With marks, every signup is
// marked: counted when sent, marked when answered with a seat.
func (b *bench) dashboardSignups(ctx context.Context, name string, toks []string, d time.Duration, marks *updateMarks) {
	hot := b.seed.HotActivity
	out := b.drive(ctx, Load{Name: name, Clients: dashboardClients, Duration: d, MaxOps: int64(len(toks))},
		func(_ context.Context, _ int, i int64) error {
			if marks == nil {
				return b.signupAdmitted(ctx, toks[i], hot)
			}
			marks.sending()
			if err := b.signupAdmitted(ctx, toks[i], hot); err != nil {
				marks.failedOne()
				return err
			}
			marks.answered()
			return nil
		})
	b.report.Scenarios[name] = out.Result(dashboardClients)
}

// dashboardsUnderSignups opens the dashboards, runs the signups with them
// open and records what the dashboards showed of them.
func (b *bench) dashboardsUnderSignups(ctx context.Context, r *dashboardRun) error {
	g := newDashboardGroup(r.hot, r.list, b.cfg.Dashboards)
	s := newDashboardStreams(ctx, g, b.api.BaseURL, b.admin)
	defer s.close()
	t0 := time.Now()
	s.openSeats()
	s.openLists()
	if err := b.waitDashboards(ctx, g); err != nil {
		return err
	}
	r.open = min(g.seatsOpen.Load(), g.listsOpen.Load())
	b.followSignups(ctx, r, g)
	s.close()
	r.listsFor = time.Since(t0)
	lat, shown, missing := g.updates()
	r.shown, r.missing, r.listEvents = shown, missing, g.listEvents.Load()
	elapsed := r.window
	if res := b.report.Scenarios[ScenarioDashboards]; res != nil {
		res.Note = fmt.Sprintf("%d dashboards open", r.open)
		elapsed = time.Duration(res.Seconds * float64(time.Second))
	}
	r.updates = Outcome{Ops: shown, Errors: missing, Elapsed: elapsed, Lat: lat}.Result(int(r.open))
	r.updates.Note = fmt.Sprintf("%d dashboards, %d signups", r.open, len(g.marks.snapshot()))
	b.report.Scenarios[ScenarioDashboardsUpdates] = r.updates
	return nil
}

// waitDashboards waits for g's seat halves and list streams to open, and
// fails when none did.
func (b *bench) waitDashboards(ctx context.Context, g *dashboardGroup) error {
	n := len(g.boards)
	if err := waitOpen(ctx, &g.seatsOpen, &g.seatsFailed, n); err != nil {
		return err
	}
	if err := waitOpen(ctx, &g.listsOpen, &g.listsFailed, n); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "%-16s %d dashboards: seat streams %d open, %d failed; list streams %d open, %d failed\n",
		ScenarioDashboards, n, g.seatsOpen.Load(), g.seatsFailed.Load(), g.listsOpen.Load(), g.listsFailed.Load())
	if g.seatsOpen.Load() == 0 || g.listsOpen.Load() == 0 {
		return fmt.Errorf("no dashboard opened: %v", g.firstError())
	}
	return nil
}

// waitOpen waits until n streams opened or failed, or dashboardConnect
// passed.
func waitOpen(ctx context.Context, open, failed *atomic.Int64, n int) error {
	deadline := time.Now().Add(dashboardConnect)
	for open.Load()+failed.Load() < int64(n) && time.Now().Before(deadline) {
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// followSignups runs the signups with the dashboards open, their base the
// hot activity's taken just before from the authority (exact: no signup
// is in flight; the display may lag it, and a base read from it could
// count signups as shown that are not), then waits up to dashboardSettle
// for every dashboard to show the last of them.
func (b *bench) followSignups(ctx context.Context, r *dashboardRun, g *dashboardGroup) {
	a, err := b.api.WithToken(b.admin).GetActivity(ctx, r.hot)
	if err != nil {
		fmt.Fprintf(b.log, "%-16s read the hot activity before the signups: %v\n", ScenarioDashboards, err)
		return
	}
	if s, err := b.api.Seats(ctx, r.hot); err == nil {
		r.displayBehind = int64(a.Taken - s.Taken)
	}
	g.arm(int64(a.Taken))
	b.dashboardSignups(ctx, ScenarioDashboards, r.toks[r.n:2*r.n], r.window, g.marks)
	marks := g.marks.snapshot()
	if len(marks) == 0 {
		return
	}
	last := marks[len(marks)-1].need
	for deadline := time.Now().Add(dashboardSettle); !g.allShown(last) && time.Now().Before(deadline); {
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return
		}
	}
}

// countDashboards opens as many dashboards again with nothing else
// running, their seat halves first, then their list streams, lets them
// sit idle for dashboardIdle and closes them, counting the bench
// database's transactions before, once the seat halves were open (their
// statistics given statsFlushWait), once every backend flushed its
// statistics after the close, and as long again later, with no dashboard
// open: the transactions of that last window are the service's own and
// the measure's, which the dashboards' window has too.
func (b *bench) countDashboards(ctx context.Context, r *dashboardRun) error {
	started := time.Now()
	if r.tx[0], r.txOK = b.benchTransactions(ctx); !r.txOK {
		return nil
	}
	lossesBefore, beforeOK := b.subscriptionLosses(ctx)
	g := newDashboardGroup(r.hot, r.list, b.cfg.Dashboards)
	s := newDashboardStreams(ctx, g, b.api.BaseURL, b.admin)
	defer s.close()
	s.openSeats()
	if err := waitOpen(ctx, &g.seatsOpen, &g.seatsFailed, len(g.boards)); err != nil {
		return err
	}
	if err := sleep(ctx, statsFlushWait); err != nil {
		return err
	}
	r.tx[1], _ = b.benchTransactions(ctx)
	s.openLists()
	if err := b.waitDashboards(ctx, g); err != nil {
		return err
	}
	if err := sleep(ctx, dashboardIdle); err != nil {
		return err
	}
	s.close()
	r.seatsIdle, r.lists = g.seatsOpen.Load(), g.listsOpen.Load()
	if err := sleep(ctx, b.cfg.StatsIdleWait); err != nil {
		return err
	}
	r.tx[2], r.txOK = b.benchTransactions(ctx)
	// As long again with no dashboard: what the service's own periodic
	// work and the pool's pings cost the database meanwhile.
	if err := sleep(ctx, time.Since(started)); err != nil {
		return err
	}
	r.tx[3], r.baselineOK = b.benchTransactions(ctx)
	r.stats[2] = b.tableStats(ctx)
	lossesAfter, afterOK := b.subscriptionLosses(ctx)
	r.losses, r.lossesOK = int64(lossesAfter-lossesBefore), beforeOK && afterOK
	return nil
}

// subscriptionLosses reads the service's count of losses of its Redis
// subscription to change announcements; false when /metrics could not be
// read or does not have it.
func (b *bench) subscriptionLosses(ctx context.Context) (float64, bool) {
	text, err := b.api.Text(ctx, "/metrics")
	if err != nil {
		fmt.Fprintf(b.log, "%-16s read /metrics: %v\n", ScenarioDashboards, err)
		return 0, false
	}
	return SumMetric(text, "capacityd_seat_stream_subscription_losses_total")
}

// benchTransactions reads the bench database's transactions so far;
// false without a monitor or when the read failed.
func (b *bench) benchTransactions(ctx context.Context) (int64, bool) {
	if b.mon == nil {
		return 0, false
	}
	n, err := b.mon.Transactions(ctx)
	if err != nil {
		fmt.Fprintf(b.log, "%-16s %v\n", ScenarioDashboards, err)
		return 0, false
	}
	return n, true
}

// tableStats are statistics of the bench database's tables: how many
// times checkin_list was read (sequential and index scans), which only
// the list streams do while the dashboards run, and how many times
// autovacuum vacuumed or analyzed a table (each run is transactions of
// the bench database).
type tableStats struct {
	listScans, vacuums int64
	ok                 bool
}

// tableStats reads the bench tables' statistics (pg_stat_user_tables),
// on the bench database's own connection, in one statement: a
// transaction of its own reads them afresh, and is one transaction of
// the bench database. ok is false without a connection or when the read
// failed.
func (b *bench) tableStats(ctx context.Context) tableStats {
	if b.db == nil {
		return tableStats{}
	}
	var s tableStats
	err := b.db.QueryRow(ctx, `SELECT
		coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)) FILTER (WHERE relname = 'checkin_list'), 0)::bigint,
		coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint
		FROM pg_stat_user_tables`).Scan(&s.listScans, &s.vacuums)
	if err != nil {
		fmt.Fprintf(b.log, "%-16s read the tables' statistics: %v\n", ScenarioDashboards, err)
		return tableStats{}
	}
	s.ok = true
	return s
}

// since is what happened from s0 to s: the list's reads and the
// autovacuum runs; ok only if both were read.
func (s tableStats) since(s0 tableStats) (listReads, vacuums int64, ok bool) {
	return s.listScans - s0.listScans, s.vacuums - s0.vacuums, s.ok && s0.ok
}

// recordDashboards puts the scenario's checks in the report and logs
// them.
func (b *bench) recordDashboards(r *dashboardRun) {
	ch := b.report.Checks
	ch[CheckDashboardsOpen] = r.open
	ch[CheckDashboardsListEvents] = r.listEvents
	if r.updates != nil {
		ch[CheckDashboardsP99MS] = r.updates.P99MS
		ch[CheckDashboardsDisplayBehind] = r.displayBehind
		fmt.Fprintf(b.log, "%-16s updates: %d shown, %d missing; from a signup's answer to a dashboard's event p50 %.1f ms, p99 %.1f ms, max %.1f ms "+
			"(the display %d seats behind the authority when they began)\n",
			ScenarioDashboards, r.shown, r.missing, r.updates.P50MS, r.updates.P99MS, r.updates.MaxMS, r.displayBehind)
	}
	reads := "not counted"
	if n, _, ok := r.stats[1].since(r.stats[0]); ok && r.open > 0 {
		perStream := round(float64(n)/float64(r.open), 2)
		ch[CheckDashboardsListReadsPerStream] = perStream
		ch[CheckDashboardsListOpenSeconds] = round(r.listsFor.Seconds(), 1)
		reads = fmt.Sprintf("%d, %.2f per list stream in its %.1f s", n, perStream, r.listsFor.Seconds())
	}
	fmt.Fprintf(b.log, "%-16s while the signups ran: reads of the list %s; counts events %d\n", ScenarioDashboards, reads, r.listEvents)
	if !r.txOK {
		return
	}
	total, seat := r.tx[2]-r.tx[0], r.tx[1]-r.tx[0]
	ch[CheckDashboardsPGQueries] = total
	ch[CheckDashboardsSeatPGQueries] = seat
	baseline := "not read"
	if r.baselineOK {
		ch[CheckDashboardsBaselinePGQueries] = r.tx[3] - r.tx[2]
		ch[CheckDashboardsCausedPGQueries] = max(0, total-(r.tx[3]-r.tx[2]))
		baseline = fmt.Sprintf("%d in as long a window without them, so %d caused by them", r.tx[3]-r.tx[2], max(0, total-(r.tx[3]-r.tx[2])))
	}
	listReads, vacuums, ok := r.stats[2].since(r.stats[1])
	split := "not told apart"
	if ok {
		ch[CheckDashboardsListPGQueries] = listReads
		ch[CheckDashboardsOtherPGQueries] = total - seat - listReads
		ch[CheckDashboardsAutovacuums] = vacuums
		if r.lists > 0 {
			ch[CheckDashboardsListPGPerStream] = round(float64(listReads)/float64(r.lists), 2)
		}
		split = fmt.Sprintf("the list streams' reads of the list %d (%d streams), other %d (autovacuum ran %d times)", listReads, r.lists, total-seat-listReads, vacuums)
	}
	losses := "not read"
	if r.lossesOK {
		ch[CheckDashboardsSubscriptionLosses] = r.losses
		losses = strconv.FormatInt(r.losses, 10)
	}
	fmt.Fprintf(b.log, "%-16s idle, nothing else running: PostgreSQL transactions %d while %d dashboards connected and sat idle %s: "+
		"seat halves %d (read %s after), %s; %s; the service's subscription to change announcements lost %s times meanwhile\n",
		ScenarioDashboards, total, r.seatsIdle, dashboardIdle, seat, statsFlushWait, split, baseline, losses)
}
