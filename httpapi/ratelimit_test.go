package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/apptest"
)

func TestSignupsAreRateLimitedPerUser(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		SignupLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 3},
	}})
	var ids []string
	for i := range 5 {
		ids = append(ids, inst.CreateActivity(t, fmt.Sprint("limited ", i), 10))
	}
	alice := inst.Token(t, "alice", false)
	for _, id := range ids[:3] {
		r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", alice, `{}`)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	}
	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+ids[3]+"/registrations", alice, `{}`)
	requireErrorShape(t, r, http.StatusTooManyRequests, "rate_limited")
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, secs, 1)
	// Another user is not affected, and the refused signup wrote nothing.
	r = inst.MustDo(t, http.MethodPost, "/v1/activities/"+ids[3]+"/registrations", inst.Token(t, "bob", false), `{}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r = inst.MustDo(t, http.MethodGet, "/v1/activities/"+ids[3], "", nil)
	require.Contains(t, string(r.Body), `"taken":1,`)
	// Reads are never limited.
	for range 10 {
		require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodGet, "/v1/activities/"+ids[0]+"/seats", "", nil).Status)
	}
}

func TestNoteWritesAreRateLimitedPerIP(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		PublicWriteLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 4},
	}})
	statuses := map[int]int{}
	for i := range 6 {
		path := "/v1/notes/limited/views"
		if i%2 == 1 {
			path = "/v1/notes/limited/waters"
		}
		r := inst.MustDo(t, http.MethodPost, path, "", nil)
		statuses[r.Status]++
		if r.Status == http.StatusTooManyRequests {
			requireErrorShape(t, r, http.StatusTooManyRequests, "rate_limited")
		}
	}
	require.Equal(t, map[int]int{200: 4, 429: 2}, statuses)
	// Refused increments were not counted; stats reads are not limited.
	r := inst.MustDo(t, http.MethodGet, "/v1/notes/limited/stats", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, `{"note_id":"limited","views":2,"waters":2}`, string(r.Body))
	m := inst.MustDo(t, http.MethodGet, "/metrics", "", nil)
	require.Contains(t, string(m.Body), `capacityd_rate_limited_total{limit="public_writes"} 2`)
}

func TestRateLimitsOffByDefault(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	for range 50 {
		require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodPost, "/v1/notes/unlimited/views", "", nil).Status)
	}
}
