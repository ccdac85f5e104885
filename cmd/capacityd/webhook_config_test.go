package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWebhookSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, c.App.Webhooks.RetryBase)
	require.Equal(t, 10*time.Second, c.App.Webhooks.Timeout)
	require.Equal(t, 16, c.App.Webhooks.Concurrency)
	require.Equal(t, 5*time.Second, c.App.Webhooks.BacklogInterval)
	require.False(t, c.App.WebhookGuard.AllowPrivate, "private addresses are refused by default")
	require.Nil(t, c.App.WebhookSecretKey)

	env := map[string]string{"WEBHOOK_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "WEBHOOK_ALLOW_PRIVATE": "true"}
	for k, v := range base {
		env[k] = v
	}
	c, err = loadConfig("serve", serveSettings, []string{"--webhook-retry-base", "250ms", "--webhook-timeout", "2s", "--webhook-concurrency", "4",
		"--webhook-backlog-interval", "1m"},
		envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, []byte("0123456789abcdef0123456789abcdef"), c.App.WebhookSecretKey)
	require.True(t, c.App.WebhookGuard.AllowPrivate)
	require.Equal(t, 250*time.Millisecond, c.App.Webhooks.RetryBase)
	require.Equal(t, 2*time.Second, c.App.Webhooks.Timeout)
	require.Equal(t, 4, c.App.Webhooks.Concurrency)
	require.Equal(t, time.Minute, c.App.Webhooks.BacklogInterval)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--webhook-secret-key", "c2hvcnQ="}, "WEBHOOK_SECRET_KEY (--webhook-secret-key): want 32 bytes"},
		{[]string{"--webhook-secret-key", "not base64!"}, "WEBHOOK_SECRET_KEY (--webhook-secret-key)"},
		{[]string{"--webhook-allow-private", "yes please"}, "WEBHOOK_ALLOW_PRIVATE (--webhook-allow-private)"},
		{[]string{"--webhook-retry-base", "0s"}, "WEBHOOK_RETRY_BASE (--webhook-retry-base)"},
		{[]string{"--webhook-timeout", "soon"}, "WEBHOOK_TIMEOUT (--webhook-timeout)"},
		{[]string{"--webhook-concurrency", "0"}, "WEBHOOK_CONCURRENCY (--webhook-concurrency)"},
		{[]string{"--webhook-backlog-interval", "0s"}, "WEBHOOK_BACKLOG_INTERVAL (--webhook-backlog-interval)"},
		{[]string{"--webhook-pipelining", "sometimes"}, "WEBHOOK_PIPELINING (--webhook-pipelining): want true or false"},
	} {
		_, err := loadConfig("serve", serveSettings, tc.args, envOf(base), io.Discard, nil)
		require.ErrorContains(t, err, tc.want, tc.args)
	}
}
