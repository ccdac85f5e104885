package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
)

func TestStreamAndWidgetSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 10000, c.App.Streams.MaxStreams)
	require.Equal(t, 15*time.Second, c.App.HTTP.PingInterval)
	require.Equal(t, httpapi.DefaultStreamsPerAddress, c.App.HTTP.StreamsPerAddress)
	require.Equal(t, 32, c.App.HTTP.StreamsPerAddress)
	require.Equal(t, httpapi.DefaultEventWaitsPerUser, c.App.HTTP.EventWaitsPerUser)
	require.Equal(t, 8, c.App.HTTP.EventWaitsPerUser)
	require.Empty(t, c.App.HTTP.CORSAllowedOrigins)
	require.False(t, c.App.HTTP.DemoSignups, "demo signups are off by default")

	c, err = loadConfig("serve", serveSettings, []string{
		"--stream-max-clients", "50", "--stream-ping-interval", "5s",
		"--stream-max-per-address", "0", "--event-feed-max-waits-per-user", "3",
		"--cors-allowed-origins", " https://a.example, http://b.example:8080 ,", "--demo-signups", "on",
	}, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 50, c.App.Streams.MaxStreams)
	require.Equal(t, 5*time.Second, c.App.HTTP.PingInterval)
	require.Equal(t, -1, c.App.HTTP.StreamsPerAddress, "0 turns the cap off (httpapi: a negative cap)")
	require.Equal(t, 3, c.App.HTTP.EventWaitsPerUser)
	require.Equal(t, []string{"https://a.example", "http://b.example:8080"}, c.App.HTTP.CORSAllowedOrigins)
	require.True(t, c.App.HTTP.DemoSignups)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--stream-max-clients", "0"}, "STREAM_MAX_CLIENTS (--stream-max-clients)"},
		{[]string{"--stream-max-per-address", "-1"}, "STREAM_MAX_PER_ADDRESS (--stream-max-per-address)"},
		{[]string{"--event-feed-max-waits-per-user", "x"}, "EVENT_FEED_MAX_WAITS_PER_USER (--event-feed-max-waits-per-user)"},
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
