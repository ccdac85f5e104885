package faulttest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestPostgresOutageAnswers503AndRecovers stops the instance's PostgreSQL
// under it: signups, cancels and note writes answer 503 unavailable with
// Retry-After quickly, nothing is half-written, the display counter is
// compensated, /readyz says 503, and the same instance serves again once
// the cluster is back.
func TestPostgresOutageAnswers503AndRecovers(t *testing.T) {
	t.Parallel()
	pg := migratedPrivatePostgres(t)
	redis := testenv.PrivateRedis(t)
	const deadline = 4 * time.Second
	inst := apptest.Start(t, apptest.Options{DatabaseURL: pg.URL, RedisURL: redis.URL(), App: app.Options{RequestTimeout: deadline}})
	id := inst.CreateActivity(t, "outage", 50)
	var regs []string
	for i := range 10 {
		r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, fmt.Sprint("before-", i), false), `{}`)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		var reg struct{ ID string }
		r.JSON(t, &reg)
		regs = append(regs, reg.ID)
	}
	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodPost, "/v1/notes/outage/views", "", nil).Status)
	taken, source := seatsOf(t, inst, id)
	require.Equal(t, 10, taken)
	require.Equal(t, "cache", source)

	pg.Stop()

	// Everything that writes answers 503 within the deadline.
	admin := inst.Token(t, "admin", true)
	type call struct{ method, path, token string }
	var calls []call
	for i := range 20 {
		calls = append(calls, call{http.MethodPost, "/v1/activities/" + id + "/registrations", inst.Token(t, fmt.Sprint("during-", i), false)})
	}
	for i, reg := range regs[:5] {
		calls = append(calls, call{http.MethodPost, "/v1/registrations/" + reg + "/cancel", inst.Token(t, fmt.Sprint("before-", i), false)})
	}
	for range 5 {
		calls = append(calls, call{http.MethodPost, "/v1/notes/outage/views", ""}, call{http.MethodPost, "/v1/notes/outage/waters", ""})
	}
	calls = append(calls, call{http.MethodPost, "/v1/registrations/" + regs[5] + "/status", admin})
	var wg sync.WaitGroup
	results := make([]apptest.Response, len(calls))
	took := make([]time.Duration, len(calls))
	for i, c := range calls {
		wg.Go(func() {
			start := time.Now()
			body := any(`{}`)
			if c.token == admin {
				body = `{"status":"approved"}`
			}
			results[i] = inst.MustDo(t, c.method, c.path, c.token, body)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, r := range results {
		requireUnavailable(t, r)
		require.Less(t, took[i], deadline+2*time.Second, "%s %s hung", calls[i].method, calls[i].path)
	}
	r := inst.MustDo(t, http.MethodGet, "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	require.JSONEq(t, `{"postgres":"unavailable","redis":"ok"}`, string(r.Body))

	// The display counter was compensated: every hold released.
	held := inst.DisplayTaken(t, id)
	require.Equal(t, 10, held)

	pg.Start(t)

	// The same instance recovers without a restart.
	require.Eventually(t, func() bool {
		return inst.MustDo(t, http.MethodGet, "/readyz", "", nil).Status == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, "after", false), `{}`)
		return r.Status == http.StatusCreated
	}, 10*time.Second, 100*time.Millisecond)

	// Nothing was half-written: ten before, one after.
	var occupying, all, pending int
	query(t, pg.URL, `SELECT count(*) FILTER (WHERE status IN ('pending','awaiting_payment','approved')), count(*),
		count(*) FILTER (WHERE status = 'pending') FROM registration`, &occupying, &all, &pending)
	require.Equal(t, 11, occupying)
	require.Equal(t, 11, all)
	require.Equal(t, 11, pending, "no cancel or status change from the outage was applied")
	var views, waters int64
	query(t, pg.URL, `SELECT views, waters FROM note_stats WHERE note_id = 'outage'`, &views, &waters)
	require.Equal(t, [2]int64{1, 0}, [2]int64{views, waters})
	held = inst.DisplayTaken(t, id)
	require.Equal(t, 11, held, "display equals the authority")

	// Cancels and note writes work again too.
	r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+regs[0]+"/cancel", inst.Token(t, "before-0", false), `{}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodPost, "/v1/notes/outage/waters", "", nil).Status)
}
