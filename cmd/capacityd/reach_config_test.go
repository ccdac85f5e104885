package main

import (
	"io"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEverySettingReachesItsConfiguration: each serve setting, set to a
// value other than its default, changes the field of the configuration it
// is documented to set (the package's own configuration type for the
// service's settings), and every setting of the table is covered here.
func TestEverySettingReachesItsConfiguration(t *testing.T) {
	t.Parallel()
	const otherSecret = "fedcba9876543210fedcba9876543210"
	reaches := map[string]struct {
		value string
		field func(c *config) any
	}{
		"DATABASE_URL":                       {"postgres://other@127.0.0.1/db", func(c *config) any { return c.DatabaseURL }},
		"REDIS_URL":                          {"redis://127.0.0.1:6380/2", func(c *config) any { return c.RedisURL }},
		"REDIS_CLUSTER_ADDRS":                {"127.0.0.1:7000,127.0.0.1:7001", func(c *config) any { return c.RedisClusterAddrs }},
		"LISTEN_ADDR":                        {"127.0.0.1:9000", func(c *config) any { return c.ListenAddr }},
		"CAPACITY_JWT_SECRET":                {otherSecret, func(c *config) any { return c.Tokens.Secret }},
		"CAPACITY_JWT_PREVIOUS_SECRET":       {"previous-secret-previous-secret-previous", func(c *config) any { return c.Tokens.PreviousSecret }},
		"CAPACITY_JWT_PREVIOUS_SECRET_UNTIL": {"2026-12-01T12:00:00Z", func(c *config) any { return c.Tokens.PreviousSecretUntil }},
		"JWT_JWKS_URL":                       {"https://idp.example.org/jwks.json", func(c *config) any { return c.Tokens.JWKSURL }},
		"JWT_ISSUER":                         {"https://idp.example.org/", func(c *config) any { return c.Tokens.Issuer }},
		"JWT_AUDIENCE":                       {"capacityd", func(c *config) any { return c.Tokens.Audience }},
		"SEAT_CACHE_TTL":                     {"7s", func(c *config) any { return c.App.Seats.TTL }},
		"SHUTDOWN_TIMEOUT":                   {"7s", func(c *config) any { return c.ShutdownTimeout }},
		"SHUTDOWN_DRAIN":                     {"7s", func(c *config) any { return c.ShutdownDrain }},
		"LOG_LEVEL":                          {"debug", func(c *config) any { return c.LogLevel }},
		"LOG_FORMAT":                         {"text", func(c *config) any { return c.LogFormat }},
		"TRUSTED_PROXIES":                    {"10.0.0.0/8", func(c *config) any { return c.App.HTTP.TrustedProxies }},
		"MIGRATE_ON_START":                   {"false", func(c *config) any { return c.MigrateOnStart }},
		"DB_MAX_CONNS":                       {"7", func(c *config) any { return c.DB.MaxConns }},
		"REQUEST_TIMEOUT":                    {"7s", func(c *config) any { return c.App.RequestTimeout }},
		"EXPIRY_INTERVAL":                    {"7s", func(c *config) any { return c.App.ExpiryInterval }},
		"QUEUE_TICK":                         {"7s", func(c *config) any { return c.App.OnSale.Tick }},
		"RECONCILE_INTERVAL":                 {"7s", func(c *config) any { return c.App.ReconcileInterval }},
		"QUEUE_LIST_INTERVAL":                {"7s", func(c *config) any { return c.App.OnSale.ListEvery }},
		"CHECKIN_KEY_REFRESH":                {"7s", func(c *config) any { return c.App.KeyRefreshInterval }},
		"ADMISSION_MAX_BATCH":                {"7", func(c *config) any { return c.App.Change.MaxBatch }},
		"ADMISSION_MAX_ACTIVITIES":           {"7", func(c *config) any { return c.App.Change.MaxActivities }},
		"CONSOLE_BASE_URL":                   {"https://capacity.example.org", func(c *config) any { return c.App.Console.BaseURL }},
		"CONSOLE_OIDC_ISSUER":                {"https://idp.example.org/realms/staff", func(c *config) any { return c.App.Console.OIDC.Issuer }},
		"CONSOLE_OIDC_CLIENT_ID":             {"console", func(c *config) any { return c.App.Console.OIDC.ClientID }},
		"CONSOLE_OIDC_CLIENT_SECRET":         {"s3cret", func(c *config) any { return c.App.Console.OIDC.ClientSecret }},
		"CONSOLE_SESSION_TTL":                {"7h", func(c *config) any { return c.App.Console.SessionTTL }},
		"CONSOLE_TIME_ZONE":                  {"Asia/Taipei", func(c *config) any { return c.App.Console.TimeZone.String() }},
		"ADMISSION_MAX_TRANSACTIONS":         {"7", func(c *config) any { return c.App.Change.MaxTransactions }},
		"ADMISSION_GATHER_AT":                {"7", func(c *config) any { return c.App.Change.GatherAt }},
		"ADMISSION_GATHER":                   {"7ms", func(c *config) any { return c.App.Change.GatherFor }},
		"CHECKIN_GATHER":                     {"7ms", func(c *config) any { return c.App.CheckinGather }},
		"DEBUG_ADDR":                         {"127.0.0.1:6060", func(c *config) any { return c.DebugAddr }},
		"METRICS_ADDR":                       {"api", func(c *config) any { return c.App.HTTP.MetricsElsewhere }},
		"NOTE_COMBINING":                     {"off", func(c *config) any { return c.App.Notes.CombiningOff }},
		"NOTE_MAX_BATCH":                     {"7", func(c *config) any { return c.App.Notes.MaxBatch }},
		"NOTES_MODE":                         {"registered", func(c *config) any { return c.App.Notes.Mode }},
		"NOTE_WATER_WINDOW":                  {"7s", func(c *config) any { return c.App.HTTP.WaterWindow }},
		"STREAM_MAX_CLIENTS":                 {"7", func(c *config) any { return c.App.Streams.MaxStreams }},
		"STREAM_MAX_PER_ADDRESS":             {"7", func(c *config) any { return c.App.HTTP.StreamsPerAddress }},
		"EVENT_FEED_MAX_WAITS_PER_USER":      {"7", func(c *config) any { return c.App.HTTP.EventWaitsPerUser }},
		"STREAM_PING_INTERVAL":               {"7s", func(c *config) any { return c.App.HTTP.PingInterval }},
		"CORS_ALLOWED_ORIGINS":               {"https://a.example", func(c *config) any { return c.App.HTTP.CORSAllowedOrigins }},
		"DEMO_SIGNUPS":                       {"on", func(c *config) any { return c.App.HTTP.DemoSignups }},
		"WEBHOOK_SECRET_KEY":                 {"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", func(c *config) any { return c.App.WebhookSecretKey }},
		"WEBHOOK_ALLOW_PRIVATE":              {"true", func(c *config) any { return c.App.WebhookGuard.AllowPrivate }},
		"WEBHOOK_RETRY_BASE":                 {"7s", func(c *config) any { return c.App.Webhooks.RetryBase }},
		"WEBHOOK_TIMEOUT":                    {"7s", func(c *config) any { return c.App.Webhooks.Timeout }},
		"WEBHOOK_CONCURRENCY":                {"7", func(c *config) any { return c.App.Webhooks.Concurrency }},
		"WEBHOOK_BACKLOG_INTERVAL":           {"7s", func(c *config) any { return c.App.Webhooks.BacklogInterval }},
		"WEBHOOK_PIPELINING":                 {"false", func(c *config) any { return c.App.Webhooks.NoPipelining }},
		"RATE_LIMIT_PUBLIC_WRITES":           {"7:7", func(c *config) any { return c.App.HTTP.PublicWriteLimit }},
		"RATE_LIMIT_PUBLIC_READS":            {"7:7", func(c *config) any { return c.App.HTTP.PublicReadLimit }},
		"RATE_LIMIT_SIGNUPS":                 {"7:7", func(c *config) any { return c.App.HTTP.SignupLimit }},
		"RATE_LIMIT_BLOCK_CODES":             {"7:7", func(c *config) any { return c.App.HTTP.CodeLimit }},
	}
	base := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db", "CAPACITY_JWT_SECRET": goodSecret}
	defaults, err := loadConfig("serve", serveSettings, nil, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	for _, s := range serveSettings {
		r, ok := reaches[s.env]
		require.True(t, ok, "%s is not covered here", s.env)
		env := map[string]string{s.env: r.value}
		for k, v := range base {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
		if s.env == "CAPACITY_JWT_PREVIOUS_SECRET" {
			env["CAPACITY_JWT_PREVIOUS_SECRET_UNTIL"] = "2026-12-01T12:00:00Z"
		}
		if s.env == "CONSOLE_OIDC_ISSUER" {
			env["CONSOLE_OIDC_CLIENT_ID"] = "console"
		}
		c, err := loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
		require.NoError(t, err, s.env)
		require.False(t, reflect.DeepEqual(r.field(&defaults), r.field(&c)), "%s=%s leaves its field at %v", s.env, r.value, r.field(&c))
	}
	require.Len(t, reaches, len(serveSettings), "a setting covered here is no longer in the table")
}
