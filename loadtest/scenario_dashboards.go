package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
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
	// dashboardIdle is how long the open dashboards sit idle while their
	// transactions are counted: one period of the check-in list stream's
	// poll (listStreamPoll, 5 s, in httpapi), in which each list stream
	// reads its list once.
	dashboardIdle = 5 * time.Second
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
	// tx are the bench database's transactions before the dashboards
	// opened, once their seat halves were open, once their list streams
	// were, and after they sat idle; txOK is false without a monitor.
	tx   [4]int64
	txOK bool
	// scans are the reads of the checkin_list table once the dashboards
	// sat idle and at the end; scansAt is when the first was taken and
	// closed when the dashboards closed.
	scans          [2]int64
	scansOK        bool
	scansAt        time.Time
	closed         time.Time
	open           int64
	shown, missing int64
	listEvents     int64
	updateP99      float64
}

// dashboards is the organisers' console's live activity dashboard under
// signup_hot's load: Sizes.Dashboards dashboards, each reading the hot
// activity's seats once (the page's render, from the display tier), then
// holding its public seat stream and the counts stream of a check-in list
// of it open (admin). 64 clients sign distinct users up for the hot
// activity for a window just before the dashboards open
// (dashboards_signups_before), one with them open (dashboards), and one
// just after they closed (dashboards_signups_after). Between the first two
// the bench database's transactions are counted while the dashboards
// connect and sit idle for one list-stream poll; while the signups run,
// the dashboards' reads of the list are counted from the table's
// statistics, and every signup's time from its answer to each dashboard's
// seat event showing it is recorded (dashboards_updates).
func (b *bench) dashboards(ctx context.Context) error {
	r, err := b.setupDashboards(ctx)
	if err != nil {
		return err
	}
	defer b.dropDashboardList(context.WithoutCancel(ctx), r.list)
	b.dashboardSignups(ctx, ScenarioDashboardsBefore, r.toks[:r.n], r.window, nil)
	g, closeAll, err := b.openDashboards(ctx, r)
	if err != nil {
		return err
	}
	b.followSignups(ctx, r, g)
	closeAll()
	r.closed = time.Now()
	lat, shown, missing := g.updates()
	r.shown, r.missing, r.listEvents = shown, missing, g.listEvents.Load()
	elapsed := r.window
	if s := b.report.Scenarios[ScenarioDashboards]; s != nil {
		s.Note = fmt.Sprintf("%d dashboards open", r.open)
		elapsed = time.Duration(s.Seconds * float64(time.Second))
	}
	res := Outcome{Ops: shown, Errors: missing, Elapsed: elapsed, Lat: lat}.Result(int(r.open))
	res.Note = fmt.Sprintf("%d dashboards, %d signups", r.open, len(g.marks.snapshot()))
	b.report.Scenarios[ScenarioDashboardsUpdates] = res
	r.updateP99 = res.P99MS
	b.dashboardSignups(ctx, ScenarioDashboardsAfter, r.toks[2*r.n:], r.window, nil)
	if err := b.resetHot(ctx); err != nil {
		return err
	}
	// The reads of the list during the signups: once the backends that
	// made them flushed their statistics, idle ones up to 10 s late.
	if err := sleep(ctx, b.cfg.StatsIdleWait-time.Since(r.closed)); err != nil {
		return err
	}
	if r.scansOK {
		r.scans[1], r.scansOK = b.listScans(ctx)
	}
	b.recordDashboards(r, res)
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
// clients for d, reported as name. With marks, every signup is marked:
// counted when sent, marked when answered with a seat.
func (b *bench) dashboardSignups(ctx context.Context, name string, toks []string, d time.Duration, marks *updateMarks) {
	hot := b.seed.HotActivity
	out := b.drive(ctx, Load{Name: name, Clients: dashboardClients, Duration: d, MaxOps: int64(len(toks))},
		func(ctx context.Context, _ int, i int64) error {
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

// openDashboards opens the dashboards, their seat halves first, then
// their list streams, and lets them sit idle for dashboardIdle, counting
// the bench database's transactions before, between and after. The
// returned function closes them all.
func (b *bench) openDashboards(ctx context.Context, r *dashboardRun) (*dashboardGroup, func(), error) {
	n := b.cfg.Dashboards
	g := newDashboardGroup(r.hot, r.list, n)
	// Idle backends flush their statistics up to 10 s late: the signups'
	// just before, and the list's creation, reach pg_stat_database first.
	if err := sleep(ctx, b.cfg.StatsIdleWait); err != nil {
		return nil, nil, err
	}
	r.tx[0], r.txOK = b.benchTransactions(ctx)
	streamCtx, cancel := context.WithCancel(ctx)
	tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1, ResponseHeaderTimeout: 15 * time.Second, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	public, admin := client.New(b.api.BaseURL, "", hc), client.New(b.api.BaseURL, b.admin, hc)
	var wg sync.WaitGroup
	closeAll := func() {
		cancel()
		wg.Wait()
		tr.CloseIdleConnections()
	}
	for i := range n {
		wg.Go(func() { g.watchSeats(streamCtx, public, i) })
	}
	steps := []struct {
		open, failed *atomic.Int64
		tx           *int64
		start        func()
	}{
		{&g.seatsOpen, &g.seatsFailed, &r.tx[1], nil},
		{&g.listsOpen, &g.listsFailed, &r.tx[2], func() {
			for range n {
				wg.Go(func() { g.watchList(streamCtx, admin) })
			}
		}},
	}
	for _, s := range steps {
		if s.start != nil {
			s.start()
		}
		if err := waitOpen(ctx, s.open, s.failed, n); err != nil {
			closeAll()
			return nil, nil, err
		}
		if err := sleep(ctx, statsFlushWait); err != nil {
			closeAll()
			return nil, nil, err
		}
		*s.tx, _ = b.benchTransactions(ctx)
	}
	r.open = min(g.seatsOpen.Load(), g.listsOpen.Load())
	fmt.Fprintf(b.log, "%-16s %d dashboards open (seat streams %d, list streams %d; failed %d and %d)\n",
		ScenarioDashboards, r.open, g.seatsOpen.Load(), g.listsOpen.Load(), g.seatsFailed.Load(), g.listsFailed.Load())
	if r.open == 0 {
		closeAll()
		return nil, nil, fmt.Errorf("no dashboard opened: %v", g.firstError())
	}
	if err := sleep(ctx, dashboardIdle); err != nil {
		closeAll()
		return nil, nil, err
	}
	r.tx[3], _ = b.benchTransactions(ctx)
	r.scansAt = time.Now()
	r.scans[0], r.scansOK = b.listScans(ctx)
	return g, closeAll, nil
}

// waitOpen waits until n streams opened or failed, or dashboardConnect
// passed.
func waitOpen(ctx context.Context, open, failed *atomic.Int64, n int) error {
	deadline := time.Now().Add(dashboardConnect)
	for open.Load()+failed.Load() < int64(n) && time.Now().Before(deadline) {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// followSignups runs the signups with the dashboards open, their base the
// hot activity's taken just before, then waits up to dashboardSettle for
// every dashboard to show the last of them.
func (b *bench) followSignups(ctx context.Context, r *dashboardRun, g *dashboardGroup) {
	s, err := b.api.Seats(ctx, r.hot)
	if err != nil {
		fmt.Fprintf(b.log, "%-16s read the seats before the signups: %v\n", ScenarioDashboards, err)
		return
	}
	g.arm(int64(s.Taken))
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

// listScans reads how many times the checkin_list table was read
// (sequential and index scans, pg_stat_user_tables): the list streams'
// reads of their list, and nothing the signups do. Asked on the bench
// database's own connection; false without one or when the read failed.
func (b *bench) listScans(ctx context.Context) (int64, bool) {
	if b.db == nil {
		return 0, false
	}
	if _, err := b.db.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		fmt.Fprintf(b.log, "%-16s clear stats snapshot: %v\n", ScenarioDashboards, err)
		return 0, false
	}
	var n int64
	err := b.db.QueryRow(ctx, `SELECT coalesce((SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0)
		FROM pg_stat_user_tables WHERE relname = 'checkin_list'), 0)`).Scan(&n)
	if err != nil {
		fmt.Fprintf(b.log, "%-16s read the scans of checkin_list: %v\n", ScenarioDashboards, err)
		return 0, false
	}
	return n, true
}

// recordDashboards puts the scenario's checks in the report and logs
// them.
func (b *bench) recordDashboards(r *dashboardRun, updates *ScenarioResult) {
	ch := b.report.Checks
	ch[CheckDashboardsOpen] = r.open
	ch[CheckDashboardsP99MS] = r.updateP99
	ch[CheckDashboardsListEvents] = r.listEvents
	pg := "not counted (no monitor)"
	if r.txOK {
		seat, connect, idle := r.tx[1]-r.tx[0], r.tx[2]-r.tx[1], r.tx[3]-r.tx[2]
		perSec := round(float64(idle)/dashboardIdle.Seconds(), 1)
		ch[CheckDashboardsPGQueries] = r.tx[3] - r.tx[0]
		ch[CheckDashboardsSeatPGQueries] = seat
		ch[CheckDashboardsListConnectPG] = connect
		ch[CheckDashboardsIdlePGPerSecond] = perSec
		pg = fmt.Sprintf("%d (seat halves' reads and streams %d, list streams' connect %d, idle %s %d: %.1f/s)",
			r.tx[3]-r.tx[0], seat, connect, dashboardIdle, idle, perSec)
	}
	reads := "not counted"
	if r.scansOK {
		span := r.closed.Sub(r.scansAt).Seconds()
		perSec := round(float64(r.scans[1]-r.scans[0])/span, 1)
		ch[CheckDashboardsListReadsPerSecond] = perSec
		reads = fmt.Sprintf("%d in %.1f s (%.1f/s)", r.scans[1]-r.scans[0], span, perSec)
	}
	fmt.Fprintf(b.log, "%-16s PostgreSQL transactions while %d dashboards connected and sat idle: %s; "+
		"reads of the list while the signups ran: %s; counts events then: %d\n",
		ScenarioDashboards, r.open, pg, reads, r.listEvents)
	fmt.Fprintf(b.log, "%-16s updates: %d shown, %d missing; from a signup's answer to a dashboard's event p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		ScenarioDashboards, r.shown, r.missing, updates.P50MS, updates.P99MS, updates.MaxMS)
}
