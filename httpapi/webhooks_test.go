package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/webhook"
)

// TestWebhookDeliveryAttemptsAreChecked: the attempts of a delivery are
// the admins' to read: 401 without a token, 403 for a user. They are
// not_found for a webhook that does not exist (whatever the form of its
// id), for an event with no delivery to the webhook (another webhook's
// event, a well-formed id of no event, ids of other forms), and once the
// webhook is deleted; a query parameter is invalid_request.
func TestWebhookDeliveryAttemptsAreChecked(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{NoRedis: true, App: app.Options{WebhookGuard: webhook.Guard{AllowPrivate: true}}})
	admin, user := inst.Token(t, "admin", true), inst.Token(t, "alice", false)
	api := inst.API(t, "admin", true)
	actA, actB := inst.CreateActivity(t, "A", 10), inst.CreateActivity(t, "B", 10)
	// Port 9 (discard) refuses: the attempts fail, which does not matter here.
	wA, err := api.CreateWebhook(ctx, client.NewWebhook{URL: "http://127.0.0.1:9/a", Events: []string{"*"}, ActivityID: &actA})
	require.NoError(t, err)
	wB, err := api.CreateWebhook(ctx, client.NewWebhook{URL: "http://127.0.0.1:9/b", Events: []string{"*"}, ActivityID: &actB})
	require.NoError(t, err)
	_, err = inst.API(t, "u1", false).Signup(ctx, actA, client.SignupOptions{})
	require.NoError(t, err)
	ds, err := api.Deliveries(ctx, wA.ID, 0)
	require.NoError(t, err)
	require.Len(t, ds, 1, "queued with the signup")
	eventID := ds[0].EventID
	require.True(t, strings.HasPrefix(eventID, "ev_"), eventID)

	attempts := func(webhookID, eventID string) string {
		return "/v1/webhooks/" + webhookID + "/deliveries/" + eventID + "/attempts"
	}
	r := inst.MustDo(t, http.MethodGet, attempts(wA.ID, eventID), admin, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	require.Equal(t, http.StatusUnauthorized, inst.MustDo(t, http.MethodGet, attempts(wA.ID, eventID), "", nil).Status)
	require.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodGet, attempts(wA.ID, eventID), user, nil).Status)
	r = inst.MustDo(t, http.MethodGet, attempts(wA.ID, eventID)+"?limit=1", admin, nil)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Equal(t, "invalid_request", r.ErrorCode())

	notFound := func(path, mentions string) {
		t.Helper()
		r := inst.MustDo(t, http.MethodGet, path, admin, nil)
		require.Equal(t, http.StatusNotFound, r.Status, "%s: %s", path, r.Body)
		require.Equal(t, "not_found", r.ErrorCode(), path)
		require.Contains(t, string(r.Body), mentions, path)
	}
	notFound(attempts(wB.ID, eventID), "has no delivery of event "+eventID)
	other := wA.ID[:len(wA.ID)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(wA.ID, "0")]
	notFound(attempts(other, eventID), "webhook "+other+" not found")
	notFound(attempts("wh_nope", eventID), "not found")
	cut := strings.LastIndexByte(eventID, '_')
	for _, e := range []string{
		eventID[:cut] + "_2", eventID[:cut] + "_0", eventID[:cut] + "_01", eventID[:cut] + "_-1", eventID + "_1",
		"ev_" + strings.TrimPrefix(actB, "a_") + "_1", "ev_a_" + strings.TrimPrefix(actA, "a_") + "_1",
		strings.TrimPrefix(eventID, "ev_"), "ev__1", "ev_", "nope", "%0Aev_1",
	} {
		notFound(attempts(wA.ID, e), "no delivery of event")
	}

	_, err = api.DeliveryAttempts(ctx, wB.ID, eventID)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusNotFound, ce.Status)
	require.Equal(t, client.CodeNotFound, ce.Code)

	require.NoError(t, api.DeleteWebhook(ctx, wA.ID))
	notFound(attempts(wA.ID, eventID), "webhook "+wA.ID+" not found")
}
