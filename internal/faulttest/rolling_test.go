package faulttest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/internal/testenv"
)

// rollingLoad is the traffic of a rolling restart and what came of it.
type rollingLoad struct {
	base, activity string
	token          func(user string) string
	client         *http.Client

	stop sync.WaitGroup
	done atomic.Bool

	signups, signupRetries, signupsGivenUp atomic.Int64
	views, viewFailures                    atomic.Int64
	reads, readFailures                    atomic.Int64
	mu                                     sync.Mutex
	failures                               []string
}

func (l *rollingLoad) fail(what string, status int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) < 10 {
		l.failures = append(l.failures, fmt.Sprintf("%s: %d %v", what, status, err))
	}
}

// post sends one request through the proxy and returns its status (0 on
// a transport error).
func (l *rollingLoad) send(method, path, token string, headers ...string) (int, error) {
	req, err := http.NewRequest(method, l.base+path, strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// signup signs a new user up with an Idempotency-Key and, like a careful
// client, sends the same request again after any failure.
func (l *rollingLoad) signup(user string) {
	tok := l.token(user)
	for attempt := range 30 {
		status, err := l.send(http.MethodPost, "/v1/activities/"+l.activity+"/registrations", tok, "Idempotency-Key", "k-"+user)
		if status == http.StatusCreated {
			l.signups.Add(1)
			return
		}
		l.fail("signup "+user, status, err)
		if attempt == 0 {
			l.signupRetries.Add(1)
		}
		// The client's backoff before it sends the request again, not a
		// wait for anything.
		time.Sleep(50 * time.Millisecond)
	}
	l.signupsGivenUp.Add(1)
}

// run starts the workers: signups, note views (increments, which a client
// cannot retry safely) and seat reads.
func (l *rollingLoad) run() {
	for w := range 6 {
		l.stop.Go(func() {
			for i := 0; !l.done.Load(); i++ {
				l.signup(fmt.Sprintf("w%d-%d", w, i))
			}
		})
	}
	for range 4 {
		l.stop.Go(func() {
			for !l.done.Load() {
				status, err := l.send(http.MethodPost, "/v1/notes/rolling/views", "")
				if status == http.StatusOK {
					l.views.Add(1)
				} else {
					l.viewFailures.Add(1)
					l.fail("view", status, err)
				}
			}
		})
	}
	for range 2 {
		l.stop.Go(func() {
			for !l.done.Load() {
				status, err := l.send(http.MethodGet, "/v1/activities/"+l.activity+"/seats", "")
				l.reads.Add(1)
				if status != http.StatusOK {
					l.readFailures.Add(1)
					l.fail("seats", status, err)
				}
			}
		})
	}
}

// TestRollingRestartBehindHAProxyLosesNothing runs three instances (the
// real binary) behind HAProxy under signups, note views and seat reads,
// and restarts them one at a time with SIGTERM: no view or read fails
// (what an instance refuses while it stops, the proxy sends to another),
// a signup fails only to be sent again by the client with the same
// Idempotency-Key, and every acknowledged signup and view is in the
// database, once.
func TestRollingRestartBehindHAProxyLosesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	env := []string{"RATE_LIMIT_SIGNUPS=0", "RATE_LIMIT_PUBLIC_WRITES=0", "NOTE_WATER_WINDOW=0s", "SHUTDOWN_TIMEOUT=10s",
		"MIGRATE_ON_START=false", "TRUSTED_PROXIES=127.0.0.1/32"}
	var addrs []string
	var procs []*apptest.Process
	for range 3 {
		addr := "127.0.0.1:" + fmt.Sprint(testenv.FreePort(t))
		addrs = append(addrs, addr)
		procs = append(procs, apptest.StartProcessAt(t, addr, db, testenv.RedisURL(), env...))
	}
	proxy := testenv.StartHAProxy(t, addrs...)
	proxy.WaitServersUp(t, 3)
	signer := procs[0] // signs tokens whatever becomes of its process
	r, err := apptest.Do(http.MethodPost, proxy.URL+"/v1/activities", signer.Token(t, "admin", true),
		map[string]any{"title": "rolling", "capacity": 1_000_000})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var act struct{ ID string }
	r.JSON(t, &act)

	load := &rollingLoad{
		base: proxy.URL, activity: act.ID,
		token:  func(user string) string { return signer.Token(t, user, false) },
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	load.run()
	require.Eventually(t, func() bool { return load.signups.Load() > 0 && load.views.Load() > 0 && load.reads.Load() > 0 },
		30*time.Second, 10*time.Millisecond, "the load is under way")
	for i, addr := range addrs {
		before := load.signups.Load() + load.views.Load()
		procs[i].Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, procs[i].Wait(30*time.Second), procs[i].Output())
		procs[i] = apptest.StartProcessAt(t, addr, db, testenv.RedisURL(), env...)
		proxy.WaitServersUp(t, 3)
		require.Greater(t, load.signups.Load()+load.views.Load(), before, "the load went on during restart %d", i)
	}
	load.done.Store(true)
	load.stop.Wait()

	var rows int
	var dbViews int64
	query(t, db, `SELECT count(*) FROM registration`, &rows)
	query(t, db, `SELECT coalesce((SELECT views FROM note_stats WHERE note_id = 'rolling'), 0)`, &dbViews)
	retries, redispatches := proxy.Retries(t)
	t.Logf("signups %d (sent again by the client: %d), views %d, seat reads %d; proxy retries %d, redispatches %d; failures seen: %v",
		load.signups.Load(), load.signupRetries.Load(), load.views.Load(), load.reads.Load(), retries, redispatches, load.failures)
	require.Positive(t, load.signups.Load())
	require.Zero(t, load.signupsGivenUp.Load(), "every signup succeeded, if need be sent again")
	require.Zero(t, load.viewFailures.Load(), "no view failed: %v", load.failures)
	require.Zero(t, load.readFailures.Load(), "no seat read failed: %v", load.failures)
	require.EqualValues(t, load.signups.Load(), rows, "each acknowledged signup is one registration")
	require.Equal(t, load.views.Load(), dbViews, "each acknowledged view counted once, none lost")
}
