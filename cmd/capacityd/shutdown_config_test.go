package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestShutdownDrainSetting(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Zero(t, c.ShutdownDrain, "no drain unless asked for")

	c, err = loadConfig("serve", serveSettings, []string{"--shutdown-drain", "5m"}, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, c.ShutdownDrain)

	for _, v := range []string{"-1s", "5m1s", "later"} {
		_, err := loadConfig("serve", serveSettings, []string{"--shutdown-drain", v}, envOf(base), io.Discard, nil)
		require.EqualError(t, err, `SHUTDOWN_DRAIN (--shutdown-drain): want a duration from 0s (none) to 5m such as 1s, got "`+v+`"`)
	}
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{time.Second: "1s", 50 * time.Millisecond: "50ms", 5 * time.Minute: "5m",
		24 * time.Hour: "24h", 90 * time.Second: "1m30s", time.Hour + time.Second: "1h0m1s"} {
		require.Equal(t, want, shortDuration(d))
	}
}
