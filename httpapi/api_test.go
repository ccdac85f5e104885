package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestBadRequestsGetTheErrorShape(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	id := inst.CreateActivity(t, "shape", 3)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/v1/activities", `{"title": "x",`, 400, "invalid_request"},
		{"not an object", "POST", "/v1/activities", `[1,2]`, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/activities", `{"title":"x","capacity":1,"seats":3}`, 400, "invalid_request"},
		{"wrong type", "POST", "/v1/activities", `{"title":"x","capacity":"1"}`, 400, "invalid_request"},
		{"fractional", "POST", "/v1/activities", `{"title":"x","capacity":1.5}`, 400, "invalid_request"},
		{"huge number", "POST", "/v1/activities", `{"title":"x","capacity":1e30}`, 400, "invalid_request"},
		{"capacity too big", "POST", "/v1/activities", `{"title":"x","capacity":1000001}`, 400, "invalid_request"},
		{"negative capacity", "POST", "/v1/activities", `{"title":"x","capacity":-1}`, 400, "invalid_request"},
		{"empty title", "POST", "/v1/activities", `{"title":"","capacity":1}`, 400, "invalid_request"},
		{"long title", "POST", "/v1/activities", `{"title":"` + strings.Repeat("é", 201) + `","capacity":1}`, 400, "invalid_request"},
		{"missing capacity", "POST", "/v1/activities", `{"title":"x"}`, 400, "invalid_request"},
		{"hold too short", "POST", "/v1/activities", `{"title":"x","capacity":1,"hold_seconds":59}`, 400, "invalid_request"},
		{"hold too long", "POST", "/v1/activities", `{"title":"x","capacity":1,"hold_seconds":86401}`, 400, "invalid_request"},
		{"trailing data", "POST", "/v1/activities", `{"title":"x","capacity":1} {}`, 400, "invalid_request"},
		{"empty body", "POST", "/v1/activities", ``, 400, "invalid_request"},
		{"too large", "POST", "/v1/activities", `{"title":"` + strings.Repeat("x", 70<<10) + `","capacity":1}`, 413, "payload_too_large"},
		{"empty patch", "PATCH", "/v1/activities/" + id, `{}`, 400, "invalid_request"},
		{"bad patch", "PATCH", "/v1/activities/" + id, `{"capacity":-5}`, 400, "invalid_request"},
		{"unknown activity", "GET", "/v1/activities/a_01JD0000000000000000000000", ``, 404, "not_found"},
		{"malformed id", "GET", "/v1/activities/42", ``, 404, "not_found"},
		{"registration id as activity", "GET", "/v1/activities/r_01JD0000000000000000000000", ``, 404, "not_found"},
		{"patch unknown", "PATCH", "/v1/activities/zzz", `{"capacity":5}`, 404, "not_found"},
		{"seats unknown", "GET", "/v1/activities/a_01JD0000000000000000000000/seats", ``, 404, "not_found"},
		{"unknown registration", "GET", "/v1/registrations/r_01JD0000000000000000000000", ``, 404, "not_found"},
		{"malformed registration", "POST", "/v1/registrations/%00/cancel", ``, 404, "not_found"},
		{"no route", "GET", "/v2/nothing", ``, 404, "not_found"},
		{"signup unknown activity", "POST", "/v1/activities/a_01JD0000000000000000000000/registrations", `{}`, 404, "not_found"},
		{"signup metadata not object", "POST", "/v1/activities/" + id + "/registrations", `{"metadata":[1]}`, 400, "invalid_request"},
		{"signup metadata too big", "POST", "/v1/activities/" + id + "/registrations", `{"metadata":{"x":"` + strings.Repeat("m", 4100) + `"}}`, 400, "invalid_request"},
		{"status missing", "POST", "/v1/registrations/r_01JD0000000000000000000000/status", `{}`, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := inst.MustDo(t, tc.method, tc.path, admin, tc.body)
			require.Equal(t, tc.status, r.Status, string(r.Body))
			require.Equal(t, tc.code, r.ErrorCode(), string(r.Body))
			require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"))
			var body map[string]map[string]string
			r.JSON(t, &body)
			require.NotEmpty(t, body["error"]["message"])
		})
	}
}

func TestActivitiesCreateGetPatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.API(t, "admin", true)
	// The creation is sent as it is, to read its Location and its body's
	// timestamps.
	r := inst.MustDo(t, http.MethodPost, "/v1/activities", inst.Token(t, "admin", true), map[string]any{"title": "Cardiology grand rounds", "capacity": 120})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var a client.Activity
	r.JSON(t, &a)
	require.Regexp(t, `^a_[0-9A-Z]{26}$`, a.ID)
	require.Equal(t, "/v1/activities/"+a.ID, r.Header.Get("Location"))
	require.Equal(t, 900, a.HoldSeconds, "default hold")
	require.Equal(t, 0, a.Taken)
	require.Equal(t, 120, a.Remaining)
	require.Equal(t, time.UTC, a.CreatedAt.Location())
	require.Contains(t, string(r.Body), `"created_at":"`)
	require.Regexp(t, `"created_at":"[^"]+Z"`, string(r.Body), "RFC 3339 in UTC")

	got, err := inst.Public().GetActivity(ctx, a.ID)
	require.NoError(t, err)
	require.Contains(t, []string{"cache", "database"}, got.Source)
	got.Source = ""
	require.Equal(t, a, got)

	got, err = admin.UpdateActivity(ctx, a.ID, client.ActivityPatch{Title: new("Renamed"), HoldSeconds: new(60)})
	require.NoError(t, err)
	require.Equal(t, "Renamed", got.Title)
	require.Equal(t, 60, got.HoldSeconds)
	require.Equal(t, 120, got.Capacity)
	require.False(t, got.UpdatedAt.Before(a.UpdatedAt))

	_, err = inst.Public().UpdateActivity(ctx, a.ID, client.ActivityPatch{Title: new("x")})
	require.Equal(t, http.StatusUnauthorized, apptest.Refusal(t, err).Status)
	_, err = inst.API(t, "u", false).UpdateActivity(ctx, a.ID, client.ActivityPatch{Title: new("x")})
	require.Equal(t, http.StatusForbidden, apptest.Refusal(t, err).Status)

	require.NoError(t, inst.Public().Health(ctx))
	_, err = inst.Public().Ready(ctx)
	require.NoError(t, err)
	m := inst.MustDo(t, http.MethodGet, "/metrics", "", nil)
	require.Equal(t, http.StatusOK, m.Status)
	metrics := string(m.Body)
	require.Contains(t, metrics, `capacityd_http_requests_total{method="POST",route="/v1/activities",status="201"} 1`)
	require.Contains(t, metrics, "go_goroutines")
}
