package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
)

func TestRateLimitSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db", "CAPACITY_JWT_SECRET": "0123456789abcdef0123456789abcdef"}
	getenv := func(k string) string { return env[k] }
	cfg, err := loadConfig("serve", serveSettings, nil, getenv, io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, httpapi.RateLimit{PerSecond: 50, Burst: 100}, cfg.App.HTTP.PublicWriteLimit, "on by default")
	require.Equal(t, httpapi.RateLimit{PerSecond: 2, Burst: 10}, cfg.App.HTTP.SignupLimit, "on by default")
	require.Equal(t, httpapi.RateLimit{PerSecond: 100, Burst: 200}, cfg.App.HTTP.PublicReadLimit, "on by default")

	cfg, err = loadConfig("serve", serveSettings, []string{"--rate-limit-public-writes", "0", "--rate-limit-signups=0.5:3", "--rate-limit-public-reads=0"}, getenv, io.Discard, nil)
	require.NoError(t, err)
	require.True(t, cfg.App.HTTP.PublicWriteLimit.Off())
	require.True(t, cfg.App.HTTP.PublicReadLimit.Off())
	require.Equal(t, httpapi.RateLimit{PerSecond: 0.5, Burst: 3}, cfg.App.HTTP.SignupLimit)

	env["RATE_LIMIT_SIGNUPS"] = "lots"
	_, err = loadConfig("serve", serveSettings, nil, getenv, io.Discard, nil)
	require.ErrorContains(t, err, "RATE_LIMIT_SIGNUPS (--rate-limit-signups)")
}
