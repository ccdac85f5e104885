package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/webhook"
)

// processEnv runs capacityd processes that deliver to loopback receivers,
// with short attempts (so the leases of a killed process end soon) and
// quick retries.
var processEnv = []string{
	"WEBHOOK_ALLOW_PRIVATE=true", "WEBHOOK_SECRET_KEY=" + apptest.WebhookKey,
	"WEBHOOK_TIMEOUT=1s", "WEBHOOK_RETRY_BASE=200ms", "RATE_LIMIT_SIGNUPS=0",
}

// recordedEvents returns the ids of every event the database holds for
// the activity.
func recordedEvents(t *testing.T, databaseURL, activityID string) []string {
	t.Helper()
	rows, err := testenv.Pool(t, databaseURL, 2).Query(context.Background(), `SELECT e.seq FROM registration_event e
		JOIN activity a ON a.id = e.activity_id WHERE a.public_id = $1 ORDER BY e.seq`, activityID)
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	out := make([]string, len(seqs))
	for i, s := range seqs {
		out[i] = registration.EventID(activityID, s)
	}
	return out
}

// TestSIGKILLRightAfterCommitsLosesNoDelivery: the real binary is killed
// with SIGKILL while signups commit and deliveries are in flight. After a
// restart, every event the database recorded (acknowledged or not) reaches
// the receiver, and every acknowledged signup has its event among them.
func TestSIGKILLRightAfterCommitsLosesNoDelivery(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	p := apptest.StartProcess(t, db, "", processEnv...)
	admin := p.Token(t, "admin", true)
	rc := newReceiver(t, nil)
	r, err := apptest.Do(http.MethodPost, p.URL+"/v1/webhooks", admin, map[string]any{"url": rc.srv.URL, "events": []string{"*"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var w createdWebhook
	r.JSON(t, &w)
	rc.trust(t, w.Secret)
	r, err = apptest.Do(http.MethodPost, p.URL+"/v1/activities", admin, map[string]any{"title": "crash", "capacity": 100000})
	require.NoError(t, err)
	var act struct{ ID string }
	r.JSON(t, &act)

	var acked sync.Map // registration id → true
	var n atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				r, err := apptest.Do(http.MethodPost, p.URL+"/v1/activities/"+act.ID+"/registrations",
					p.Token(t, fmt.Sprintf("c%d-%d", c, i), false), map[string]any{})
				if err != nil {
					return // killed
				}
				if r.Status == http.StatusCreated {
					var reg struct{ ID string }
					r.JSON(t, &reg)
					acked.Store(reg.ID, true)
					n.Add(1)
				}
			}
		})
	}
	require.Eventually(t, func() bool { return n.Load() >= 300 }, 60*time.Second, 5*time.Millisecond)
	p.Signal(t, syscall.SIGKILL)
	p.Wait(10 * time.Second) // -1 either way: killed by a signal
	_, err = apptest.Do(http.MethodGet, p.URL+"/healthz", "", nil)
	require.Error(t, err, "the process is gone")
	stop.Store(true)
	wg.Wait()
	before := len(rc.counts())

	apptest.StartProcess(t, db, "", processEnv...)
	want := recordedEvents(t, db, act.ID)
	require.GreaterOrEqual(t, len(want), int(n.Load()))
	require.Eventually(t, func() bool {
		got := rc.counts()
		for _, id := range want {
			if got[id] == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "every recorded event is delivered after the restart")
	require.Empty(t, rc.failures())

	delivered := map[string]bool{}
	for _, d := range rc.deliveries() {
		delivered[decodePayload(t, d.Body).Data["registration_id"].(string)] = true
	}
	acked.Range(func(id, _ any) bool {
		require.True(t, delivered[id.(string)], "acknowledged signup %s delivered", id)
		return true
	})
	dups := 0
	for _, c := range rc.counts() {
		dups += c - 1
	}
	t.Logf("%d acknowledged signups, %d events recorded; %d delivered before the kill, %d duplicates (at least once: attempts in flight at the kill are made again)",
		n.Load(), len(want), before, dups)
}

// TestTwoInstancesMakeEachAttemptOnce: two instances on one database sign
// users up and deliver. A quarter of the events fail their first attempt
// (500) and succeed on the retry, which either instance may make. Each
// event arrives exactly as often as it was attempted (once, or twice for
// the failed ones), and each attempt is recorded once.
func TestTwoInstancesMakeEachAttemptOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	opts := app.Options{WebhookGuard: webhook.Guard{AllowPrivate: true}, Webhooks: webhook.DispatcherConfig{RetryBase: 100 * time.Millisecond, PollInterval: 100 * time.Millisecond}}
	a := apptest.Start(t, apptest.Options{DatabaseURL: db, App: opts})
	b := apptest.Start(t, apptest.Options{DatabaseURL: db, App: opts})

	failFirst := func(id string) bool {
		h := fnv.New32a()
		h.Write([]byte(id))
		return h.Sum32()%4 == 0
	}
	var mu sync.Mutex
	seen := map[string]int{}
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) int {
		id := r.Header.Get("webhook-id")
		mu.Lock()
		defer mu.Unlock()
		if seen[id]++; seen[id] == 1 && failFirst(id) {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	register(t, a, rc, []string{"*"}, nil)
	act := a.CreateActivity(t, "two", 100000)

	var wg sync.WaitGroup
	for c := range 8 {
		inst := []*apptest.Instance{a, b}[c%2]
		wg.Go(func() {
			for i := range 50 {
				do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations",
					inst.Token(t, fmt.Sprintf("c%d-%d", c, i), false), map[string]any{}, http.StatusCreated)
			}
		})
	}
	wg.Wait()
	want := recordedEvents(t, db, act)
	require.Len(t, want, 400)
	pool := testenv.Pool(t, db, 2)
	require.Eventually(t, func() bool {
		var pending int
		// Not delivered: the retries not delivered, and the events after
		// the (one) webhook's cursor.
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM webhook_retry WHERE state <> 'delivered') +
			(SELECT coalesce(sum(s.last_seq - coalesce(c.seq, 0)), 0) FROM activity_state s
				LEFT JOIN webhook_cursor c ON c.activity_id = s.activity_id)`).Scan(&pending))
		return pending == 0
	}, 30*time.Second, 50*time.Millisecond)
	// No extra attempt shows up over 300 ms, the room one would need to arrive.
	settled := len(rc.deliveries())
	require.Never(t, func() bool { return len(rc.deliveries()) != settled }, 300*time.Millisecond, 10*time.Millisecond,
		"an attempt after every event was delivered")
	require.Empty(t, rc.failures())

	counts := rc.counts()
	for _, id := range want {
		wantN := 1
		if failFirst(id) {
			wantN = 2
		}
		require.Equal(t, wantN, counts[id], "event %s attempted once per due time", id)
	}
	var attempts, rows, duplicated int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT
		(SELECT coalesce(sum(attempts), 0) FROM webhook_retry) + (SELECT count(*) FROM webhook_attempt t WHERE NOT EXISTS (
			SELECT 1 FROM webhook_retry x WHERE x.webhook_id = t.webhook_id AND x.activity_id = t.activity_id AND x.seq = t.seq)),
		(SELECT count(*) FROM webhook_attempt),
		(SELECT count(*) FROM (SELECT 1 FROM webhook_attempt GROUP BY webhook_id, activity_id, seq, attempt HAVING count(*) > 1) x)`).
		Scan(&attempts, &rows, &duplicated))
	require.Equal(t, len(rc.deliveries()), attempts, "every attempt counted once")
	require.Equal(t, attempts, rows, "every attempt recorded once")
	require.Zero(t, duplicated)
	t.Logf("instance a delivered %v, instance b %v", delivered(t, a), delivered(t, b))
}

// delivered reads an instance's count of successful attempts.
func delivered(t *testing.T, inst *apptest.Instance) float64 {
	t.Helper()
	mfs, err := inst.App.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "capacityd_webhook_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "delivered" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
