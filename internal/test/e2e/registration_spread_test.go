package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestSignupsSpreadOverManyActivitiesAreExact: signups spread over 200
// activities of 5 seats, from two instances whose change transactions each
// serve many activities, while Redis is flushed again and again. Demand
// differs per activity (1 to 10 users): each ends with min(5, demand)
// seats taken, refuses exactly the rest, refuses nobody while a seat is
// free, and no transaction deadlocks or fails.
func TestSignupsSpreadOverManyActivitiesAreExact(t *testing.T) {
	t.Parallel()
	rds := testenv.PrivateRedis(t)
	a := apptest.Start(t, apptest.Options{RedisURL: rds.URL()})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, RedisURL: rds.URL()})
	const activities, seats = 200, 5
	ids := make([]string, activities)
	type job struct {
		activity int
		user     string
	}
	var jobs []job
	for i := range ids {
		ids[i] = a.CreateActivity(t, fmt.Sprint("spread ", i), seats)
		for u := range 1 + i%10 {
			jobs = append(jobs, job{i, fmt.Sprintf("s%d-%d", i, u)})
		}
	}
	rand.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })

	stop := make(chan struct{})
	var flusher sync.WaitGroup
	var flushes atomic.Int64
	flusher.Go(func() {
		c := testenv.RedisClient(t, rds.URL())
		for {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			if c.FlushAll(context.Background()).Err() == nil {
				flushes.Add(1)
			}
		}
	})

	created := make([]atomic.Int64, activities)
	refused := make([]atomic.Int64, activities)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	for k, j := range jobs {
		api := []*apptest.Instance{a, b}[k%2].API(t, j.user, false)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := api.Signup(t.Context(), ids[j.activity], client.SignupOptions{})
			var e *client.Error
			switch {
			case err == nil && !res.Waitlisted:
				created[j.activity].Add(1)
			case errors.As(err, &e) && e.Status == http.StatusConflict && e.Code == client.CodeActivityFull:
				refused[j.activity].Add(1)
			default:
				t.Errorf("unexpected %+v %v", res, err)
			}
		})
	}
	wg.Wait()
	close(stop)
	flusher.Wait()
	t.Logf("%d signups over %d activities, %d Redis flushes", len(jobs), activities, flushes.Load())

	for i, id := range ids {
		demand := 1 + i%10
		want := min(seats, demand)
		require.EqualValues(t, want, created[i].Load(), "%s: admitted", id)
		require.EqualValues(t, demand-want, refused[i].Load(), "%s: refused only beyond its seats", id)
		require.Equal(t, want, a.AuthorityTaken(t, id), "%s: authority", id)
	}
	metrics := string(a.MustDo(t, http.MethodGet, "/metrics", "", nil).Body) + string(b.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	require.NotContains(t, metrics, `capacityd_admission_transactions_total{result="error"}`, "no change transaction failed")
	acts, txs := metricValue(t, metrics, "capacityd_admission_batch_activities_sum"), metricValue(t, metrics, "capacityd_admission_batch_activities_count")
	require.Greater(t, acts, txs, "transactions served several activities at once")
	t.Logf("%.0f activity batches in %.0f change transactions", acts, txs)
}

// metricValue sums the samples of a metric (without labels) in the
// Prometheus text of one or more instances.
func metricValue(t *testing.T, text, name string) float64 {
	t.Helper()
	sum, found := 0.0, false
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			sum, found = sum+f, true
		}
	}
	require.True(t, found, "metric %s", name)
	return sum
}
