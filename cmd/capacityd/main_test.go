package main

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

func TestServeStopsCleanlyOnSIGTERM(t *testing.T) {
	t.Parallel()
	p := apptest.StartProcess(t, testenv.NewDatabase(t), testenv.RedisURL())
	r, err := apptest.Do(http.MethodGet, p.URL+"/readyz", "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	p.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.Wait(20*time.Second), p.Output())
	// Durations are logged as durations, not nanoseconds.
	require.Contains(t, p.Output(), `"msg":"shutting down","timeout":"15s"`)
	require.Regexp(t, `"msg":"stopped","took":"[0-9.]+(µs|ms|s)"`, p.Output())
}

// TestServeDrainsBeforeItStopsAccepting sends SIGTERM to an instance with
// SHUTDOWN_DRAIN: for that long it answers /readyz 503 with "draining"
// (a load balancer's signal to take it out of service) and still serves
// every request, signups included; then it stops as usual.
func TestServeDrainsBeforeItStopsAccepting(t *testing.T) {
	t.Parallel()
	p := apptest.StartProcess(t, testenv.NewDatabase(t), testenv.RedisURL(), "SHUTDOWN_DRAIN=10s") // long enough for a loaded machine's first requests
	admin := p.Token(t, "admin", true)
	r, err := apptest.Do(http.MethodPost, p.URL+"/v1/activities", admin, map[string]any{"title": "drain", "capacity": 5})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var act struct{ ID string }
	r.JSON(t, &act)

	sent := time.Now()
	p.Signal(t, syscall.SIGTERM)
	require.Eventually(t, func() bool {
		r, err := apptest.Do(http.MethodGet, p.URL+"/readyz", "", nil)
		return err == nil && r.Status == http.StatusServiceUnavailable
	}, 5*time.Second, 10*time.Millisecond, "/readyz answers 503 once SIGTERM came")
	r, err = apptest.Do(http.MethodGet, p.URL+"/readyz", "", nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"postgres": "ok", "redis": "ok", "draining": true}`, string(r.Body))
	r, err = apptest.Do(http.MethodPost, p.URL+"/v1/activities/"+act.ID+"/registrations", p.Token(t, "u1", false), map[string]any{})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "a signup while draining is served: %s", r.Body)
	require.Less(t, time.Since(sent), 10*time.Second, "the requests above came within the drain")

	require.Equal(t, 0, p.Wait(20*time.Second), p.Output())
	require.GreaterOrEqual(t, time.Since(sent), 10*time.Second, "it accepted until the drain was over")
	require.Contains(t, p.Output(), `"msg":"draining","for":"10s"`)
}

// TestServeWithoutAWebhookKeyCreatesWebhooks starts the binary with no
// WEBHOOK_SECRET_KEY: it warns that webhook secrets are stored in clear,
// and creates webhooks all the same.
func TestServeWithoutAWebhookKeyCreatesWebhooks(t *testing.T) {
	t.Parallel()
	p := apptest.StartProcess(t, testenv.NewDatabase(t), testenv.RedisURL(), "WEBHOOK_SECRET_KEY=", "WEBHOOK_ALLOW_PRIVATE=true")
	r, err := apptest.Do(http.MethodPost, p.URL+"/v1/webhooks", p.Token(t, "admin", true),
		map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Contains(t, p.Output(), "WEBHOOK_SECRET_KEY is not set")
}
