package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/webhook"
)

// createPool creates a pool through the API and returns it.
func createPool(t *testing.T, inst *apptest.Instance, title string, capacity int) client.Pool {
	t.Helper()
	p, err := inst.API(t, "admin", true).CreatePool(t.Context(), client.NewPool{Title: title, Capacity: capacity})
	require.NoError(t, err)
	return p
}

func TestPoolsCreateGetListPatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.API(t, "admin", true)

	// The creation is sent as it is, to read its Location and its body.
	r := inst.MustDo(t, http.MethodPost, "/v1/pools", inst.Token(t, "admin", true), map[string]any{"title": "Main hall", "capacity": 200})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var p client.Pool
	r.JSON(t, &p)
	require.Regexp(t, `^p_[0-9A-Z]{26}$`, p.ID)
	require.Equal(t, "/v1/pools/"+p.ID, r.Header.Get("Location"))
	require.Equal(t, "Main hall", p.Title)
	require.Equal(t, 200, p.Capacity)
	require.Equal(t, 0, p.Taken)
	require.Equal(t, 200, p.Remaining)
	require.Contains(t, string(r.Body), `"activities":[]`, "a pool without activities lists none, not null")
	require.NotContains(t, string(r.Body), `"source"`, "only a read says where its numbers come from")
	require.Regexp(t, `"created_at":"[^"]+Z"`, string(r.Body), "RFC 3339 in UTC")
	require.Equal(t, time.UTC, p.CreatedAt.Location())

	got, err := admin.GetPool(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, "database", got.Source, "an admin reads the authority")
	got.Source = ""
	require.Equal(t, p, got)

	got, err = inst.Public().GetPool(ctx, p.ID)
	require.NoError(t, err)
	require.Contains(t, []string{"cache", "database"}, got.Source)
	require.Equal(t, "Main hall", got.Title)
	require.Equal(t, 200, got.Remaining)
	require.Equal(t, []string{}, got.Activities)

	// The listing: newest first, in keyset pages whose cursors work only
	// with it.
	second := createPool(t, inst, "Lab", 12)
	third := createPool(t, inst, "Annex", 0)
	page, err := admin.ListPools(ctx, client.ListOptions{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{third.ID, second.ID}, poolIDs(page.Items))
	require.NotNil(t, page.NextCursor)
	require.Equal(t, 0, page.Items[0].Remaining, "a pool of no seats")
	page, err = admin.ListPools(ctx, client.ListOptions{Limit: 2, Cursor: *page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{p.ID}, poolIDs(page.Items))
	require.Nil(t, page.NextCursor)
	page, err = admin.ListPools(ctx, client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Items, 3, "the default limit holds them all")
	require.Empty(t, page.Items[0].Source)

	changed, err := admin.UpdatePool(ctx, p.ID, client.PoolPatch{Title: new("Great hall")})
	require.NoError(t, err)
	require.Equal(t, "Great hall", changed.Title)
	require.Equal(t, 200, changed.Capacity, "what the patch leaves out stays")
	require.False(t, changed.UpdatedAt.Before(p.UpdatedAt))
	changed, err = admin.UpdatePool(ctx, p.ID, client.PoolPatch{Capacity: new(150)})
	require.NoError(t, err)
	require.Equal(t, 150, changed.Capacity)
	require.Equal(t, 150, changed.Remaining)
	require.Equal(t, "Great hall", changed.Title)
	got, err = admin.GetPool(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, "Great hall", got.Title)
	require.Equal(t, 150, got.Capacity)
}

func poolIDs(ps []client.Pool) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

func TestPoolBadInputGetsTheErrorShape(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	pool := createPool(t, inst, "shape", 10).ID
	activity := inst.CreateActivity(t, "shape", 3)
	five := `["p_01JD0000000000000000000001","p_01JD0000000000000000000002","p_01JD0000000000000000000003",` +
		`"p_01JD0000000000000000000004","p_01JD0000000000000000000005"]`
	activityCursor := registration.EncodeCursor(activity)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"missing capacity", "POST", "/v1/pools", `{"title":"x"}`, 400, "invalid_request"},
		{"missing title", "POST", "/v1/pools", `{"capacity":1}`, 400, "invalid_request"},
		{"empty title", "POST", "/v1/pools", `{"title":"","capacity":1}`, 400, "invalid_request"},
		{"long title", "POST", "/v1/pools", `{"title":"` + strings.Repeat("é", 201) + `","capacity":1}`, 400, "invalid_request"},
		{"negative capacity", "POST", "/v1/pools", `{"title":"x","capacity":-1}`, 400, "invalid_request"},
		{"capacity too big", "POST", "/v1/pools", `{"title":"x","capacity":1000001}`, 400, "invalid_request"},
		{"capacity a string", "POST", "/v1/pools", `{"title":"x","capacity":"1"}`, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/pools", `{"title":"x","capacity":1,"activities":[]}`, 400, "invalid_request"},
		{"field in another case", "POST", "/v1/pools", `{"title":"x","Capacity":1}`, 400, "invalid_request"},
		{"malformed JSON", "POST", "/v1/pools", `{"title":"x",`, 400, "invalid_request"},
		{"empty body", "POST", "/v1/pools", ``, 400, "invalid_request"},
		{"unknown pool", "GET", "/v1/pools/p_01JD0000000000000000000000", ``, 404, "not_found"},
		{"malformed pool id", "GET", "/v1/pools/42", ``, 404, "not_found"},
		{"activity id as pool", "GET", "/v1/pools/" + activity, ``, 404, "not_found"},
		{"patch malformed id", "PATCH", "/v1/pools/zzz", `{"capacity":5}`, 404, "not_found"},
		{"empty patch", "PATCH", "/v1/pools/" + pool, `{}`, 400, "invalid_request"},
		{"bad patch", "PATCH", "/v1/pools/" + pool, `{"capacity":-5}`, 400, "invalid_request"},
		{"patch unknown field", "PATCH", "/v1/pools/" + pool, `{"activities":[]}`, 400, "invalid_request"},
		{"limit zero", "GET", "/v1/pools?limit=0", ``, 400, "invalid_request"},
		{"limit too big", "GET", "/v1/pools?limit=501", ``, 400, "invalid_request"},
		{"malformed cursor", "GET", "/v1/pools?cursor=%21%21", ``, 400, "invalid_request"},
		{"another listing's cursor", "GET", "/v1/pools?cursor=" + activityCursor, ``, 400, "invalid_request"},
		{"unknown query parameter", "GET", "/v1/pools?page=2", ``, 400, "invalid_request"},
		{"query on a pool read", "GET", "/v1/pools/" + pool + "?limit=1", ``, 400, "invalid_request"},
		{"activity with five pools", "POST", "/v1/activities", `{"title":"x","capacity":1,"pools":` + five + `}`, 400, "invalid_request"},
		{"activity with a pool twice", "POST", "/v1/activities", `{"title":"x","capacity":1,"pools":["` + pool + `","` + pool + `"]}`, 400, "invalid_request"},
		{"activity with an activity as pool", "POST", "/v1/activities", `{"title":"x","capacity":1,"pools":["` + activity + `"]}`, 400, "invalid_request"},
		{"activity pools not a list", "POST", "/v1/activities", `{"title":"x","capacity":1,"pools":"` + pool + `"}`, 400, "invalid_request"},
		{"activity pools of numbers", "POST", "/v1/activities", `{"title":"x","capacity":1,"pools":[1]}`, 400, "invalid_request"},
		{"activity patch with five pools", "PATCH", "/v1/activities/" + activity, `{"pools":` + five + `}`, 400, "invalid_request"},
		{"activity patch with a pool twice", "PATCH", "/v1/activities/" + activity, `{"pools":["` + pool + `","` + pool + `"]}`, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireErrorShape(t, inst.MustDo(t, tc.method, tc.path, admin, tc.body), tc.status, tc.code)
		})
	}
}

// TestActivitiesNamingUnknownPoolsAreRefused checks that an activity
// cannot join a pool that does not exist, at creation or by a patch, and
// that the refused patch changes nothing.
func TestActivitiesNamingUnknownPoolsAreRefused(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := t.Context()
	admin := inst.API(t, "admin", true)
	pool := createPool(t, inst, "real", 10).ID
	const missing = "p_01JD0000000000000000000000"
	_, err := admin.CreateActivity(ctx, client.NewActivity{Title: "x", Capacity: 1, Pools: []string{pool, missing}})
	e := apptest.Refusal(t, err)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, client.CodeInvalidRequest, e.Code)
	require.Contains(t, e.Message, missing)

	a, err := admin.CreateActivity(ctx, client.NewActivity{Title: "x", Capacity: 1, Pools: []string{pool}})
	require.NoError(t, err)
	_, err = admin.UpdateActivity(ctx, a.ID, client.ActivityPatch{Pools: &[]string{missing}})
	require.Equal(t, http.StatusBadRequest, apptest.Refusal(t, err).Status)
	got, err := admin.GetActivity(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, []string{pool}, got.Pools, "a refused patch changes nothing")
}

func TestPoolRoutesNeedAnAdminButTheRead(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	pool := createPool(t, inst, "guarded", 10).ID
	user := inst.Token(t, "u", false)
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/pools", `{"title":"x","capacity":1}`},
		{"GET", "/v1/pools", ``},
		{"PATCH", "/v1/pools/" + pool, `{"title":"x"}`},
	}
	for _, rt := range routes {
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, "", rt.body), http.StatusUnauthorized, "unauthenticated")
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, user, rt.body), http.StatusForbidden, "forbidden")
	}
	for _, token := range []string{"", user, "not-a-token"} {
		r := inst.MustDo(t, http.MethodGet, "/v1/pools/"+pool, token, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var p client.Pool
		r.JSON(t, &p)
		require.Equal(t, "guarded", p.Title)
		require.Contains(t, []string{"cache", "database"}, p.Source)
	}
	got, err := inst.API(t, "admin", true).GetPool(t.Context(), pool)
	require.NoError(t, err)
	require.Equal(t, "guarded", got.Title, "the refused patch changed nothing")
}

// TestActivitiesJoinAndLeavePools checks an activity's "pools" and a
// pool's "activities", as created, replaced and emptied, and the seats a
// pool counts over all its activities.
func TestActivitiesJoinAndLeavePools(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := t.Context()
	admin := inst.API(t, "admin", true)
	hall := createPool(t, inst, "Main hall", 3)
	lab := createPool(t, inst, "Lab", 50)
	sorted := []string{min(hall.ID, lab.ID), max(hall.ID, lab.ID)}

	talk, err := admin.CreateActivity(ctx, client.NewActivity{Title: "Talk", Capacity: 10, Pools: []string{sorted[1], sorted[0]}})
	require.NoError(t, err)
	require.Equal(t, sorted, talk.Pools, "an activity's pools, sorted")
	require.Equal(t, 3, talk.Remaining, "the hall has fewer seats left than the talk")
	workshop, err := admin.CreateActivity(ctx, client.NewActivity{Title: "Workshop", Capacity: 2, Pools: []string{hall.ID}})
	require.NoError(t, err)
	require.Equal(t, []string{hall.ID}, workshop.Pools)
	plain := inst.CreateActivity(t, "Plain", 5)
	a, err := admin.GetActivity(ctx, plain)
	require.NoError(t, err)
	require.Equal(t, []string{}, a.Pools, "an activity in no pool lists none, not null")

	got, err := admin.GetPool(ctx, hall.ID)
	require.NoError(t, err)
	require.Equal(t, []string{min(talk.ID, workshop.ID), max(talk.ID, workshop.ID)}, got.Activities)
	got, err = inst.Public().GetPool(ctx, lab.ID)
	require.NoError(t, err)
	require.Equal(t, []string{talk.ID}, got.Activities)

	// The hall counts the seats of both its activities.
	inst.MustSignup(t, talk.ID, "u1")
	inst.MustSignup(t, workshop.ID, "u2")
	got, err = admin.GetPool(ctx, hall.ID)
	require.NoError(t, err)
	require.Equal(t, 2, got.Taken)
	require.Equal(t, 1, got.Remaining)
	a, err = admin.GetActivity(ctx, talk.ID)
	require.NoError(t, err)
	require.Equal(t, 1, a.Taken)
	require.Equal(t, 1, a.Remaining, "min(10 - 1, the hall's 1)")
	got, err = admin.GetPool(ctx, lab.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Taken, "the lab counts the talk alone")

	// A patch replaces the list; one without pools leaves it; [] empties it.
	a, err = admin.UpdateActivity(ctx, talk.ID, client.ActivityPatch{Pools: &[]string{lab.ID}})
	require.NoError(t, err)
	require.Equal(t, []string{lab.ID}, a.Pools)
	a, err = admin.UpdateActivity(ctx, talk.ID, client.ActivityPatch{Title: new("Keynote")})
	require.NoError(t, err)
	require.Equal(t, []string{lab.ID}, a.Pools, "a patch without pools leaves them")
	got, err = admin.GetPool(ctx, hall.ID)
	require.NoError(t, err)
	require.Equal(t, []string{workshop.ID}, got.Activities)
	require.Equal(t, 1, got.Taken, "the talk's seat left the hall with it")
	a, err = admin.UpdateActivity(ctx, talk.ID, client.ActivityPatch{Pools: &[]string{}})
	require.NoError(t, err)
	require.Equal(t, []string{}, a.Pools)
	require.Equal(t, 9, a.Remaining)
	got, err = admin.GetPool(ctx, lab.ID)
	require.NoError(t, err)
	require.Equal(t, []string{}, got.Activities)
	require.Equal(t, 0, got.Taken)

	// The listing of activities carries their pools too.
	page, err := admin.ListActivities(ctx, client.ListOptions{})
	require.NoError(t, err)
	pools := map[string][]string{}
	for _, it := range page.Items {
		pools[it.ID] = it.Pools
	}
	require.Equal(t, map[string][]string{talk.ID: {}, workshop.ID: {hall.ID}, plain: {}}, pools)
}

// TestPublicPoolReadsThatReachPostgresAreRateLimitedPerAddress: the
// public reads of pools that the instance does not know (ids that name
// nothing, here) reach PostgreSQL within the address's public-read limit;
// a known pool's reads are answered without it.
func TestPublicPoolReadsThatReachPostgresAreRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		HTTP: httpapi.Config{PublicReadLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 2}},
	}})
	pool := createPool(t, inst, "limited", 10).ID
	for i := range 2 {
		r := inst.MustDo(t, http.MethodGet, fmt.Sprintf("/v1/pools/p_%026d", i), "", nil)
		requireErrorShape(t, r, http.StatusNotFound, "not_found")
	}
	r := inst.MustDo(t, http.MethodGet, "/v1/pools/p_00000000000000000000000099", "", nil)
	requireErrorShape(t, r, http.StatusTooManyRequests, "rate_limited")
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	for range 5 {
		got, err := inst.Public().GetPool(t.Context(), pool)
		require.NoError(t, err, "a known pool is read without the database")
		require.Equal(t, "limited", got.Title)
	}
	// An admin's read is not a public read.
	for range 3 {
		got, err := inst.API(t, "admin", true).GetPool(t.Context(), pool)
		require.NoError(t, err)
		require.Equal(t, "database", got.Source)
	}
}

// TestPublicPoolReadsSendNoStatementOnceCached: a pool's public reads
// take its settings from the instance's pool cache and its seats from the
// display, so that a page of many readers sends PostgreSQL nothing; a
// change made through the instance (the pool's title, an activity joining
// it) shows at once, and an id that names no pool is refused from the
// cache after one lookup.
func TestPublicPoolReadsSendNoStatementOnceCached(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The instance's background work is put off, so that its statements
	// are the reads' alone.
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		ActivityCacheTTL:  time.Hour,
		ExpiryInterval:    time.Hour,
		ReconcileInterval: time.Hour,
		Webhooks:          webhook.DispatcherConfig{PollInterval: time.Hour, BacklogInterval: time.Hour},
		OnSale:            onsale.Options{Tick: time.Hour},
	}})
	admin := inst.API(t, "admin", true)
	pool := createPool(t, inst, "hall", 5).ID
	first, err := admin.CreateActivity(ctx, client.NewActivity{Title: "talk", Capacity: 10, Pools: []string{pool}})
	require.NoError(t, err)
	inst.MustSignup(t, first.ID, "u1") // the commit builds the pool's counter
	got, err := inst.Public().GetPool(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []string{first.ID}, got.Activities, "an activity created in the pool through this instance shows at once")

	queries := inst.Queries.Count()
	for range 20 {
		got, err := inst.Public().GetPool(ctx, pool)
		require.NoError(t, err)
		require.Equal(t, "cache", got.Source)
		require.Equal(t, [4]int{5, 1, 4, 1}, [4]int{got.Capacity, got.Taken, got.Remaining, len(got.Activities)})
		require.Equal(t, "hall", got.Title)
	}
	require.Equal(t, queries, inst.Queries.Count(), "public reads of a cached pool with a warm display send no statement")

	title := "main hall"
	_, err = admin.UpdatePool(ctx, pool, client.PoolPatch{Title: &title})
	require.NoError(t, err)
	second, err := admin.CreateActivity(ctx, client.NewActivity{Title: "dinner", Capacity: 10})
	require.NoError(t, err)
	_, err = admin.UpdateActivity(ctx, second.ID, client.ActivityPatch{Pools: &[]string{pool}})
	require.NoError(t, err)
	got, err = inst.Public().GetPool(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, "main hall", got.Title, "a change through this instance shows at once")
	require.ElementsMatch(t, []string{first.ID, second.ID}, got.Activities)

	unknown := "p_00000000000000000000000042"
	r := inst.MustDo(t, http.MethodGet, "/v1/pools/"+unknown, "", nil)
	requireErrorShape(t, r, http.StatusNotFound, "not_found")
	queries = inst.Queries.Count()
	for range 5 {
		r := inst.MustDo(t, http.MethodGet, "/v1/pools/"+unknown, "", nil)
		requireErrorShape(t, r, http.StatusNotFound, "not_found")
	}
	require.Equal(t, queries, inst.Queries.Count(), "an unknown pool is refused from the cache")
}
