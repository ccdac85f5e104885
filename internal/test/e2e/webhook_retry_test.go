package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/webhook"
)

// TestFailedAttemptsAreRetriedWithGrowingDelays: a receiver answers 500
// three times, then 200. The event arrives four times with the same
// webhook-id, each gap longer than the one before (from
// WEBHOOK_RETRY_BASE), once successfully; the deliveries list shows it
// delivered after four attempts, and each attempt is recorded.
func TestFailedAttemptsAreRetriedWithGrowingDelays(t *testing.T) {
	t.Parallel()
	const base = 300 * time.Millisecond
	inst := setup(t, app.Options{Webhooks: webhook.DispatcherConfig{RetryBase: base}})
	rc := newReceiver(t, func(n int, _ http.ResponseWriter, _ *http.Request) int {
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	w := register(t, inst, rc, []string{"registration.created"}, nil)
	act := inst.CreateActivity(t, "retries", 10)
	do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations", inst.Token(t, "u1", false), map[string]any{}, http.StatusCreated)

	eventually(t, func() bool { return len(rc.deliveries()) >= 4 })
	require.Never(t, func() bool { return len(rc.deliveries()) > 4 }, 4*base, base/20, "a delivery after the success")
	got := rc.deliveries()
	require.Len(t, got, 4)
	require.Empty(t, rc.failures())
	for _, d := range got {
		require.Equal(t, got[0].ID, d.ID, "the same webhook-id on every retry")
		require.Equal(t, got[0].Body, d.Body, "the same body on every retry")
	}
	var gaps []time.Duration
	for i := 1; i < len(got); i++ {
		gaps = append(gaps, got[i].At.Sub(got[i-1].At))
	}
	t.Logf("gaps between attempts: %v", gaps)
	require.GreaterOrEqual(t, gaps[0], base, "the first retry waits WEBHOOK_RETRY_BASE at least (jitter only adds)")
	require.Greater(t, gaps[1], gaps[0])
	require.Greater(t, gaps[2], gaps[1])
	require.GreaterOrEqual(t, gaps[2], 4*base)

	ds := deliveriesOf(t, inst, w.ID)
	require.Len(t, ds, 1)
	require.Equal(t, got[0].ID, ds[0]["event_id"])
	require.EqualValues(t, 4, ds[0]["attempts"])
	require.Equal(t, "delivered", ds[0]["state"])
	require.EqualValues(t, 200, ds[0]["last_status_code"])
	require.Nil(t, ds[0]["last_error"])
	require.NotNil(t, ds[0]["delivered_at"])
	require.Nil(t, ds[0]["next_attempt_at"])

	rows, err := inst.App.Pool.Query(context.Background(), `SELECT attempt, status_code FROM webhook_attempt ORDER BY attempt`)
	require.NoError(t, err)
	var attempts []string
	for rows.Next() {
		var n, status int
		require.NoError(t, rows.Scan(&n, &status))
		attempts = append(attempts, fmt.Sprint(n, ":", status))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"1:500", "2:500", "3:500", "4:200"}, attempts, "one row per attempt")
}

// TestGoneDisablesTheWebhook: a receiver that answers 410 Gone disables
// its webhook at once (no retry, nothing more sent to it); another
// webhook goes on receiving.
func TestGoneDisablesTheWebhook(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{})
	admin := inst.Token(t, "admin", true)
	gone := newReceiver(t, func(int, http.ResponseWriter, *http.Request) int { return http.StatusGone })
	fine := newReceiver(t, nil)
	wGone := register(t, inst, gone, []string{"*"}, nil)
	register(t, inst, fine, []string{"*"}, nil)
	act := inst.CreateActivity(t, "gone", 10)
	signup := func(user string) {
		do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations", inst.Token(t, user, false), map[string]any{}, http.StatusCreated)
	}
	signup("u1")
	eventually(t, func() bool {
		return do(t, inst, http.MethodGet, "/v1/webhooks/"+wGone.ID, admin, nil, http.StatusOK)["disabled_at"] != nil
	})
	signup("u2")
	eventually(t, func() bool { return len(fine.counts()) == 2 })
	// Nothing is left to send to the disabled webhook: its one delivery
	// failed for good (no next attempt), and u2's event, delivered to the
	// other webhook, queued none for it.
	ds := deliveriesOf(t, inst, wGone.ID)
	require.Len(t, ds, 1, "no delivery queued for a disabled webhook")
	require.Equal(t, "failed", ds[0]["state"])
	require.Nil(t, ds[0]["next_attempt_at"], "no retry after a 410")
	require.EqualValues(t, 410, ds[0]["last_status_code"])
	require.Len(t, gone.deliveries(), 1, "nothing more after the 410, no retry")

	list := do(t, inst, http.MethodGet, "/v1/webhooks", admin, nil, http.StatusOK)["items"].([]any)
	require.Len(t, list, 2)
	for _, w := range list {
		require.NotContains(t, w, "secret", "a secret is shown only at creation")
	}
}

// TestHangingReceiverDelaysNobodyElse: one receiver never answers. The
// other webhook's deliveries still arrive within 2 s of each signup's
// answer, signups stay fast, and the hanging receiver's attempts time out
// and are retried.
func TestHangingReceiverDelaysNobodyElse(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{Webhooks: webhook.DispatcherConfig{Timeout: 500 * time.Millisecond, RetryBase: 200 * time.Millisecond}})
	release := make(chan struct{})
	slow := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	t.Cleanup(func() { close(release) }) // before the receiver closes
	fast := newReceiver(t, nil)
	wSlow := register(t, inst, slow, []string{"*"}, nil)
	register(t, inst, fast, []string{"*"}, nil)
	act := inst.CreateActivity(t, "hang", 100000)

	// 8 clients sign up 240 users; each answer's time is kept by
	// registration id.
	var mu sync.Mutex
	answered := map[string]time.Time{}
	var latencies []time.Duration
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := range 30 {
				start := time.Now()
				r := do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations",
					inst.Token(t, fmt.Sprintf("c%d-%d", c, i), false), map[string]any{}, http.StatusCreated)
				mu.Lock()
				answered[r["id"].(string)] = time.Now()
				latencies = append(latencies, time.Since(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	eventually(t, func() bool { return len(fast.counts()) >= 240 })

	var lags []time.Duration
	for _, d := range fast.deliveries() {
		p := decodePayload(t, d.Body)
		lags = append(lags, d.At.Sub(answered[p.Data["registration_id"].(string)]))
	}
	slices.Sort(lags)
	slices.Sort(latencies)
	p99 := latencies[len(latencies)*99/100]
	t.Logf("fast receiver lag after the answer: median %v, max %v; signup latency p99 %v", lags[len(lags)/2], lags[len(lags)-1], p99)
	require.Less(t, lags[len(lags)-1], 2*time.Second, "the fast receiver is not held up by the hanging one")
	require.Less(t, p99, 2*time.Second, "signups are not held up by the hanging receiver (a generous bound: -race on a shared machine)")

	eventually(t, func() bool {
		for _, d := range deliveriesOf(t, inst, wSlow.ID) {
			if e, _ := d["last_error"].(string); d["attempts"].(float64) >= 2 && d["state"] == "pending" && e != "" {
				require.Contains(t, e, "timeout")
				return true
			}
		}
		return false
	})
}

// TestAFailingEventHoldsUpNoneAfterIt: a receiver refuses one event (500,
// every time) and accepts the others. The events recorded after it all
// arrive, without waiting for its retries (an hour away here): it waits
// in the retry set, pending with its one attempt, while the others are
// delivered.
func TestAFailingEventHoldsUpNoneAfterIt(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{Webhooks: webhook.DispatcherConfig{RetryBase: time.Hour}})
	var refused atomic.Value // the event id refused
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) int {
		refused.CompareAndSwap(nil, r.Header.Get("webhook-id"))
		if refused.Load() == r.Header.Get("webhook-id") {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	w := register(t, inst, rc, []string{"*"}, nil)
	act := inst.CreateActivity(t, "one fails", 100)
	for i := range 20 {
		do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations", inst.Token(t, fmt.Sprint("u", i), false), map[string]any{}, http.StatusCreated)
	}
	eventually(t, func() bool { return len(rc.counts()) == 20 })
	counts := rc.counts()
	for id, n := range counts {
		require.Equal(t, 1, n, "event %s sent once: no retry within the hour", id)
	}
	// The results are recorded a moment after the answers.
	var refusedDelivery map[string]any
	eventually(t, func() bool {
		states := map[string]int{}
		for _, d := range deliveriesOf(t, inst, w.ID) {
			states[d["state"].(string)]++
			if d["event_id"] == refused.Load() {
				refusedDelivery = d
			}
		}
		return states["delivered"] == 19 && states["pending"] == 1 && len(states) == 2 && refusedDelivery["attempts"] == 1.0
	})
	require.Equal(t, "pending", refusedDelivery["state"])
	require.EqualValues(t, 500, refusedDelivery["last_status_code"])
	next, err := time.Parse(time.RFC3339Nano, refusedDelivery["next_attempt_at"].(string))
	require.NoError(t, err)
	require.Greater(t, time.Until(next), 30*time.Minute, "retried after the delay")
}
