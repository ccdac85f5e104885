package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// createSeries creates a series through the API and returns it.
func createSeries(t *testing.T, inst *apptest.Instance, title string, maxPerUser int) client.Series {
	t.Helper()
	s, err := inst.API(t, "admin", true).CreateSeries(t.Context(), client.NewSeries{Title: title, MaxPerUser: maxPerUser})
	require.NoError(t, err)
	return s
}

func TestSeriesCreateGetListPatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.API(t, "admin", true)

	// The creation is sent as it is, to read its Location and its body.
	r := inst.MustDo(t, http.MethodPost, "/v1/series", inst.Token(t, "admin", true), map[string]any{"title": "Spring workshops", "max_per_user": 2})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var s client.Series
	r.JSON(t, &s)
	require.Regexp(t, `^s_[0-9A-Z]{26}$`, s.ID)
	require.Equal(t, "/v1/series/"+s.ID, r.Header.Get("Location"))
	require.Equal(t, "Spring workshops", s.Title)
	require.Equal(t, 2, s.MaxPerUser)
	require.Regexp(t, `"created_at":"[^"]+Z"`, string(r.Body), "RFC 3339 in UTC")
	require.Equal(t, time.UTC, s.CreatedAt.Location())

	got, err := admin.GetSeries(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, s, got)

	// The listing: newest first, in keyset pages whose cursors work only
	// with it.
	second := createSeries(t, inst, "Summer school", 1)
	third := createSeries(t, inst, "Autumn labs", 1000)
	page, err := admin.ListSeries(ctx, client.ListOptions{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{third.ID, second.ID}, seriesIDs(page.Items))
	require.NotNil(t, page.NextCursor)
	page, err = admin.ListSeries(ctx, client.ListOptions{Limit: 2, Cursor: *page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{s.ID}, seriesIDs(page.Items))
	require.Nil(t, page.NextCursor)
	page, err = admin.ListSeries(ctx, client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Items, 3, "the default limit holds them all")

	changed, err := admin.UpdateSeries(ctx, s.ID, client.SeriesPatch{Title: new("Spring labs")})
	require.NoError(t, err)
	require.Equal(t, "Spring labs", changed.Title)
	require.Equal(t, 2, changed.MaxPerUser, "what the patch leaves out stays")
	require.False(t, changed.UpdatedAt.Before(s.UpdatedAt))
	require.Equal(t, s.CreatedAt, changed.CreatedAt)
	changed, err = admin.UpdateSeries(ctx, s.ID, client.SeriesPatch{MaxPerUser: new(5)})
	require.NoError(t, err)
	require.Equal(t, 5, changed.MaxPerUser)
	require.Equal(t, "Spring labs", changed.Title)
	got, err = admin.GetSeries(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, changed, got)
}

func TestSeriesListingOfNoneIsAnEmptyPage(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	r := inst.MustDo(t, http.MethodGet, "/v1/series", inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.JSONEq(t, `{"items":[],"next_cursor":null}`, string(r.Body))
}

func seriesIDs(ss []client.Series) []string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	return ids
}

func TestSeriesBadInputGetsTheErrorShape(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	series := createSeries(t, inst, "shape", 2).ID
	activity := inst.CreateActivity(t, "shape", 3)
	pool := createPool(t, inst, "shape", 3).ID
	const missing = "s_01JD0000000000000000000000"
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"missing max_per_user", "POST", "/v1/series", `{"title":"x"}`, 400, "invalid_request"},
		{"missing title", "POST", "/v1/series", `{"max_per_user":1}`, 400, "invalid_request"},
		{"empty title", "POST", "/v1/series", `{"title":"","max_per_user":1}`, 400, "invalid_request"},
		{"long title", "POST", "/v1/series", `{"title":"` + strings.Repeat("é", 201) + `","max_per_user":1}`, 400, "invalid_request"},
		{"zero max_per_user", "POST", "/v1/series", `{"title":"x","max_per_user":0}`, 400, "invalid_request"},
		{"negative max_per_user", "POST", "/v1/series", `{"title":"x","max_per_user":-1}`, 400, "invalid_request"},
		{"max_per_user too big", "POST", "/v1/series", `{"title":"x","max_per_user":1001}`, 400, "invalid_request"},
		{"max_per_user a string", "POST", "/v1/series", `{"title":"x","max_per_user":"1"}`, 400, "invalid_request"},
		{"max_per_user a fraction", "POST", "/v1/series", `{"title":"x","max_per_user":1.5}`, 400, "invalid_request"},
		{"null title", "POST", "/v1/series", `{"title":null,"max_per_user":1}`, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/series", `{"title":"x","max_per_user":1,"activities":[]}`, 400, "invalid_request"},
		{"field in another case", "POST", "/v1/series", `{"title":"x","Max_Per_User":1}`, 400, "invalid_request"},
		{"key twice", "POST", "/v1/series", `{"title":"x","max_per_user":1,"max_per_user":2}`, 400, "invalid_request"},
		{"malformed JSON", "POST", "/v1/series", `{"title":"x",`, 400, "invalid_request"},
		{"empty body", "POST", "/v1/series", ``, 400, "invalid_request"},
		{"not an object", "POST", "/v1/series", `[]`, 400, "invalid_request"},
		{"unknown series", "GET", "/v1/series/" + missing, ``, 404, "not_found"},
		{"malformed series id", "GET", "/v1/series/42", ``, 404, "not_found"},
		{"pool id as series", "GET", "/v1/series/" + pool, ``, 404, "not_found"},
		{"activity id as series", "GET", "/v1/series/" + activity, ``, 404, "not_found"},
		{"patch unknown series", "PATCH", "/v1/series/" + missing, `{"max_per_user":5}`, 404, "not_found"},
		{"patch malformed id", "PATCH", "/v1/series/zzz", `{"max_per_user":5}`, 404, "not_found"},
		{"empty patch", "PATCH", "/v1/series/" + series, `{}`, 400, "invalid_request"},
		{"bad patch", "PATCH", "/v1/series/" + series, `{"max_per_user":0}`, 400, "invalid_request"},
		{"patch with an empty title", "PATCH", "/v1/series/" + series, `{"title":""}`, 400, "invalid_request"},
		{"patch unknown field", "PATCH", "/v1/series/" + series, `{"activities":[]}`, 400, "invalid_request"},
		{"limit zero", "GET", "/v1/series?limit=0", ``, 400, "invalid_request"},
		{"limit too big", "GET", "/v1/series?limit=501", ``, 400, "invalid_request"},
		{"malformed cursor", "GET", "/v1/series?cursor=%21%21", ``, 400, "invalid_request"},
		{"another listing's cursor", "GET", "/v1/series?cursor=" + registration.EncodeCursor(pool), ``, 400, "invalid_request"},
		{"unknown cursor", "GET", "/v1/series?cursor=" + registration.EncodeCursor(missing), ``, 400, "invalid_request"},
		{"unknown query parameter", "GET", "/v1/series?page=2", ``, 400, "invalid_request"},
		{"query on a series read", "GET", "/v1/series/" + series + "?limit=1", ``, 400, "invalid_request"},
		{"method not allowed", "DELETE", "/v1/series/" + series, ``, 405, "method_not_allowed"},
		{"activity in an unknown series", "POST", "/v1/activities", `{"title":"x","capacity":1,"series_id":"` + missing + `"}`, 400, "invalid_request"},
		{"activity with a pool as series", "POST", "/v1/activities", `{"title":"x","capacity":1,"series_id":"` + pool + `"}`, 400, "invalid_request"},
		{"activity with an empty series id", "POST", "/v1/activities", `{"title":"x","capacity":1,"series_id":""}`, 400, "invalid_request"},
		{"activity series id a number", "POST", "/v1/activities", `{"title":"x","capacity":1,"series_id":1}`, 400, "invalid_request"},
		{"activity series id a list", "POST", "/v1/activities", `{"title":"x","capacity":1,"series_id":["` + series + `"]}`, 400, "invalid_request"},
		{"activity series id twice", "POST", "/v1/activities", `{"title":"x","capacity":1,"series_id":null,"series_id":"` + series + `"}`, 400, "invalid_request"},
		{"activity patch into an unknown series", "PATCH", "/v1/activities/" + activity, `{"series_id":"` + missing + `"}`, 400, "invalid_request"},
		{"activity patch with an empty series id", "PATCH", "/v1/activities/" + activity, `{"series_id":""}`, 400, "invalid_request"},
		{"activity patch series id an object", "PATCH", "/v1/activities/" + activity, `{"series_id":{}}`, 400, "invalid_request"},
		{"activity patch series id in another case", "PATCH", "/v1/activities/" + activity, `{"Series_ID":null}`, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireErrorShape(t, inst.MustDo(t, tc.method, tc.path, admin, tc.body), tc.status, tc.code)
		})
	}
	got, err := inst.API(t, "admin", true).GetActivity(t.Context(), activity)
	require.NoError(t, err)
	require.Nil(t, got.SeriesID, "a refused patch changes nothing")
}

func TestSeriesRoutesNeedAnAdmin(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	series := createSeries(t, inst, "guarded", 2).ID
	user := inst.Token(t, "u", false)
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/series", `{"title":"x","max_per_user":1}`},
		{"GET", "/v1/series", ``},
		{"GET", "/v1/series/" + series, ``},
		{"PATCH", "/v1/series/" + series, `{"title":"x"}`},
	}
	for _, rt := range routes {
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, "", rt.body), http.StatusUnauthorized, "unauthenticated")
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, "not-a-token", rt.body), http.StatusUnauthorized, "unauthenticated")
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, user, rt.body), http.StatusForbidden, "forbidden")
	}
	got, err := inst.API(t, "admin", true).GetSeries(t.Context(), series)
	require.NoError(t, err)
	require.Equal(t, "guarded", got.Title, "the refused patch changed nothing")
	page, err := inst.API(t, "admin", true).ListSeries(t.Context(), client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "the refused creations created nothing")
}

// TestActivitiesJoinAndLeaveSeries checks an activity's "series_id" as
// created, changed, left unchanged and left, on every read of it, and
// that the registrations of an activity count in its series only while
// it belongs to it.
func TestActivitiesJoinAndLeaveSeries(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := t.Context()
	admin := inst.API(t, "admin", true)
	spring := createSeries(t, inst, "Spring", 1)
	summer := createSeries(t, inst, "Summer", 1)

	// At creation: an id, null, or nothing.
	r := inst.MustDo(t, http.MethodPost, "/v1/activities", inst.Token(t, "admin", true),
		map[string]any{"title": "Lab 1", "capacity": 5, "series_id": spring.ID})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"series_id":"`+spring.ID+`"`)
	var lab1 client.Activity
	r.JSON(t, &lab1)
	r = inst.MustDo(t, http.MethodPost, "/v1/activities", inst.Token(t, "admin", true),
		map[string]any{"title": "Lab 2", "capacity": 5, "series_id": nil})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"series_id":null`, "null at creation: in no series")
	var lab2 client.Activity
	r.JSON(t, &lab2)
	plain := inst.CreateActivity(t, "Plain", 5)
	r = inst.MustDo(t, http.MethodGet, "/v1/activities/"+plain, "", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"series_id":null`, "an activity in no series says so")

	for _, c := range []*client.Client{admin, inst.Public()} {
		got, err := c.GetActivity(ctx, lab1.ID)
		require.NoError(t, err)
		require.Equal(t, spring.ID, *got.SeriesID)
	}

	// lab1 counts in spring: alice, who holds it, may not take lab2 once
	// lab2 joins spring too.
	held := inst.MustSignup(t, lab1.ID, "alice")
	a, err := admin.UpdateActivity(ctx, lab2.ID, client.ActivityPatch{SeriesID: &spring.ID})
	require.NoError(t, err)
	require.Equal(t, spring.ID, *a.SeriesID)
	_, err = inst.Signup(t, lab2.ID, "alice")
	e := apptest.Refusal(t, err)
	require.Equal(t, client.CodeLimitReached, e.Code)
	require.Equal(t, []string{held.ID}, e.RegistrationIDs)

	// A patch without series_id leaves it.
	a, err = admin.UpdateActivity(ctx, lab2.ID, client.ActivityPatch{Title: new("Lab two")})
	require.NoError(t, err)
	require.Equal(t, spring.ID, *a.SeriesID, "a patch without series_id leaves it")
	r = inst.MustDo(t, http.MethodPatch, "/v1/activities/"+lab2.ID, inst.Token(t, "admin", true), `{"capacity":6}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"series_id":"`+spring.ID+`"`)

	// Into another series: lab1's registration no more counts against it.
	a, err = admin.UpdateActivity(ctx, lab2.ID, client.ActivityPatch{SeriesID: &summer.ID})
	require.NoError(t, err)
	require.Equal(t, summer.ID, *a.SeriesID)
	inst.MustSignup(t, lab2.ID, "alice")

	// null leaves the series; the activity's registrations count nowhere.
	r = inst.MustDo(t, http.MethodPatch, "/v1/activities/"+lab1.ID, inst.Token(t, "admin", true), `{"series_id":null}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"series_id":null`)
	third, err := admin.CreateActivity(ctx, client.NewActivity{Title: "Lab 3", Capacity: 5, SeriesID: spring.ID})
	require.NoError(t, err)
	inst.MustSignup(t, third.ID, "alice")

	// The listing of activities carries their series too.
	page, err := admin.ListActivities(ctx, client.ListOptions{})
	require.NoError(t, err)
	series := map[string]*string{}
	for _, it := range page.Items {
		series[it.ID] = it.SeriesID
	}
	require.Equal(t, map[string]*string{lab1.ID: nil, lab2.ID: &summer.ID, plain: nil, third.ID: &spring.ID}, series)

	// A refused patch changes nothing.
	_, err = admin.UpdateActivity(ctx, third.ID, client.ActivityPatch{SeriesID: new("s_01JD0000000000000000000000")})
	e = apptest.Refusal(t, err)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, client.CodeInvalidRequest, e.Code)
	require.Contains(t, e.Message, "s_01JD0000000000000000000000")
	got, err := admin.GetActivity(ctx, third.ID)
	require.NoError(t, err)
	require.Equal(t, spring.ID, *got.SeriesID)
}

// TestSeriesLimitReachedIsReplayedByItsIdempotencyKey checks that the
// replay of a signup refused with limit_reached answers the same 409 body,
// registration_ids and all, even after the registrations it names are
// gone, and that a new key is decided afresh.
func TestSeriesLimitReachedIsReplayedByItsIdempotencyKey(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := t.Context()
	admin := inst.API(t, "admin", true)
	s := createSeries(t, inst, "replayed", 2)
	var acts []string
	for _, title := range []string{"one", "two", "three"} {
		a, err := admin.CreateActivity(ctx, client.NewActivity{Title: title, Capacity: 5, SeriesID: s.ID})
		require.NoError(t, err)
		acts = append(acts, a.ID)
	}
	first := inst.MustSignup(t, acts[0], "bob")
	second := inst.MustSignup(t, acts[1], "bob")
	bob := inst.Token(t, "bob", false)
	path := "/v1/activities/" + acts[2] + "/registrations"

	refused := inst.MustDo(t, http.MethodPost, path, bob, `{}`, "Idempotency-Key", "k-limit")
	requireErrorShape(t, refused, http.StatusConflict, "limit_reached")
	var body struct {
		Error struct {
			Message         string   `json:"message"`
			RegistrationIDs []string `json:"registration_ids"`
		} `json:"error"`
	}
	refused.JSON(t, &body)
	require.ElementsMatch(t, []string{first.ID, second.ID}, body.Error.RegistrationIDs)
	require.Empty(t, refused.Header.Get("Idempotent-Replayed"))

	replay := inst.MustDo(t, http.MethodPost, path, bob, `{}`, "Idempotency-Key", "k-limit")
	require.Equal(t, http.StatusConflict, replay.Status)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(refused.Body), string(replay.Body))

	// The place is free again, but the key keeps its first outcome.
	_, err := admin.CancelRegistration(ctx, first.ID)
	require.NoError(t, err)
	replay = inst.MustDo(t, http.MethodPost, path, bob, `{}`, "Idempotency-Key", "k-limit")
	require.Equal(t, http.StatusConflict, replay.Status)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(refused.Body), string(replay.Body))
	_, err = inst.API(t, "bob", false).Signup(ctx, acts[2], client.SignupOptions{IdempotencyKey: "k-limit"})
	e := apptest.Refusal(t, err)
	require.Equal(t, client.CodeLimitReached, e.Code)
	require.Equal(t, body.Error.RegistrationIDs, e.RegistrationIDs)

	res, err := inst.API(t, "bob", false).Signup(ctx, acts[2], client.SignupOptions{IdempotencyKey: "k-fresh"})
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, client.Pending, res.Registration.Status)
}
