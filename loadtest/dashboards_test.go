package loadtest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/stream"
	"github.com/physiciansnet/capacityd/webhook"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestDashboardViewSaw(t *testing.T) {
	t.Parallel()
	marks := []updateMark{{at: ms(10), need: 1}, {at: ms(20), need: 3}, {at: ms(30), need: 3}}
	v := dashboardView{lat: NewLatencies()}
	v.saw(marks[:2], 0, ms(15))
	assert.Zero(t, v.next, "an event showing nothing above the base delivers nothing")
	v.saw(marks, 3, ms(40))
	assert.Equal(t, 3, v.next)
	assert.EqualValues(t, 3, v.shown)
	assert.Equal(t, int64(3), v.lat.Count())
	assert.InDelta(t, 30.0, v.lat.MaxMS(), 0.1, "from the first answer (10 ms) to the event (40 ms)")
	assert.InDelta(t, 10.0, v.lat.QuantileMS(0), 0.1, "from the last answer (30 ms)")

	// A mark made after the event that showed it (its answer came later):
	// shown at once. One that needs more than the events show holds back
	// the marks after it.
	marks = append(marks, updateMark{at: ms(45), need: 2}, updateMark{at: ms(50), need: 6}, updateMark{at: ms(55), need: 4})
	v.saw(marks, 5, ms(60))
	assert.Equal(t, 4, v.next, "the mark needing 6 waits, and the one after it")
	assert.EqualValues(t, 5, v.shown)
	assert.InDelta(t, 0.001, v.lat.QuantileMS(0), 0.0005, "shown before its answer: 0 (1 µs, the histogram's least)")
	v.saw(marks, 4, ms(70))
	assert.EqualValues(t, 5, v.shown, "an older event does not take back what the dashboard showed")
	assert.Equal(t, 2, v.finish(marks), "never shown: the mark needing 6 and the one behind it")

	w := dashboardView{lat: NewLatencies()}
	w.saw(marks[:1], 1, ms(5))
	assert.Equal(t, 1, w.next, "an event that arrived before the answer: latency 0, not negative")
	assert.InDelta(t, 0.001, w.lat.MaxMS(), 0.0005)
	w.saw(marks, 6, ms(100))
	assert.Zero(t, w.finish(marks))
	assert.Equal(t, int64(len(marks)), w.lat.Count())
}

func TestUpdateMarks(t *testing.T) {
	t.Parallel()
	m := newUpdateMarks()
	m.sending()
	m.sending()
	m.sending()
	m.failedOne()
	m.answered()
	got := m.snapshot()
	require.Len(t, got, 1)
	assert.EqualValues(t, 2, got[0].need, "three sent, one failed")

	// Marks made while others are read: each reader sees a prefix, in
	// order, never changed (go test -race).
	m = newUpdateMarks()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				m.sending()
				m.answered()
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			v := dashboardView{lat: NewLatencies()}
			for range 200 {
				v.saw(m.snapshot(), 1<<40, m.since())
			}
		})
	}
	wg.Wait()
	all := m.snapshot()
	require.Len(t, all, 1600)
	for i := 1; i < len(all); i++ {
		assert.GreaterOrEqual(t, all[i].at, all[i-1].at)
		assert.GreaterOrEqual(t, all[i].need, all[i-1].need, "nothing failed: need never decreases")
	}
	assert.EqualValues(t, 1600, all[len(all)-1].need)
}

func TestDashboardWindow(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]time.Duration{
		time.Second: time.Second, 3 * time.Second: 3 * time.Second, 10 * time.Second: 5 * time.Second, 20 * time.Second: 10 * time.Second,
	} {
		b := &bench{cfg: Config{ScenarioDuration: d}}
		assert.Equal(t, want, b.dashboardWindow(), "scenario duration %s", d)
	}
}

func TestDashboardsTargets(t *testing.T) {
	t.Parallel()
	for _, s := range []string{ScenarioDashboards, ScenarioDashboardsBefore, ScenarioDashboardsAfter, ScenarioDashboardsUpdates} {
		require.Contains(t, scenarioOrder, s)
	}
	for _, c := range []string{CheckDashboardsOpen, CheckDashboardsListOpenSeconds, CheckDashboardsListReadsPerStream, CheckDashboardsListEvents,
		CheckDashboardsP99MS, CheckDashboardsDisplayBehind, CheckDashboardsPGQueries, CheckDashboardsSeatPGQueries, CheckDashboardsListPGQueries, CheckDashboardsListPGPerStream,
		CheckDashboardsOtherPGQueries, CheckDashboardsAutovacuums, CheckDashboardsBaselinePGQueries, CheckDashboardsCausedPGQueries,
		CheckDashboardsSubscriptionLosses} {
		require.NotEmpty(t, checkDescriptions[c], c)
	}
	r := NewReport("x")
	r.Scenarios[ScenarioDashboardsBefore] = &ScenarioResult{RPS: 1000, Ops: 1}
	r.Scenarios[ScenarioDashboardsAfter] = &ScenarioResult{RPS: 800, Ops: 1}
	r.Scenarios[ScenarioDashboards] = &ScenarioResult{RPS: 810, Ops: 1}
	r.Checks[CheckDashboardsCausedPGQueries] = int64(1)
	r.Checks[CheckDashboardsP99MS] = 250.0
	r.ComputeRatios()
	require.InDelta(t, 0.9, *r.Ratios[RatioDashboardsSignups], 1e-9, "against the mean of before and after")
	got := targetsByWhat(t, r)
	assert.True(t, *got["200 dashboards (seat stream and a check-in list's counts stream each): hot signups/s with them open vs without (mean of just before and just after)"].Met)
	assert.False(t, *got["200 dashboards: PostgreSQL transactions caused by them while they connect and sit idle 6 s (less those of as long a window without them)"].Met)
	assert.True(t, *got["200 dashboards: p99 from a signup's answer to each dashboard's seat event showing it (ms)"].Met)
}

// TestDashboardsParts opens a few dashboards on an instance in the test
// process (background work hourly, so that it sends PostgreSQL nothing of
// its own), counting the statements the instance sends: none for the seat
// halves of a warm activity, one read of the list per list stream; then
// runs the marked signups and checks every dashboard showed every one of
// them, and that the list streams sent nothing while they ran.
func TestDashboardsParts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{ExpiryInterval: time.Hour, ReconcileInterval: time.Hour,
		Webhooks: webhook.DispatcherConfig{PollInterval: time.Hour, BacklogInterval: time.Hour}}})
	api, err := NewAPI(inst.URL)
	require.NoError(t, err)
	t.Cleanup(api.Close)
	auth, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	require.NoError(t, err)
	var log bytes.Buffer
	const k = 4
	b := &bench{cfg: Config{ScenarioDuration: time.Second, Sizes: Sizes{Dashboards: k}}.withDefaults(),
		report: NewReport("test"), log: &log, auth: auth, api: api, nonce: randomHex(4), admin: inst.Token(t, "loadtest-admin", true)}
	b.seed.HotActivity = inst.CreateActivity(t, "Dashboards", 1000000)
	r, err := b.setupDashboards(ctx)
	require.NoError(t, err)
	require.Equal(t, 3*r.n, len(r.toks))

	g := newDashboardGroup(r.hot, r.list, k)
	s := newDashboardStreams(ctx, g, inst.URL, b.admin)
	defer s.close()
	q0 := inst.Queries.Count()
	s.openSeats()
	require.NoError(t, waitOpen(ctx, &g.seatsOpen, &g.seatsFailed, k))
	require.EqualValues(t, k, g.seatsOpen.Load(), "%v", g.firstError())
	assert.Zero(t, inst.Queries.Count()-q0, "a dashboard's seat read and seat stream of a warm activity send PostgreSQL nothing")
	q1 := inst.Queries.Count()
	s.openLists()
	require.NoError(t, b.waitDashboards(ctx, g))
	require.EqualValues(t, k, g.listsOpen.Load(), "%v", g.firstError())
	assert.EqualValues(t, 1, inst.Queries.Count()-q1, "the list streams of one instance share one read of their list")

	b.followSignups(ctx, r, g)
	s.close()
	lat, shown, missing := g.updates()
	marks := len(g.marks.snapshot())
	signups := b.report.Scenarios[ScenarioDashboards]
	require.NotNil(t, signups, log.String())
	require.Positive(t, marks)
	assert.EqualValues(t, signups.Ops, marks, "every signup answered with a seat is marked")
	assert.Zero(t, missing, "every dashboard showed every signup")
	assert.EqualValues(t, k*marks, shown)
	assert.Equal(t, shown, lat.Count())
	assert.Less(t, lat.QuantileMS(99), 1000.0)
	assert.Zero(t, g.listEvents.Load(), "signups change no list's counts")

	// The seats read afresh after a stateless announcement (resetHot's):
	// the authority's.
	rdb, ok := inst.App.Redis.(*redis.Client)
	require.True(t, ok)
	require.NoError(t, rdb.Publish(ctx, stream.Channel, capacity.SeatChange{ActivityID: r.hot}.Encode()).Err())
	require.NoError(t, b.warmSeats(ctx, r.hot))
	a, err := b.api.WithToken(b.admin).GetActivity(ctx, r.hot)
	require.NoError(t, err)
	seats, err := b.api.Seats(ctx, r.hot)
	require.NoError(t, err)
	assert.Equal(t, a.Taken, seats.Taken)
	assert.Equal(t, signups.Ops, int64(seats.Taken))
	t.Log(log.String())
}
