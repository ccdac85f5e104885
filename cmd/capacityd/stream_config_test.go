package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStreamAndWidgetSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 10000, c.StreamMaxClients)
	require.Equal(t, 15*time.Second, c.StreamPingInterval)
	require.Empty(t, c.CORSAllowedOrigins)
	require.False(t, c.DemoSignups, "demo signups are off by default")

	c, err = loadConfig("serve", serveSettings, []string{
		"--stream-max-clients", "50", "--stream-ping-interval", "5s",
		"--cors-allowed-origins", " https://a.example, http://b.example:8080 ,", "--demo-signups", "on",
	}, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 50, c.StreamMaxClients)
	require.Equal(t, 5*time.Second, c.StreamPingInterval)
	require.Equal(t, []string{"https://a.example", "http://b.example:8080"}, c.CORSAllowedOrigins)
	require.True(t, c.DemoSignups)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--stream-max-clients", "0"}, "STREAM_MAX_CLIENTS (--stream-max-clients)"},
		{[]string{"--stream-ping-interval", "soon"}, "STREAM_PING_INTERVAL (--stream-ping-interval)"},
		{[]string{"--cors-allowed-origins", "a.example"}, "CORS_ALLOWED_ORIGINS (--cors-allowed-origins)"},
		{[]string{"--cors-allowed-origins", "https://a.example/path"}, "CORS_ALLOWED_ORIGINS (--cors-allowed-origins)"},
		{[]string{"--demo-signups", "yes"}, `DEMO_SIGNUPS (--demo-signups): want on or off, got "yes"`},
	} {
		_, err := loadConfig("serve", serveSettings, tc.args, envOf(base), io.Discard, nil)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want)
	}
}
