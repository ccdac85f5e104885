package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// answers checks every answer a client gets through the proxy: JSON, a
// success or the API's error shape, never a page of the proxy.
type answers struct {
	mu       sync.Mutex
	byStatus map[int]int
	bad      []string
}

// check reads one answer and returns its status and error code ("" for a
// success), or records what is wrong with it and returns status 0.
func (a *answers) check(resp *http.Response, err error) (int, string) {
	if err != nil {
		return a.wrong("no answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return a.wrong("%d, body cut: %v", resp.StatusCode, err)
	}
	a.mu.Lock()
	a.byStatus[resp.StatusCode]++
	a.mu.Unlock()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		return a.wrong("%d %s: %.200s", resp.StatusCode, ct, body)
	}
	if resp.StatusCode < 300 {
		var reg struct{ ID, Status string }
		if err := json.Unmarshal(body, &reg); err != nil || reg.ID == "" || reg.Status == "" {
			return a.wrong("%d, not a registration: %.200s", resp.StatusCode, body)
		}
		return resp.StatusCode, ""
	}
	var e struct {
		Error struct {
			Code, Message  string
			RegistrationID string `json:"registration_id"`
			Remaining      *int   `json:"remaining"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		return a.wrong("%d, not the API's error shape: %.200s", resp.StatusCode, body)
	}
	if resp.StatusCode >= 500 && resp.Header.Get("Retry-After") == "" {
		return a.wrong("%d without Retry-After: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, e.Error.Code
}

func (a *answers) wrong(format string, args ...any) (int, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bad = append(a.bad, fmt.Sprintf(format, args...))
	return 0, ""
}

// TestDeployAsDocumentedAnswersJSONWhenAnInstanceIsKilled follows
// docs/deploy.md step by step: migrations straight to PostgreSQL, the
// PgBouncer and the HAProxy of deploy/ (only ports, folders and hosts
// their own), two instances (the real binary) whose DATABASE_URL is the
// pooler's, behind the proxy. Under a burst of signups over the capacity,
// sent as a careful client sends them (an Idempotency-Key, the same
// request again after a 5xx), one instance is SIGKILLed: every answer the
// clients get is JSON, a registration or the API's error shape (the
// proxy's 502, 503 and 504 included, with Retry-After), none is a page of
// the proxy, every client gets its outcome, and the authority took
// exactly the seats of the admitted answers, all of the capacity. The
// doc's other promises are checked on the way: /metrics and /demo refused
// at the proxy, SHOW POOLS for the stats user, the proxy's log.
func TestDeployAsDocumentedAnswersJSONWhenAnInstanceIsKilled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Migrations go straight to PostgreSQL, as their own step.
	direct := testenv.EmptyDatabase(t)
	migrate := exec.CommandContext(ctx, apptest.Binary(t), "migrate")
	migrate.Env = append(os.Environ(), "DATABASE_URL="+direct)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "%s", out)

	// PgBouncer as deploy/pgbouncer/pgbouncer.ini is, pool and all; the
	// instances through it, behind HAProxy as deploy/haproxy/haproxy.cfg is.
	bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 0)
	env := []string{"MIGRATE_ON_START=false", "TRUSTED_PROXIES=127.0.0.1/32", "RATE_LIMIT_SIGNUPS=0", "RATE_LIMIT_PUBLIC_WRITES=0"}
	a := apptest.StartProcess(t, bouncer.URL(direct), testenv.RedisURL(), env...)
	b := apptest.StartProcess(t, bouncer.URL(direct), testenv.RedisURL(), env...)
	proxy := testenv.StartHAProxy(t, strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://"))
	proxy.WaitServersUp(t, 2)

	// Not for the public: the instances serve /metrics on their address
	// (METRICS_ADDR=api) and /demo; the proxy refuses both.
	r, err := apptest.Do(http.MethodGet, a.URL+"/metrics", "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status)
	seen := &answers{byStatus: map[int]int{}}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, path := range []string{"/metrics", "/demo"} {
		status, code := seen.check(client.Get(proxy.URL + path))
		require.Equal(t, http.StatusNotFound, status, "%s: %v", path, seen.bad)
		require.Equal(t, "not_found", code)
	}

	// The pooler's diagnosis of docs/deploy.md works for the stats user.
	console, err := pgx.Connect(ctx, bouncer.StatsURL())
	require.NoError(t, err)
	rows, err := console.Query(ctx, "SHOW POOLS")
	require.NoError(t, err)
	pools := 0
	for rows.Next() {
		pools++
	}
	require.NoError(t, rows.Err())
	require.Positive(t, pools)
	require.NoError(t, console.Close(ctx))

	const capacity, workers, perWorker = 200, 8, 50
	r, err = apptest.Do(http.MethodPost, proxy.URL+"/v1/activities", a.Token(t, "admin", true),
		map[string]any{"title": "deployed", "capacity": capacity})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var act struct{ ID string }
	r.JSON(t, &act)

	var admitted, full, unresolved, resent atomic.Int64
	signup := func(user string) {
		tok := a.Token(t, user, false)
		for range 100 {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy.URL+"/v1/activities/"+act.ID+"/registrations", strings.NewReader(`{}`))
			if err != nil {
				seen.wrong("%v", err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "k-"+user)
			switch status, code := seen.check(client.Do(req)); {
			case status == http.StatusCreated:
				admitted.Add(1)
				return
			case status == http.StatusConflict && code == "activity_full":
				full.Add(1)
				return
			case status >= 500 && code == "unavailable":
				resent.Add(1)
				// Kept: the client's backoff before it sends the same
				// request again, not a wait for anything. It spaces the
				// retries as a real client does, so that the same
				// Idempotency-Key is sent again across the whole failover.
				time.Sleep(50 * time.Millisecond)
			default:
				seen.wrong("signup %s: %d %s", user, status, code)
				return
			}
		}
		unresolved.Add(1)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				signup(fmt.Sprintf("w%d-%d", w, i))
			}
		})
	}
	require.Eventually(t, func() bool { return admitted.Load() >= capacity/4 }, time.Minute, time.Millisecond,
		"the burst is under way")
	b.Signal(t, syscall.SIGKILL)
	wg.Wait()

	pool := testenv.Pool(t, direct, 1)
	st, err := store.New(pool).SeatState(ctx, act.ID)
	require.NoError(t, err)
	retries, redispatches := proxy.Retries(t)
	t.Logf("answers by status %v; admitted %d, full %d, sent again after a 5xx %d; proxy retries %d, redispatches %d",
		seen.byStatus, admitted.Load(), full.Load(), resent.Load(), retries, redispatches)
	require.Empty(t, seen.bad, "every answer is JSON: a registration or the API's error shape")
	require.Positive(t, retries+redispatches, "the proxy sent what the killed instance dropped or refused to the other")
	require.Zero(t, unresolved.Load(), "every client got its outcome")
	require.EqualValues(t, workers*perWorker, admitted.Load()+full.Load())
	require.EqualValues(t, st.Taken, admitted.Load(), "the authority took exactly the admitted seats")
	require.Equal(t, capacity, st.Taken, "and all of them: a crash never refuses a free seat")
	require.Contains(t, proxy.Log(t), "capacityd/b is DOWN", "the proxy logs the instance's loss")

	// With no instance left, the proxy itself answers, in the API's shape.
	a.Signal(t, syscall.SIGKILL)
	proxy.WaitServersUp(t, 0)
	status, code := seen.check(client.Get(proxy.URL + "/v1/activities/" + act.ID + "/seats"))
	require.Equal(t, http.StatusServiceUnavailable, status, "%v", seen.bad)
	require.Equal(t, "unavailable", code)
}
