package e2e

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/webhook"
)

// TestNonPublicURLsAreRefusedAtCreation: without WEBHOOK_ALLOW_PRIVATE,
// URLs on loopback, private, link-local or unspecified addresses (as IP
// literals, IPv4-mapped, or a name that resolves to loopback) and schemes
// other than http and https are refused with 400, and nothing is stored.
func TestNonPublicURLsAreRefusedAtCreation(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	admin := inst.Token(t, "admin", true)
	for _, u := range []string{
		"http://127.0.0.1/hook", "http://127.0.0.1:8080/hook", "http://[::1]/hook", "http://169.254.169.254/latest/meta-data",
		"http://10.0.0.1/hook", "http://192.168.0.10/", "http://172.16.5.4/", "http://0.0.0.0/", "http://[::]/",
		"http://[::ffff:127.0.0.1]/", "http://[fd00::1]/", "http://[fe80::1]/", "http://localhost/hook", "http://localhost:9/",
		"file:///etc/passwd", "gopher://example.org/", "ftp://example.org/", "javascript:alert(1)", "//example.org/", "/relative",
		"https://", "",
	} {
		r := inst.MustDo(t, http.MethodPost, "/v1/webhooks", admin, map[string]any{"url": u, "events": []string{"*"}})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", u, r.Body)
		require.Equal(t, "invalid_request", r.ErrorCode(), u)
	}
	var n int
	require.NoError(t, inst.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook`).Scan(&n))
	require.Zero(t, n)
}

// TestPrivateWebhookURLRefusalNamesTheSetting: the refusal of a URL on a
// non-public address tells the operator which setting allows it.
func TestPrivateWebhookURLRefusalNamesTheSetting(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	admin := inst.Token(t, "admin", true)
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://10.0.0.1/hook", "http://localhost/hook", "http://[::1]/"} {
		r := inst.MustDo(t, http.MethodPost, "/v1/webhooks", admin, map[string]any{"url": u, "events": []string{"*"}})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", u, r.Body)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		r.JSON(t, &e)
		require.Equal(t, "invalid_request", e.Error.Code)
		require.Contains(t, e.Error.Message, "non-public address", u)
		require.Contains(t, e.Error.Message, "WEBHOOK_ALLOW_PRIVATE=true", u)
	}
}

func TestWebhookRequestsAreChecked(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{})
	admin, user := inst.Token(t, "admin", true), inst.Token(t, "alice", false)
	act := inst.CreateActivity(t, "checked", 10)
	ok := map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}}
	for _, body := range []any{
		map[string]any{"url": "http://127.0.0.1:9/hook"},
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{}},
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*", "registration.created"}},
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"registration.deleted"}},
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": "*"},
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}, "activity_id": ""},
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}, "secret": "mine"},
		map[string]any{"url": 42, "events": []string{"*"}},
		map[string]any{"url": "http://127.0.0.1:99999/hook", "events": []string{"*"}},
		map[string]any{"url": "http://127.0.0.1:0/hook", "events": []string{"*"}},
		"not json", "",
	} {
		r := inst.MustDo(t, http.MethodPost, "/v1/webhooks", admin, body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", body, r.Body)
		require.Equal(t, "invalid_request", r.ErrorCode())
	}
	for _, missing := range []string{"a_01JD0000000000000000000000", "not-an-id"} {
		r := inst.MustDo(t, http.MethodPost, "/v1/webhooks", admin,
			map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}, "activity_id": missing})
		require.Equal(t, http.StatusNotFound, r.Status, "an activity id that names nothing, whatever its form: %s", r.Body)
		require.Equal(t, "not_found", r.ErrorCode())
	}
	var n int
	require.NoError(t, inst.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook`).Scan(&n))
	require.Zero(t, n, "no webhook stored")
	require.Equal(t, http.StatusUnauthorized, inst.MustDo(t, http.MethodPost, "/v1/webhooks", "", ok).Status)
	require.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodPost, "/v1/webhooks", user, ok).Status)
	require.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodGet, "/v1/webhooks", user, nil).Status)
	require.Equal(t, http.StatusBadRequest, inst.MustDo(t, http.MethodGet, "/v1/webhooks?page=2", admin, nil).Status)

	r := inst.MustDo(t, http.MethodPost, "/v1/webhooks", admin,
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"registration.created", "registration.created"}, "activity_id": act})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var w map[string]any
	r.JSON(t, &w)
	id := w["id"].(string)
	require.Regexp(t, `^wh_[0-9A-Z]{26}$`, id)
	require.Equal(t, "/v1/webhooks/"+id, r.Header.Get("Location"))
	require.Equal(t, []any{"registration.created"}, w["events"], "duplicates dropped")
	require.Equal(t, act, w["activity_id"])
	require.Regexp(t, `^whsec_`, w["secret"])
	got := do(t, inst, http.MethodGet, "/v1/webhooks/"+id, admin, nil, http.StatusOK)
	require.NotContains(t, got, "secret")
	require.Equal(t, w["created_at"], got["created_at"])

	// Another well-formed id: the last character changed (to one it is not).
	other := id[:len(id)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(id, "0")]
	for _, path := range []string{"/v1/webhooks/wh_nope", "/v1/webhooks/" + other, "/v1/webhooks/wh_01JD0000000000000000000000/deliveries"} {
		require.Equal(t, http.StatusNotFound, inst.MustDo(t, http.MethodGet, path, admin, nil).Status, path)
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "after=3"} {
		require.Equal(t, http.StatusBadRequest, inst.MustDo(t, http.MethodGet, "/v1/webhooks/"+id+"/deliveries?"+q, admin, nil).Status, q)
	}
	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodGet, "/v1/webhooks/"+id+"/deliveries?limit=1", admin, nil).Status)
	require.Equal(t, http.StatusNoContent, inst.MustDo(t, http.MethodDelete, "/v1/webhooks/"+id, admin, nil).Status)
	require.Equal(t, http.StatusNotFound, inst.MustDo(t, http.MethodGet, "/v1/webhooks/"+id, admin, nil).Status)
	require.Equal(t, http.StatusNotFound, inst.MustDo(t, http.MethodDelete, "/v1/webhooks/"+id, admin, nil).Status)
}

// TestDeletingAWebhookStopsItsDeliveries: a receiver that always fails
// keeps its deliveries pending; once the webhook is deleted nothing more
// is sent and its deliveries are gone.
func TestDeletingAWebhookStopsItsDeliveries(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{})
	rc := newReceiver(t, func(int, http.ResponseWriter, *http.Request) int { return http.StatusServiceUnavailable })
	w := register(t, inst, rc, []string{"*"}, nil)
	act := inst.CreateActivity(t, "deleted", 10)
	do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations", inst.Token(t, "u1", false), map[string]any{}, http.StatusCreated)
	eventually(t, func() bool { return len(rc.deliveries()) >= 2 })
	do(t, inst, http.MethodDelete, "/v1/webhooks/"+w.ID, inst.Token(t, "admin", true), nil, http.StatusNoContent)
	// An attempt under way at the deletion may still land; wait for it.
	require.Eventually(t, func() bool { return gauge(t, inst, "capacityd_webhook_sends_in_flight") == 0 },
		10*time.Second, 10*time.Millisecond, "the attempt under way ends")
	n := len(rc.deliveries())
	require.Never(t, func() bool { return len(rc.deliveries()) != n }, time.Second, 10*time.Millisecond,
		"nothing sent after the deletion, over a second")
	var left int
	require.NoError(t, inst.App.Pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM webhook_retry) + (SELECT count(*) FROM webhook_attempt) + (SELECT count(*) FROM webhook_cursor)`).Scan(&left))
	require.Zero(t, left)
}

// TestRedirectsAreNotFollowed: a receiver that redirects (here to another
// local server standing for a private address) gets the attempt; the 3xx
// is recorded as its answer and retried, and the redirect's target is
// never asked.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{})
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) int {
		w.Header().Set("Location", target.URL+"/internal")
		return http.StatusFound
	})
	wh := register(t, inst, rc, []string{"*"}, nil)
	act := inst.CreateActivity(t, "redirect", 10)
	do(t, inst, http.MethodPost, "/v1/activities/"+act+"/registrations", inst.Token(t, "u1", false), map[string]any{}, http.StatusCreated)
	eventually(t, func() bool { return len(rc.deliveries()) >= 2 })
	require.Zero(t, hits.Load(), "the redirect's target was never asked")
	ds := deliveriesOf(t, inst, wh.ID)
	require.Len(t, ds, 1)
	require.EqualValues(t, http.StatusFound, ds[0]["last_status_code"])
	require.Equal(t, "pending", ds[0]["state"])
}

// TestWithoutASecretKeySecretsAreKeptInClearThenSealed: a server without
// WEBHOOK_SECRET_KEY creates webhooks and delivers to them, their secrets
// stored in clear; the first instance started with the key seals them, and
// deliveries go on, signed with the same secret.
func TestWithoutASecretKeySecretsAreKeptInClearThenSealed(t *testing.T) {
	t.Parallel()
	plain := setup(t, app.Options{WebhookSecretKey: []byte{}})
	rc := newReceiver(t, nil)
	w := register(t, plain, rc, []string{"registration.created"}, nil)
	stored := func() []byte {
		var b []byte
		require.NoError(t, plain.App.Pool.QueryRow(context.Background(),
			`SELECT secret FROM webhook WHERE public_id = $1`, w.ID).Scan(&b))
		return b
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, "whsec_"))
	require.NoError(t, err)
	require.Equal(t, append([]byte{0}, key...), stored(), "kept in clear")

	act := plain.CreateActivity(t, "clear secrets", 10)
	signup := "/v1/activities/" + act + "/registrations"
	do(t, plain, http.MethodPost, signup, plain.Token(t, "u1", false), map[string]any{}, http.StatusCreated)
	eventually(t, func() bool { return len(rc.deliveries()) == 1 })

	keyed := apptest.Start(t, apptest.Options{DatabaseURL: plain.DatabaseURL, NoRedis: true,
		App: app.Options{WebhookGuard: webhook.Guard{AllowPrivate: true}, Webhooks: webhook.DispatcherConfig{RetryBase: 100 * time.Millisecond, PollInterval: 100 * time.Millisecond}}})
	eventually(t, func() bool { return stored()[0] == 1 })
	require.NotContains(t, string(stored()), string(key), "sealed")

	do(t, keyed, http.MethodPost, signup, keyed.Token(t, "u2", false), map[string]any{}, http.StatusCreated)
	eventually(t, func() bool { return len(rc.counts()) == 2 })
	require.Empty(t, rc.failures(), "every delivery verifies with the secret shown at creation")
}

// gauge returns the value of a gauge (without labels) of the instance's
// registry.
func gauge(t *testing.T, inst *apptest.Instance, name string) float64 {
	t.Helper()
	mfs, err := inst.App.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1, name)
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.Failf(t, "no such gauge", "%s", name)
	return 0
}
