package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestSignupsAreRateLimitedPerUser(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		HTTP: httpapi.Config{SignupLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 3}},
	}})
	var ids []string
	for i := range 5 {
		ids = append(ids, inst.CreateActivity(t, fmt.Sprint("limited ", i), 10))
	}
	for _, id := range ids[:3] {
		inst.MustSignup(t, id, "alice")
	}
	// The refusal is read as it is sent, for its shape and Retry-After.
	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+ids[3]+"/registrations", inst.Token(t, "alice", false), `{}`)
	requireErrorShape(t, r, http.StatusTooManyRequests, "rate_limited")
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, secs, 1)
	// Another user is not affected, and the refused signup wrote nothing.
	inst.MustSignup(t, ids[3], "bob")
	public := inst.Public()
	act, err := public.GetActivity(t.Context(), ids[3])
	require.NoError(t, err)
	require.Equal(t, 1, act.Taken)
	// Reads are never limited.
	for range 10 {
		_, err := public.Seats(t.Context(), ids[0])
		require.NoError(t, err)
	}
}

func TestNoteWritesAreRateLimitedPerIP(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		HTTP: httpapi.Config{PublicWriteLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 4}},
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
	stats, err := inst.Public().NoteStats(t.Context(), "limited")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "limited", Views: 2, Waters: 2}, stats)
	m := inst.MustDo(t, http.MethodGet, "/metrics", "", nil)
	require.Contains(t, string(m.Body), `capacityd_rate_limited_total{limit="public_writes"} 2`)
}

func TestRateLimitsOffByDefault(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	public := inst.Public()
	for range 50 {
		_, err := public.RecordView(t.Context(), "unlimited")
		require.NoError(t, err)
	}
}
