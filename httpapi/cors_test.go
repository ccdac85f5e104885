package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestCORSReadsFromAnyOriginWritesFromAllowedOnes(t *testing.T) {
	t.Parallel()
	inst := startEdge(t, func(c *httpapi.Config) { c.CORSAllowedOrigins = []string{"https://notes.example"} })
	id := fakeActivityID

	// Reads: any origin.
	r := inst.do(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil, "Origin", "https://anyone.example")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
	r = inst.do(t, http.MethodGet, "/widget/seats.js", "", nil, "Origin", "https://anyone.example")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "text/javascript; charset=utf-8", r.Header.Get("Content-Type"))
	r = inst.do(t, http.MethodOptions, "/v1/activities/"+id+"/seats/stream", "", nil,
		"Origin", "https://anyone.example", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "last-event-id")
	require.Equal(t, http.StatusNoContent, r.Status)
	require.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"))

	// Writes: the configured origin, the page's own origin, or no browser.
	r = inst.do(t, http.MethodPost, "/v1/notes/cors-note/views", "", nil, "Origin", "https://notes.example")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Equal(t, "https://notes.example", r.Header.Get("Access-Control-Allow-Origin"))
	r = inst.do(t, http.MethodPost, "/v1/notes/cors-note/views", "", nil, "Origin", inst.URL)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	r = inst.do(t, http.MethodPost, "/v1/notes/cors-note/views", "", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	r = inst.do(t, http.MethodOptions, "/v1/notes/cors-note/waters", "", nil,
		"Origin", "https://notes.example", "Access-Control-Request-Method", "POST")
	require.Equal(t, http.StatusNoContent, r.Status)
	require.Equal(t, "https://notes.example", r.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, r.Header.Get("Access-Control-Allow-Methods"), "POST")
	r = inst.do(t, http.MethodOptions, "/v1/webhooks/w_01J0000000000000000000000", "", nil,
		"Origin", "https://notes.example", "Access-Control-Request-Method", "DELETE")
	require.Equal(t, http.StatusNoContent, r.Status)
	require.Contains(t, r.Header.Get("Access-Control-Allow-Methods"), "DELETE", "an admin page may delete a webhook")

	// Any other origin: refused, and not counted.
	r = inst.do(t, http.MethodPost, "/v1/notes/cors-note/views", "", nil, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, r.Status)
	require.Equal(t, "forbidden", r.ErrorCode())
	require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	r = inst.do(t, http.MethodOptions, "/v1/notes/cors-note/views", "", nil,
		"Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	require.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	r = inst.do(t, http.MethodGet, "/v1/notes/cors-note/stats", "", nil)
	require.JSONEq(t, `{"note_id":"cors-note","views":3,"waters":0}`, string(r.Body))
}

// TestNoteWritesFromAnyOriginUnlessOriginsAreListed: with no
// CORS_ALLOWED_ORIGINS, the note buttons record views and waters from a
// page of any site (its preflight too); other writes still need the
// page's own origin.
func TestNoteWritesFromAnyOriginUnlessOriginsAreListed(t *testing.T) {
	t.Parallel()
	inst := startEdge(t)
	for _, path := range []string{"/v1/notes/any-site/views", "/v1/notes/any-site/waters"} {
		r := inst.do(t, http.MethodOptions, path, "", nil,
			"Origin", "https://blog.example", "Access-Control-Request-Method", "POST")
		require.Equal(t, http.StatusNoContent, r.Status)
		require.Equal(t, "https://blog.example", r.Header.Get("Access-Control-Allow-Origin"), path)
		r = inst.do(t, http.MethodPost, path, "", nil, "Origin", "https://blog.example")
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, "https://blog.example", r.Header.Get("Access-Control-Allow-Origin"))
		r = inst.do(t, http.MethodPost, path, "", nil, "Origin", "null") // a file:// page
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	}
	r := inst.do(t, http.MethodGet, "/v1/notes/any-site/stats", "", nil)
	require.JSONEq(t, `{"note_id":"any-site","views":2,"waters":2}`, string(r.Body))

	r = inst.do(t, http.MethodPost, "/v1/activities", inst.token(t, "admin", true), map[string]any{"title": "t", "capacity": 1},
		"Origin", "https://blog.example")
	require.Equal(t, http.StatusForbidden, r.Status, "writes with a token still need an allowed origin")
}

func TestDemoPageAndSignups(t *testing.T) {
	t.Parallel()
	off := apptest.Start(t, apptest.Options{})
	id := off.CreateActivity(t, "demo", 1)
	r := off.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]string{"activity_id": id})
	require.NotEqual(t, http.StatusCreated, r.Status, "demo signups are off by default")
	r = off.MustDo(t, http.MethodGet, "/demo?activity="+id+"&note=demo-note", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), `data-seats-activity="`+id+`"`)
	require.Contains(t, string(r.Body), `data-note="demo-note"`)
	require.NotContains(t, string(r.Body), "demo-signup")
	// Values of the wrong form never reach the page.
	r = off.MustDo(t, http.MethodGet, `/demo?activity=%22%3E%3Cscript%3E&note=%3Cb%3E`, "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.NotContains(t, string(r.Body), "<b>")
	require.NotContains(t, string(r.Body), `"><script>`)
	// Bare: the newest activity and the demo note.
	newest := off.CreateActivity(t, "newest", 2)
	r = off.MustDo(t, http.MethodGet, "/demo", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), `data-seats-activity="`+newest+`"`)
	require.NotContains(t, string(r.Body), `data-seats-activity="`+id+`"`)
	require.Contains(t, string(r.Body), `data-note="demo-note"`)
	r = off.MustDo(t, http.MethodGet, "/demo?waitlist="+id, "", nil)
	require.NotContains(t, string(r.Body), `data-seats-activity="`+newest+`"`, "only the activities it names")

	on := apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{DemoSignups: true}}})
	id = on.CreateActivity(t, "demo", 1)
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]string{"activity_id": id})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var reg struct {
		UserID string `json:"user_id"`
	}
	r.JSON(t, &reg)
	require.Regexp(t, `^demo-[0-9a-f]{12}$`, reg.UserID)
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]string{"activity_id": id})
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, "activity_full", r.ErrorCode())
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]string{"activity_id": "a_01JD0000000000000000000000"})
	require.Equal(t, http.StatusNotFound, r.Status)

	// A party, as in a signup: all or nothing, within the activity's
	// max_seats_per_registration.
	party, err := on.API(t, "admin", true).CreateActivity(t.Context(), client.NewActivity{Title: "party", Capacity: 4, MaxSeatsPerRegistration: 3})
	require.NoError(t, err)
	for _, seats := range []int{0, 4, 101} {
		r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]any{"activity_id": party.ID, "seats": seats})
		require.Equal(t, http.StatusBadRequest, r.Status, "seats %d", seats)
	}
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]any{"activity_id": party.ID, "seats": 3})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var seated client.Registration
	r.JSON(t, &seated)
	require.Equal(t, 3, seated.Seats)
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]any{"activity_id": party.ID, "seats": 2})
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, "activity_full", r.ErrorCode())

	// A pool: a line saying that its two activities share its seats, and
	// a seat widget and a signup button for each; a demo signup to one
	// lowers the other's remaining, as its seats read shows.
	hall := createPool(t, on, "Main hall", 3)
	var pooled []string
	for _, title := range []string{"Symposium", "Symposium + dinner"} {
		a, err := on.API(t, "admin", true).CreateActivity(t.Context(), client.NewActivity{Title: title, Capacity: 3, Pools: []string{hall.ID}})
		require.NoError(t, err)
		pooled = append(pooled, a.ID)
	}
	r = on.MustDo(t, http.MethodGet, "/demo?pool="+hall.ID+"&note=demo-note", "", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	page := string(r.Body)
	require.Contains(t, page, `data-demo-pool="`+hall.ID+`"`)
	require.Contains(t, page, "Main hall")
	for _, id := range pooled {
		require.Contains(t, page, `data-seats-activity="`+id+`"`)
		require.Contains(t, page, `data-demo-signup="`+id+`"`)
		require.Contains(t, page, `<strong data-demo-title="`+id+`">`, "the pool's line names it")
	}
	require.Contains(t, page, " share the 3 seats of Main hall: a signup to one leaves a seat fewer for the other.")
	require.NotContains(t, page, `data-seats-activity="`+party.ID+`"`, "with a pool, not the newest activity")
	require.Contains(t, page, `data-note="demo-note"`)
	remaining := func(id string) int {
		s, err := on.Public().Seats(t.Context(), id)
		require.NoError(t, err)
		return s.Remaining
	}
	require.Equal(t, 3, remaining(pooled[1]))
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]string{"activity_id": pooled[0]})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Eventually(t, func() bool { return remaining(pooled[1]) == 2 }, 5*time.Second, 10*time.Millisecond,
		"a signup to the symposium leaves the dinner a seat fewer")
	require.Equal(t, 2, remaining(pooled[0]))
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]any{"activity_id": pooled[1], "seats": 2})
	require.Equal(t, http.StatusBadRequest, r.Status, "one seat per signup by default")
	for range 2 {
		r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]string{"activity_id": pooled[1]})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	}
	r = on.MustDo(t, http.MethodPost, "/demo/signups", "", map[string]string{"activity_id": pooled[0]})
	require.Equal(t, http.StatusConflict, r.Status, "the hall is full, though the symposium has two seats of its own")
	require.Equal(t, "activity_full", r.ErrorCode())
	require.Eventually(t, func() bool { return remaining(pooled[0]) == 0 }, 5*time.Second, 10*time.Millisecond)

	// A pool that does not exist is named; one of the wrong form is left
	// out; neither brings the newest activity.
	missing := "p_01JD0000000000000000000000"
	r = on.MustDo(t, http.MethodGet, "/demo?pool="+missing, "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), "Pool <code>"+missing+"</code> not found.")
	require.NotContains(t, string(r.Body), `<div class="seats"`)
	require.NotContains(t, string(r.Body), "No activity given")
	r = on.MustDo(t, http.MethodGet, "/demo?pool=%3Cb%3E", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.NotContains(t, string(r.Body), "<b>")
	require.NotContains(t, string(r.Body), "not found")
}

// TestDemoPagePoolReadsAreRateLimited checks that the demo page's pool,
// read from PostgreSQL, counts against the client's public-read limit like
// a public pool read, and that the page without a pool does not.
func TestDemoPagePoolReadsAreRateLimited(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		HTTP: httpapi.Config{PublicReadLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 2}},
	}})
	pool := createPool(t, inst, "limited", 10).ID
	for range 2 {
		r := inst.MustDo(t, http.MethodGet, "/demo?pool="+pool, "", nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Contains(t, string(r.Body), `data-demo-pool="`+pool+`"`)
	}
	r := inst.MustDo(t, http.MethodGet, "/demo?pool="+pool, "", nil)
	requireErrorShape(t, r, http.StatusTooManyRequests, "rate_limited")
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	r = inst.MustDo(t, http.MethodGet, "/demo?note=n1", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "the page without a pool reads no pool")
}
