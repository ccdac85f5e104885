package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
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
	// failed counts every failure; unexpected those other than a
	// transport error (status 0) or a 503.
	failed     atomic.Int64
	unexpected atomic.Int64
	mu         sync.Mutex
	failures   []string
}

func (l *rollingLoad) fail(what string, status int, err error) {
	l.failed.Add(1)
	if status != 0 && status != http.StatusServiceUnavailable {
		l.unexpected.Add(1)
	}
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
		// Kept: the client's backoff before it sends the request again,
		// not a wait for anything. It proves nothing itself; it spaces the
		// retries as a real client does, so that a signup sent again with
		// the same Idempotency-Key is tested over the whole outage.
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

// rollingCluster is three instances (the real binary) behind the HAProxy
// of deploy/haproxy/haproxy.cfg, under load.
type rollingCluster struct {
	db, redis string
	env       []string
	addrs     []string
	procs     []*apptest.Process
	proxy     *testenv.HAProxy
	load      *rollingLoad
}

func startRollingCluster(t *testing.T) *rollingCluster {
	t.Helper()
	return startRollingClusterOn(t, testenv.NewDatabase(t))
}

// startRollingClusterOn starts a rolling cluster whose instances use the
// (migrated) database at db.
func startRollingClusterOn(t *testing.T, db string) *rollingCluster {
	t.Helper()
	c := &rollingCluster{db: db, redis: testenv.RedisURL(),
		env: []string{"RATE_LIMIT_SIGNUPS=0", "RATE_LIMIT_PUBLIC_WRITES=0", "NOTE_WATER_WINDOW=0s", "SHUTDOWN_TIMEOUT=10s",
			"SHUTDOWN_DRAIN=1s", "MIGRATE_ON_START=false", "TRUSTED_PROXIES=127.0.0.1/32"}}
	for range 3 {
		addr := "127.0.0.1:" + fmt.Sprint(testenv.FreePort(t))
		c.addrs = append(c.addrs, addr)
		c.procs = append(c.procs, apptest.StartProcessAt(t, addr, c.db, c.redis, c.env...))
	}
	c.proxy = testenv.StartHAProxy(t, c.addrs...)
	c.proxy.WaitServersUp(t, 3)
	signer := c.procs[0] // signs tokens whatever becomes of its process
	r, err := apptest.Do(http.MethodPost, c.proxy.URL+"/v1/activities", signer.Token(t, "admin", true),
		map[string]any{"title": "rolling", "capacity": 1_000_000})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var act struct{ ID string }
	r.JSON(t, &act)

	c.load = &rollingLoad{
		base: c.proxy.URL, activity: act.ID,
		token:  func(user string) string { return signer.Token(t, user, false) },
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	c.load.run()
	require.Eventually(t, func() bool { return c.load.signups.Load() > 0 && c.load.views.Load() > 0 && c.load.reads.Load() > 0 },
		30*time.Second, 10*time.Millisecond, "the load is under way")
	return c
}

// acknowledged is the number of signups and views acknowledged so far.
func (c *rollingCluster) acknowledged() int64 { return c.load.signups.Load() + c.load.views.Load() }

// restart stops instance i with SIGTERM, which must end it cleanly, and
// starts it again on its address.
func (c *rollingCluster) restart(t *testing.T, i int) {
	t.Helper()
	c.procs[i].Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, c.procs[i].Wait(30*time.Second), c.procs[i].Output())
	c.procs[i] = apptest.StartProcessAt(t, c.addrs[i], c.db, c.redis, c.env...)
}

// stop stops the load and returns the registrations and the views of the
// database at url.
func (c *rollingCluster) stop(t *testing.T, url string) (rows int, dbViews int64) {
	t.Helper()
	c.load.done.Store(true)
	c.load.stop.Wait()
	query(t, url, `SELECT count(*) FROM registration`, &rows)
	query(t, url, `SELECT coalesce((SELECT views FROM note_stats WHERE note_id = 'rolling'), 0)`, &dbViews)
	return rows, dbViews
}

// finish stops the load and checks that nothing failed for good and that
// every acknowledged signup and view is in the database, once.
func (c *rollingCluster) finish(t *testing.T) {
	t.Helper()
	load := c.load
	rows, dbViews := c.stop(t, c.db)
	retries, redispatches := c.proxy.Retries(t)
	t.Logf("signups %d (sent again by the client: %d), views %d, seat reads %d; proxy retries %d, redispatches %d; failures seen: %v",
		load.signups.Load(), load.signupRetries.Load(), load.views.Load(), load.reads.Load(), retries, redispatches, load.failures)
	require.Positive(t, load.signups.Load())
	require.Zero(t, load.signupsGivenUp.Load(), "every signup succeeded, if need be sent again")
	require.Zero(t, load.viewFailures.Load(), "no view failed: %v", load.failures)
	require.Zero(t, load.readFailures.Load(), "no seat read failed: %v", load.failures)
	require.EqualValues(t, load.signups.Load(), rows, "each acknowledged signup is one registration")
	require.Equal(t, load.views.Load(), dbViews, "each acknowledged view counted once, none lost")
}

// restartRequest is the rolling-restart script asking the test, through
// its restart command, to restart the instance the proxy calls server at
// addr; the test answers on done.
type restartRequest struct {
	server, addr string
	done         chan error
}

// restartHook is an HTTP endpoint for the script's restart command: each
// POST is handed to the test's goroutine, which restarts the instance,
// and answered when it is done.
func restartHook(t *testing.T) (url string, requests <-chan restartRequest) {
	t.Helper()
	ch := make(chan restartRequest)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := restartRequest{server: r.FormValue("server"), addr: r.FormValue("addr"), done: make(chan error, 1)}
		select {
		case ch <- req:
		case <-r.Context().Done():
			return
		}
		select {
		case err := <-req.done:
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hook.Close)
	return hook.URL, ch
}

// TestRollingRestartBehindHAProxyLosesNothing runs three instances (the
// real binary) behind HAProxy under signups, note views and seat reads,
// and restarts them one at a time:
//   - with scripts/rolling-restart.sh, as docs/deploy.md says: each
//     instance is drained through the proxy's runtime API, restarted once
//     it has no session left (SIGTERM, then started again) and made ready
//     again once /readyz answers; no request fails at all, not even once;
//   - with SIGTERM alone, no drain by the script (the instances drain
//     themselves for SHUTDOWN_DRAIN, as docs/deploy.md has them): no view
//     or read fails (what an instance refuses while it stops, the proxy
//     sends to another), a signup fails only to be sent again by the
//     client with the same Idempotency-Key.
//
// Either way every acknowledged signup and view is in the database, once.
func TestRollingRestartBehindHAProxyLosesNothing(t *testing.T) {
	t.Parallel()
	t.Run("drained by the script", func(t *testing.T) {
		for _, tool := range []string{"socat", "curl"} {
			_, err := exec.LookPath(tool)
			testenv.Require(t, err == nil, tool+" (Debian package "+tool+"), which scripts/rolling-restart.sh uses")
		}
		c := startRollingCluster(t)
		hookURL, requests := restartHook(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		t.Cleanup(cancel) // before the hook closes: the script's request ends first
		script := exec.CommandContext(ctx, "bash", filepath.Join(testenv.ModuleRoot(t), "scripts", "rolling-restart.sh"),
			"-s", c.proxy.AdminSocket, "-b", c.proxy.Backend, "-d", "30", "-r", "60", "--",
			"sh", "-c", `curl -fsS -X POST --data-urlencode "server=$CAPACITYD_SERVER" --data-urlencode "addr=$CAPACITYD_ADDR" "$HOOK"`)
		script.Env = append(os.Environ(), "HOOK="+hookURL)
		var out bytes.Buffer
		script.Stdout, script.Stderr = &out, &out
		require.NoError(t, script.Start())
		exited := make(chan error, 1)
		go func() { exited <- script.Wait() }()

		var restarted []string
		for waiting := true; waiting; {
			select {
			case req := <-requests:
				i := slices.Index(c.proxy.Servers, req.server)
				require.NotEqual(t, -1, i, "a server of the proxy: %q", req.server)
				require.Equal(t, c.addrs[i], req.addr)
				require.Equal(t, 0, c.proxy.Sessions(t, req.server), "drained before its restart")
				before := c.acknowledged()
				c.restart(t, i)
				require.Greater(t, c.acknowledged(), before, "the load went on during the restart of %s", req.server)
				restarted = append(restarted, req.server)
				req.done <- nil
			case err := <-exited:
				require.NoError(t, err, "%s", out.String())
				waiting = false
			}
		}
		t.Logf("rolling-restart.sh:\n%s", out.String())
		require.Equal(t, []string{"a", "b", "c"}, restarted, "each instance once, in turn")
		require.Equal(t, 3, c.proxy.ServersUp(t), "all back in service")
		c.finish(t)
		require.Zero(t, c.load.signupRetries.Load(), "no signup failed even once: %v", c.load.failures)
	})
	t.Run("SIGTERM alone", func(t *testing.T) {
		c := startRollingCluster(t)
		for i := range c.procs {
			before := c.acknowledged()
			c.restart(t, i)
			c.proxy.WaitServersUp(t, 3)
			require.Greater(t, c.acknowledged(), before, "the load went on during restart %d", i)
		}
		c.finish(t)
	})
}
