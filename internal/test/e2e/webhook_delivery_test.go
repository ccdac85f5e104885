package e2e

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// offsetClock is the service's clock in tests that expire holds: real time
// plus an offset the test moves forward.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }
func strPtr(s string) *string                  { return &s }
func eventually(t *testing.T, f func() bool) {
	require.Eventually(t, f, 20*time.Second, 20*time.Millisecond)
}

// setup starts an instance that may deliver to loopback receivers, with
// quick retries and polls.
func setup(t *testing.T, opts app.Options) *apptest.Instance {
	t.Helper()
	opts.WebhookGuard.AllowPrivate = true
	if opts.Webhooks.RetryBase == 0 {
		opts.Webhooks.RetryBase = 100 * time.Millisecond
	}
	opts.Webhooks.PollInterval = 100 * time.Millisecond
	return apptest.Start(t, apptest.Options{App: opts})
}

// event is an event of the history, as the API returns it.
type event = map[string]any

// activityEvents reads an activity's whole event feed.
func activityEvents(t *testing.T, inst *apptest.Instance, activityID string) []event {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+activityID+"/events?limit=500", inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var page struct{ Items []event }
	r.JSON(t, &page)
	return page.Items
}

func ids(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e["id"].(string)
	}
	return out
}

func do(t *testing.T, inst *apptest.Instance, method, path, token string, body any, want int) map[string]any {
	t.Helper()
	r := inst.MustDo(t, method, path, token, body)
	require.Equal(t, want, r.Status, "%s %s: %s", method, path, r.Body)
	var out map[string]any
	if len(r.Body) > 0 {
		r.JSON(t, &out)
	}
	return out
}

// TestEveryEventDeliveredOncePerWebhookSignedAsRecorded: signups,
// cancellations, a promotion from the waiting list and an expiry on one
// activity, a signup and a cancellation on another. Two webhooks for
// everything each receive every event exactly once, every signature
// verifies with the Standard Webhooks library, and each payload's data is
// the event as the history records it, with the registration as the
// change left it. A webhook filtered by type and one filtered by activity
// receive exactly what matches.
func TestEveryEventDeliveredOncePerWebhookSignedAsRecorded(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	inst := setup(t, app.Options{Now: clock.Now, ExpiryInterval: time.Hour})
	admin := inst.Token(t, "admin", true)
	hot := do(t, inst, http.MethodPost, "/v1/activities", admin, map[string]any{"title": "hooks", "capacity": 2, "waitlist": true}, http.StatusCreated)["id"].(string)
	other := inst.CreateActivity(t, "other", 10)

	all1, all2, typed, byActivity := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	register(t, inst, all1, []string{"*"}, nil)
	register(t, inst, all2, []string{"*"}, nil)
	register(t, inst, typed, []string{"registration.promoted", "registration.expired"}, nil)
	register(t, inst, byActivity, []string{"*"}, strPtr(other))

	signup := func(act, user string, want int) string {
		return do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations", inst.Token(t, user, false), map[string]any{}, want)["id"].(string)
	}
	u1, u2 := signup(hot, "u1", http.StatusCreated), signup(hot, "u2", http.StatusCreated)
	signup(hot, "u3", http.StatusAccepted)
	signup(hot, "u4", http.StatusAccepted)
	do(t, inst, http.MethodPost, "/v1/registrations/"+u1+"/cancel", inst.Token(t, "u1", false), nil, http.StatusOK) // u3 promoted
	do(t, inst, http.MethodPost, "/v1/registrations/"+u2+"/status", admin, map[string]any{"status": "awaiting_payment"}, http.StatusOK)
	clock.Advance(2 * time.Hour)
	n, err := inst.App.Registrations.ExpireDue(context.Background()) // u2 expired, u4 promoted
	require.NoError(t, err)
	require.Equal(t, 1, n)
	v1 := signup(other, "v1", http.StatusCreated)
	do(t, inst, http.MethodPost, "/v1/registrations/"+v1+"/cancel", admin, nil, http.StatusOK)

	hotEvents, otherEvents := activityEvents(t, inst, hot), activityEvents(t, inst, other)
	require.Len(t, hotEvents, 9, "2 created, 2 waitlisted, cancelled, promoted, status_changed, expired, promoted")
	require.Len(t, otherEvents, 2)
	everything := append(ids(hotEvents), ids(otherEvents)...)
	var promotedOrExpired []string
	for _, e := range hotEvents {
		if e["type"] == "registration.promoted" || e["type"] == "registration.expired" {
			promotedOrExpired = append(promotedOrExpired, e["id"].(string))
		}
	}
	require.Len(t, promotedOrExpired, 3)

	want := map[*receiver][]string{all1: everything, all2: everything, typed: promotedOrExpired, byActivity: ids(otherEvents)}
	for rc, evs := range want {
		eventually(t, func() bool { return len(rc.counts()) >= len(evs) })
	}
	// No duplicate shows up over 300 ms, the room one would need to arrive.
	require.Never(t, func() bool {
		for rc := range want {
			for _, n := range rc.counts() {
				if n > 1 {
					return true
				}
			}
		}
		return false
	}, 300*time.Millisecond, 10*time.Millisecond, "an event delivered twice")
	for rc, evs := range want {
		require.Empty(t, rc.failures(), "every request verifies")
		counts := rc.counts()
		require.ElementsMatch(t, evs, keys(counts), "exactly the matching events")
		for id, n := range counts {
			require.Equal(t, 1, n, "event %s delivered once", id)
		}
	}

	// Each payload's data is the event of the history plus the
	// registration as the change left it.
	history := map[string]event{}
	for _, e := range append(hotEvents, otherEvents...) {
		history[e["id"].(string)] = e
	}
	for _, d := range all1.deliveries() {
		p := decodePayload(t, d.Body)
		reg, ok := p.Data["registration"].(map[string]any)
		require.True(t, ok, "data.registration in %s", d.Body)
		delete(p.Data, "registration")
		require.Equal(t, history[d.ID], p.Data)
		require.Equal(t, p.Type, p.Data["type"])
		require.Equal(t, p.Data["registration_id"], reg["id"])
		require.Equal(t, p.Data["to"], reg["status"], "the registration as its change left it")
		if p.Type == "registration.waitlisted" {
			require.NotNil(t, reg["waitlist_position"])
		}
	}
	// And the history per registration reads the same.
	for _, reg := range []string{u1, u2, v1} {
		r := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+reg+"/events", admin, nil)
		var page struct{ Items []event }
		r.JSON(t, &page)
		for _, e := range page.Items {
			require.Equal(t, history[e["id"].(string)], e)
		}
	}
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// deliveriesOf reads a webhook's deliveries through the API.
func deliveriesOf(t *testing.T, inst *apptest.Instance, webhookID string) []map[string]any {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/webhooks/"+webhookID+"/deliveries?limit=500", inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var page struct{ Items []map[string]any }
	r.JSON(t, &page)
	return page.Items
}
