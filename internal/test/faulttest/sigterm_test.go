package faulttest

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// loadCounts tallies the answers of a load run.
type loadCounts struct {
	mu        sync.Mutex
	status    map[int]int
	refused   int // connection refused: never accepted
	ambiguous int // any other transport error: maybe accepted, never answered
	lastErr   error
}

func (c *loadCounts) add(status int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.status[status]++
	case errors.Is(err, syscall.ECONNREFUSED):
		c.refused++
	default:
		c.ambiguous++
		c.lastErr = err
	}
}

// TestSIGTERMUnderLoadLosesNothing runs the real binary under signups and
// note views, sends SIGTERM, and checks that it stops accepting, finishes
// what it accepted and exits 0, and that every acknowledged signup and
// view is in the database.
func TestSIGTERMUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	p := apptest.StartProcess(t, db, testenv.RedisURL(), "RATE_LIMIT_SIGNUPS=0", "RATE_LIMIT_PUBLIC_WRITES=0", "NOTE_WATER_WINDOW=0s", "SHUTDOWN_TIMEOUT=15s")
	admin := p.Token(t, "admin", true)
	r, err := apptest.Do(http.MethodPost, p.URL+"/v1/activities", admin, map[string]any{"title": "sigterm", "capacity": 1_000_000})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var act struct{ ID string }
	r.JSON(t, &act)

	signups := &loadCounts{status: map[int]int{}}
	views := &loadCounts{status: map[int]int{}}
	var stop atomic.Bool
	var sent atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	do := func(path, token string) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, p.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for w := range 16 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				sent.Add(1)
				status, err := do("/v1/activities/"+act.ID+"/registrations", p.Token(t, fmt.Sprintf("w%d-%d", w, i), false))
				signups.add(status, err)
				if errors.Is(err, syscall.ECONNREFUSED) {
					return
				}
			}
		})
	}
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				status, err := do("/v1/notes/sigterm/views", "")
				views.add(status, err)
				if errors.Is(err, syscall.ECONNREFUSED) {
					return
				}
			}
		})
	}
	require.Eventually(t, func() bool { return sent.Load() > 300 }, 30*time.Second, 10*time.Millisecond)
	p.Signal(t, syscall.SIGTERM)
	code := p.Wait(30 * time.Second)
	stop.Store(true)
	wg.Wait()
	require.Equal(t, 0, code, p.Output())
	require.Contains(t, p.Output(), "stopped")
	require.NotContains(t, p.Output(), apptest.Secret, "the secret is never logged")
	require.NotContains(t, p.Output(), admin, "tokens are never logged")

	var rows int
	var dbViews int64
	query(t, db, `SELECT count(*) FROM registration`, &rows)
	query(t, db, `SELECT coalesce((SELECT views FROM note_stats WHERE note_id = 'sigterm'), 0)`, &dbViews)
	t.Logf("signups: %v refused %d ambiguous %d; rows %d", signups.status, signups.refused, signups.ambiguous, rows)
	t.Logf("views: %v refused %d ambiguous %d; views %d", views.status, views.refused, views.ambiguous, dbViews)
	t.Logf("last ambiguous errors: %v; %v", signups.lastErr, views.lastErr)

	for status := range signups.status {
		require.Contains(t, []int{http.StatusCreated, http.StatusServiceUnavailable}, status, "%v", signups.status)
	}
	for status := range views.status {
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, status, "%v", views.status)
	}
	require.Positive(t, signups.status[http.StatusCreated])
	// No acknowledged signup or view lost; anything beyond them is a
	// request the client lost in the connection race, never an
	// unacknowledged write the server dropped half-way.
	require.GreaterOrEqual(t, rows, signups.status[http.StatusCreated])
	require.LessOrEqual(t, rows, signups.status[http.StatusCreated]+signups.ambiguous)
	require.GreaterOrEqual(t, dbViews, int64(views.status[http.StatusOK]))
	require.LessOrEqual(t, dbViews, int64(views.status[http.StatusOK]+views.ambiguous))
}
