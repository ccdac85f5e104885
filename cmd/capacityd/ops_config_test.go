package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
)

func TestOperationsSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, slog.LevelInfo, c.LogLevel)
	require.Equal(t, "json", c.LogFormat)
	require.Empty(t, c.App.HTTP.TrustedProxies, "no proxy is trusted by default")
	require.True(t, c.MigrateOnStart)

	env["LOG_LEVEL"], env["LOG_FORMAT"], env["TRUSTED_PROXIES"], env["MIGRATE_ON_START"] = "debug", "text", "10.0.0.0/8,192.0.2.7", "false"
	c, err = loadConfig("serve", serveSettings, []string{"--log-level", "warn"}, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, slog.LevelWarn, c.LogLevel, "the flag overrides the environment")
	require.Equal(t, "text", c.LogFormat)
	require.Len(t, c.App.HTTP.TrustedProxies, 2)
	require.Equal(t, "192.0.2.7/32", c.App.HTTP.TrustedProxies[1].String())
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

func TestTokenSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	prev := "previous-secret-previous-secret-previous"
	c, err := loadConfig("serve", serveSettings, nil, envOf(with("JWT_JWKS_URL", "https://idp.example.org/jwks.json",
		"JWT_ISSUER", "https://idp.example.org/", "JWT_AUDIENCE", "capacityd")), io.Discard, nil)
	require.NoError(t, err, "with a JWK Set the HS256 secret is optional")
	require.Empty(t, c.Tokens.Secret)
	tc := c.tokenConfig(nil)
	require.Equal(t, "https://idp.example.org/jwks.json", tc.JWKSURL)
	require.Equal(t, "https://idp.example.org/", tc.Issuer)
	require.Equal(t, "capacityd", tc.Audience)

	c, err = loadConfig("serve", serveSettings, nil, envOf(with("CAPACITY_JWT_SECRET", goodSecret,
		"CAPACITY_JWT_PREVIOUS_SECRET", prev, "CAPACITY_JWT_PREVIOUS_SECRET_UNTIL", "2026-12-01T12:00:00Z")), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), c.Tokens.PreviousSecretUntil)

	for want, env := range map[string]map[string]string{
		"CAPACITY_JWT_SECRET (--capacity-jwt-secret): is required (at least 32 bytes) unless --dev or JWT_JWKS_URL": base,
		"CAPACITY_JWT_SECRET (--capacity-jwt-secret): must be at least 32 bytes":                                    with("JWT_JWKS_URL", "https://idp.example.org/jwks.json", "CAPACITY_JWT_SECRET", "short"),
		`JWT_JWKS_URL (--jwt-jwks-url): want an http(s) URL`:                                                        with("CAPACITY_JWT_SECRET", goodSecret, "JWT_JWKS_URL", "file:///etc/keys"),
		"CAPACITY_JWT_PREVIOUS_SECRET_UNTIL (--capacity-jwt-previous-secret-until): is required":                    with("CAPACITY_JWT_SECRET", goodSecret, "CAPACITY_JWT_PREVIOUS_SECRET", prev),
		`CAPACITY_JWT_PREVIOUS_SECRET_UNTIL (--capacity-jwt-previous-secret-until): want an RFC 3339 time`: with("CAPACITY_JWT_SECRET", goodSecret,
			"CAPACITY_JWT_PREVIOUS_SECRET", prev, "CAPACITY_JWT_PREVIOUS_SECRET_UNTIL", "next week"),
		"CAPACITY_JWT_PREVIOUS_SECRET (--capacity-jwt-previous-secret): must be at least 32 bytes": with("CAPACITY_JWT_SECRET", goodSecret,
			"CAPACITY_JWT_PREVIOUS_SECRET", "short", "CAPACITY_JWT_PREVIOUS_SECRET_UNTIL", "2026-12-01T12:00:00Z"),
		"CAPACITY_JWT_PREVIOUS_SECRET (--capacity-jwt-previous-secret): must differ": with("CAPACITY_JWT_SECRET", goodSecret,
			"CAPACITY_JWT_PREVIOUS_SECRET", goodSecret, "CAPACITY_JWT_PREVIOUS_SECRET_UNTIL", "2026-12-01T12:00:00Z"),
	} {
		_, err := loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
		require.ErrorContains(t, err, want)
	}
}

func TestTokenCommandSetsIssuerAndAudience(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	env := envOf(map[string]string{"CAPACITY_JWT_SECRET": goodSecret, "JWT_ISSUER": "https://idp.example.org/", "JWT_AUDIENCE": "capacityd"})
	require.NoError(t, run(context.Background(), []string{"token", "--sub", "alice", "--admin"}, env, &out, io.Discard))
	var c httpapi.Claims
	_, err := jwt.ParseWithClaims(strings.TrimSpace(out.String()), &c, func(*jwt.Token) (any, error) { return []byte(goodSecret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("https://idp.example.org/"), jwt.WithAudience("capacityd"))
	require.NoError(t, err)
	require.Equal(t, "alice", c.Subject)
	require.Equal(t, []string{"admin"}, c.Roles)
}

func TestTokenCommandRoles(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"CAPACITY_JWT_SECRET": goodSecret})
	auth, err := httpapi.NewAuthenticator([]byte(goodSecret))
	require.NoError(t, err)
	mint := func(args ...string) string {
		var out strings.Builder
		require.NoError(t, run(context.Background(), append([]string{"token", "--sub", "dora"}, args...), env, &out, io.Discard))
		return strings.TrimSpace(out.String())
	}

	caller, err := auth.Verify(mint("--role", "door-hall-a", "--role", "resident", "--role", "door-hall-a"))
	require.NoError(t, err)
	require.Equal(t, "dora", caller.UserID)
	require.Equal(t, []string{"door-hall-a", "resident"}, caller.Roles, "each role once, in the order given")
	require.False(t, caller.Admin, "a role other than admin makes no admin")

	caller, err = auth.Verify(mint("--role", "resident", "--admin"))
	require.NoError(t, err)
	require.Equal(t, []string{"resident", "admin"}, caller.Roles, "--admin adds admin to the roles")
	require.True(t, caller.Admin)

	caller, err = auth.Verify(mint("--admin", "--role", "admin"))
	require.NoError(t, err)
	require.Equal(t, []string{"admin"}, caller.Roles, "admin is claimed once")

	var c httpapi.Claims
	_, err = jwt.ParseWithClaims(mint(), &c, func(*jwt.Token) (any, error) { return []byte(goodSecret), nil }, jwt.WithValidMethods([]string{"HS256"}))
	require.NoError(t, err)
	require.Nil(t, c.Roles, "a token without --role or --admin claims no roles")

	for _, bad := range []string{"", "door hall", " admin", "admin\n", "door\u200b"} {
		err := run(context.Background(), []string{"token", "--sub", "dora", "--role", bad}, env, io.Discard, io.Discard)
		require.ErrorContains(t, err, "want a role name of visible characters without spaces", "%q", bad)
	}
}

// TestAnOpenIDProviderNeedsTheConsolesClientID: CONSOLE_OIDC_ISSUER alone
// stops the server at start, naming the missing setting.
func TestAnOpenIDProviderNeedsTheConsolesClientID(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1/db", "CAPACITY_JWT_SECRET": goodSecret,
		"CONSOLE_OIDC_ISSUER": "https://idp.example.org"}
	_, err := loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.ErrorContains(t, err, "CONSOLE_OIDC_CLIENT_ID")
	env["CONSOLE_TIME_ZONE"] = "Mars/Olympus"
	env["CONSOLE_OIDC_CLIENT_ID"] = "console"
	_, err = loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.ErrorContains(t, err, "CONSOLE_TIME_ZONE")
}
