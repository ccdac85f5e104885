package main

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/internal/testenv"
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
