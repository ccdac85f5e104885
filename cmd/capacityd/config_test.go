package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

const goodSecret = "0123456789abcdef0123456789abcdef"

func TestConfigDefaultsAndOverrides(t *testing.T) {
	t.Parallel()
	c, err := loadConfig("serve", serveSettings, []string{"--seat-cache-ttl", "5s", "--listen-addr", "127.0.0.1:9999"},
		envOf(map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret, "SEAT_CACHE_TTL": "30s", "SHUTDOWN_TIMEOUT": "3s"}), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, c.App.Seats.TTL, "a flag overrides the environment")
	require.Equal(t, 3*time.Second, c.ShutdownTimeout, "the environment overrides the default")
	require.Equal(t, "127.0.0.1:9999", c.ListenAddr)
	require.Empty(t, c.RedisURL)
	require.EqualValues(t, 16, c.DB.MaxConns)
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no database", map[string]string{"CAPACITY_JWT_SECRET": goodSecret}, nil, "DATABASE_URL (--database-url): is required"},
		{"no secret", map[string]string{"DATABASE_URL": "postgres://x"}, nil, "CAPACITY_JWT_SECRET (--capacity-jwt-secret): is required"},
		{"short secret", map[string]string{"DATABASE_URL": "postgres://x", "CAPACITY_JWT_SECRET": "short"}, nil, "CAPACITY_JWT_SECRET (--capacity-jwt-secret): must be at least 32 bytes"},
		{"bad ttl", base, []string{"--seat-cache-ttl", "soon"}, `SEAT_CACHE_TTL (--seat-cache-ttl): want a positive duration such as 60s, got "soon"`},
		{"zero ttl", base, []string{"--seat-cache-ttl", "0s"}, "SEAT_CACHE_TTL (--seat-cache-ttl)"},
		{"bad shutdown", map[string]string{"DATABASE_URL": "postgres://x", "CAPACITY_JWT_SECRET": goodSecret, "SHUTDOWN_TIMEOUT": "-1s"}, nil, "SHUTDOWN_TIMEOUT (--shutdown-timeout)"},
		{"bad listen", base, []string{"--listen-addr", "8080"}, "LISTEN_ADDR (--listen-addr)"},
		{"bad redis", base, []string{"--redis-url", "http://nope"}, "REDIS_URL (--redis-url)"},
		{"bad cluster", base, []string{"--redis-cluster-addrs", "a:1,b"}, "REDIS_CLUSTER_ADDRS (--redis-cluster-addrs)"},
		{"cluster of no address", base, []string{"--redis-cluster-addrs", " , ,"}, "REDIS_CLUSTER_ADDRS (--redis-cluster-addrs)"},
		{"bad pool", base, []string{"--db-max-conns", "1"}, "DB_MAX_CONNS (--db-max-conns)"},
		{"unknown flag", base, []string{"--nope"}, "flag provided but not defined: -nope"},
		{"stray argument", base, []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig("serve", serveSettings, tc.args, envOf(tc.env), io.Discard, nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDevModeNeedsNoSecret(t *testing.T) {
	t.Parallel()
	c, err := loadConfig("serve", serveSettings, []string{"--dev"}, envOf(map[string]string{"DATABASE_URL": "postgres://x"}), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, devSecret, string(c.Tokens.Secret))
}
