package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOperationsSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, slog.LevelInfo, c.LogLevel)
	require.Equal(t, "json", c.LogFormat)
	require.Empty(t, c.TrustedProxies, "no proxy is trusted by default")
	require.True(t, c.MigrateOnStart)

	env["LOG_LEVEL"], env["LOG_FORMAT"], env["TRUSTED_PROXIES"], env["MIGRATE_ON_START"] = "debug", "text", "10.0.0.0/8,192.0.2.7", "false"
	c, err = loadConfig("serve", serveSettings, []string{"--log-level", "warn"}, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, slog.LevelWarn, c.LogLevel, "the flag overrides the environment")
	require.Equal(t, "text", c.LogFormat)
	require.Len(t, c.TrustedProxies, 2)
	require.Equal(t, "192.0.2.7/32", c.TrustedProxies[1].String())
	require.False(t, c.MigrateOnStart)

	for flag, want := range map[string]string{
		"--log-level=loud":                  `LOG_LEVEL (--log-level): want debug, info, warn or error, got "loud"`,
		"--log-format=xml":                  `LOG_FORMAT (--log-format): want json or text, got "xml"`,
		"--trusted-proxies=10.0.0.0/8,nope": `TRUSTED_PROXIES (--trusted-proxies): want CIDRs such as 10.0.0.0/8, got "nope"`,
		"--migrate-on-start=sometimes":      `MIGRATE_ON_START (--migrate-on-start): want true or false, got "sometimes"`,
	} {
		_, err := loadConfig("serve", serveSettings, []string{flag}, envOf(env), io.Discard, nil)
		require.ErrorContains(t, err, want, flag)
	}
}
