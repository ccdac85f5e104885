package loadtest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestJudgeStorm(t *testing.T) {
	t.Parallel()
	moment := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return moment.Add(time.Duration(ms) * time.Millisecond) }
	req, none := "q", ""
	ev := func(seq int64, typ, reg string, at time.Time) client.Event {
		e := client.Event{Seq: seq, Type: typ, RegistrationID: reg, Actor: actorSystem, At: at}
		if typ == eventReleased {
			e.Reason = client.CancelReasonNoShow
		}
		return e
	}
	noShows := map[string]bool{"s1": true, "s2": true}
	line := []string{"w1", "w2", "w3"}
	events := []client.Event{
		ev(1, "registration.checked_in", "s0", at(-5000)),
		// One transaction: both no-shows, then the first two in line.
		ev(2, eventReleased, "s1", at(300)),
		ev(3, eventReleased, "s2", at(300)),
		ev(4, eventPromoted, "w1", at(300)),
		ev(5, eventPromoted, "w2", at(300)),
	}
	events[4].RequestID = &none // the service's own: null or ""
	v := stormVerdict{starts: map[time.Time]bool{}}
	v.judgeStorm(events, noShows, line, moment)
	assert.Equal(t, stormVerdict{released: 2, refilled: 2, inTx: 2, starts: map[time.Time]bool{at(300): true}, first: at(300)}, v)

	// Early, of one who came, and a no-show left; a promotion out of line
	// and one of another request's.
	bad := []client.Event{
		ev(1, eventReleased, "s1", at(-1)),
		ev(2, eventReleased, "s0", at(-1)),
		ev(3, eventPromoted, "w2", at(-1)),
		ev(4, "registration.cancelled", "x", at(500)),
		ev(5, eventPromoted, "w1", at(500)),
	}
	bad[4].RequestID = &req
	v = stormVerdict{starts: map[time.Time]bool{}}
	v.judgeStorm(bad, noShows, line, moment)
	assert.EqualValues(t, 0, v.released)
	assert.EqualValues(t, 3, v.wrong, "two wrong releases and a no-show left")
	assert.EqualValues(t, 0, v.refilled)
	assert.EqualValues(t, 1, v.inTx, "the promotion after the cancellation is not the release's")
}

func TestNearestRankAndWindows(t *testing.T) {
	t.Parallel()
	ms := []float64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200, 1300, 1400, 1500, 1600, 1700, 1800, 1900, 2000}
	assert.Equal(t, 1000.0, nearestRank(ms, 50))
	assert.Equal(t, 2000.0, nearestRank(ms, 99), "of 20 values the 99th percentile is the largest")
	assert.Equal(t, 1900.0, nearestRank(ms, 95))
	assert.Zero(t, nearestRank(nil, 99))

	t0 := time.Now()
	stamps := [][]stamp{
		{{end: t0.Add(100 * time.Millisecond), lat: 10 * time.Millisecond}, {end: t0.Add(1500 * time.Millisecond), lat: 20 * time.Millisecond}},
		{{end: t0.Add(900 * time.Millisecond), lat: 30 * time.Millisecond}},
	}
	r := windowResult(stamps, t0, t0.Add(time.Second))
	assert.EqualValues(t, 2, r.Ops)
	assert.Equal(t, 2.0, r.RPS)
	assert.InDelta(t, 30.0, r.MaxMS, 0.1)
}

// TestReleaseStorm runs a small release_storm against an instance in the
// test process (its due work runs every second): two activities, each
// with 60 no-shows released at one moment and its line refilled in order
// in the releasing transaction, while bystanders sign up elsewhere.
func TestReleaseStorm(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	inst := apptest.Start(t, apptest.Options{})
	api, err := NewAPI(inst.URL)
	require.NoError(t, err)
	t.Cleanup(api.Close)
	auth, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	require.NoError(t, err)
	db, err := pgx.Connect(ctx, inst.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	var log bytes.Buffer
	b := &bench{
		cfg:    Config{Sizes: Sizes{ReleaseActivities: 2}}.withDefaults(),
		report: NewReport("test"), log: &log, auth: auth, api: api, nonce: randomHex(4), db: db,
		admin: inst.Token(t, "loadtest-admin", true),
	}
	require.NoError(t, b.driveReleaseStorm(ctx), log.String())

	res := b.report.Scenarios[ScenarioReleaseStorm]
	require.EqualValues(t, 2*releaseNoShows, res.Ops, log.String())
	require.Zero(t, res.Errors, "every line refilled: %s", log.String())
	require.Contains(t, res.Note, "2 activities instead of 20 activities")
	ch := b.report.Checks
	require.EqualValues(t, 2*releaseNoShows, ch[CheckReleaseReleased], log.String())
	require.EqualValues(t, 2*releaseNoShows, ch[CheckReleaseRefilled], log.String())
	require.EqualValues(t, 2*releaseNoShows, ch[CheckReleaseInTx], log.String())
	require.Zero(t, ch[CheckReleaseWrong], log.String())
	require.Zero(t, ch[CheckReleaseInexact], log.String())
	require.LessOrEqual(t, ch[CheckReleaseTransactions], int64(2), log.String())
	require.Positive(t, b.report.Scenarios[ScenarioReleaseStormBefore].Ops, log.String())
	b.report.ComputeRatios()
	require.NotNil(t, b.report.Ratios[RatioReleaseStormSignups], "the signups during the storm are compared with those before")
	t.Log(log.String())
}
