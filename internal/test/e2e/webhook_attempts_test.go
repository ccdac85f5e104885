package e2e

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/webhook"
)

// TestDeliveryAttemptsShowEachAttempt: a receiver holds its first request
// until the test has read the attempts (none yet: the attempt under way is
// not recorded), answers it 500, answers the second 500 after 30 ms, and
// the third 200. The delivery's attempts then read 1, 2, 3 with statuses
// 500, 500, 200 and no error, in increasing times at least the retry
// delay apart, each duration at least 0 and the second at least the 30 ms
// the receiver took; the typed client reads the same. A webhook whose
// receiver refuses connections shows attempts with no status and the
// error.
func TestDeliveryAttemptsShowEachAttempt(t *testing.T) {
	t.Parallel()
	const base = 200 * time.Millisecond
	inst := setup(t, app.Options{Webhooks: webhook.DispatcherConfig{RetryBase: base}})
	admin := inst.Token(t, "admin", true)
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseFirst := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseFirst) // before the receiver closes
	rc := newReceiver(t, func(n int, _ http.ResponseWriter, r *http.Request) int {
		switch n {
		case 0:
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return http.StatusInternalServerError
		case 1:
			time.Sleep(30 * time.Millisecond) // a slow receiver: proves the attempt's duration is measured
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	w := register(t, inst, rc, []string{"registration.created"}, nil)

	// A port nothing listens on: every attempt is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String() + "/hook"
	require.NoError(t, l.Close())
	refused := do(t, inst, http.MethodPost, "/v1/webhooks", admin, map[string]any{"url": closed, "events": []string{"*"}}, http.StatusCreated)

	act := inst.CreateActivity(t, "attempts", 10)
	do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations", inst.Token(t, "u1", false), map[string]any{}, http.StatusCreated)

	eventually(t, func() bool { return len(rc.deliveries()) == 1 })
	eventID := rc.deliveries()[0].ID
	path := "/v1/webhooks/" + w.ID + "/deliveries/" + eventID + "/attempts"
	require.Equal(t, map[string]any{"items": []any{}}, do(t, inst, http.MethodGet, path, admin, nil, http.StatusOK),
		"the first attempt is under way: nothing recorded yet")
	releaseFirst()

	eventually(t, func() bool { return deliveriesOf(t, inst, w.ID)[0]["state"] == "delivered" })
	items := do(t, inst, http.MethodGet, path, admin, nil, http.StatusOK)["items"].([]any)
	require.Len(t, items, 3, "%v", items)
	var prev time.Time
	for i, it := range items {
		a := it.(map[string]any)
		require.EqualValues(t, i+1, a["attempt"])
		require.EqualValues(t, []int{500, 500, 200}[i], a["status_code"], "attempt %d", i+1)
		require.Nil(t, a["error"], "attempt %d got an answer", i+1)
		at, err := time.Parse(time.RFC3339Nano, a["at"].(string))
		require.NoError(t, err)
		require.Equal(t, time.UTC, at.Location())
		if i > 0 {
			require.GreaterOrEqual(t, at.Sub(prev), base, "attempt %d starts at least the retry delay after the one before", i+1)
		}
		prev = at
		require.GreaterOrEqual(t, a["duration_ms"].(float64), 0.0)
	}
	require.GreaterOrEqual(t, items[1].(map[string]any)["duration_ms"].(float64), 30.0, "the receiver took 30 ms over the second")

	typed, err := inst.API(t, "admin", true).DeliveryAttempts(t.Context(), w.ID, eventID)
	require.NoError(t, err)
	require.Len(t, typed, 3)
	for i, a := range typed {
		require.Equal(t, i+1, a.Attempt)
		require.Equal(t, []int{500, 500, 200}[i], *a.StatusCode)
		require.Nil(t, a.Error)
		require.Equal(t, items[i].(map[string]any)["duration_ms"], a.DurationMS)
	}

	var failed []client.DeliveryAttempt
	eventually(t, func() bool {
		failed, err = inst.API(t, "admin", true).DeliveryAttempts(t.Context(), refused["id"].(string), eventID)
		require.NoError(t, err)
		return len(failed) >= 2
	})
	for i, a := range failed[:2] {
		require.Equal(t, i+1, a.Attempt)
		require.Nil(t, a.StatusCode, "no answer")
		require.NotNil(t, a.Error)
		require.Contains(t, *a.Error, "refused")
		require.GreaterOrEqual(t, a.DurationMS, 0.0)
	}
	require.True(t, failed[1].At.After(failed[0].At))
}
