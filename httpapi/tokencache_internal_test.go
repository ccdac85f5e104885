package httpapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
)

const (
	cacheTestSecret = "token-cache-secret-token-cache-secret!!"
	cacheTestOther  = "another-secret-another-secret-another!!"
)

// testClock is a settable clock for an Authenticator.
type testClock struct{ at atomic.Int64 }

func (c *testClock) now() time.Time  { return time.Unix(0, c.at.Load()) }
func (c *testClock) set(t time.Time) { c.at.Store(t.UnixNano()) }

// clockedAuthenticator returns an Authenticator for cfg on a clock that
// starts now.
func clockedAuthenticator(t *testing.T, cfg TokenConfig) (*Authenticator, *testClock) {
	t.Helper()
	a, err := NewTokenAuthenticator(context.Background(), cfg)
	require.NoError(t, err)
	clock := &testClock{}
	clock.set(time.Now())
	a.now = clock.now
	return a, clock
}

func hs256(t *testing.T, secret string, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	require.NoError(t, err)
	return tok
}

func requireVerified(t *testing.T, a *Authenticator, tok, sub string) {
	t.Helper()
	caller, err := a.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, sub, caller.UserID)
}

func requireUnauthenticated(t *testing.T, a *Authenticator, tok, why string) {
	t.Helper()
	_, err := a.Verify(tok)
	require.Error(t, err, why)
	require.True(t, capacityd.IsCode(err, capacityd.EUnauthenticated), "%s: %v", why, err)
}

// cached reports whether tok has a live entry in a's cache.
func cached(a *Authenticator, tok string) bool {
	_, ok := a.verified.get(tok, a.now())
	return ok
}

func TestAcceptedTokensAreRememberedRefusedOnesNot(t *testing.T) {
	t.Parallel()
	a, clock := clockedAuthenticator(t, TokenConfig{Secret: []byte(cacheTestSecret)})
	exp := clock.now().Add(time.Hour).Unix()
	tok := hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "roles": []string{"admin"}})
	requireVerified(t, a, tok, "alice")
	require.True(t, cached(a, tok))
	caller, err := a.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, "alice", caller.UserID)
	require.True(t, caller.Admin, "the remembered answer keeps the roles")

	for why, bad := range map[string]string{
		"wrong secret":       hs256(t, cacheTestOther, jwt.MapClaims{"sub": "alice", "exp": exp}),
		"no exp":             hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice"}),
		"expired":            hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": clock.now().Add(-time.Minute).Unix()}),
		"not yet valid":      hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "nbf": clock.now().Add(time.Minute).Unix()}),
		"control characters": hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "al\x00ice", "exp": exp}),
	} {
		for range 2 {
			requireUnauthenticated(t, a, bad, why)
		}
		require.False(t, cached(a, bad), why)
	}
}

func TestTamperedCachedTokenIsRefused(t *testing.T) {
	t.Parallel()
	a, clock := clockedAuthenticator(t, TokenConfig{Secret: []byte(cacheTestSecret)})
	tok := hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": clock.now().Add(time.Hour).Unix()})
	requireVerified(t, a, tok, "alice")
	require.True(t, cached(a, tok))
	parts := strings.Split(tok, ".")
	forged := hs256(t, cacheTestOther, jwt.MapClaims{"sub": "mallory", "exp": clock.now().Add(time.Hour).Unix(), "roles": []string{"admin"}})
	fparts := strings.Split(forged, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 0x01
		return string(b)
	}
	for why, bad := range map[string]string{
		"payload swapped":       parts[0] + "." + fparts[1] + "." + parts[2],
		"signature of another":  parts[0] + "." + parts[1] + "." + fparts[2],
		"payload bit flipped":   parts[0] + "." + flip(parts[1], 3) + "." + parts[2],
		"signature bit flipped": parts[0] + "." + parts[1] + "." + flip(parts[2], 5),
		"trailing byte":         tok + "A",
		"no signature":          parts[0] + "." + parts[1] + ".",
	} {
		requireUnauthenticated(t, a, bad, why)
	}
	requireVerified(t, a, tok, "alice")
}

func TestCachedTokenExpiresWithItsExpOrTheCacheTTL(t *testing.T) {
	t.Parallel()
	a, clock := clockedAuthenticator(t, TokenConfig{Secret: []byte(cacheTestSecret)})
	start := clock.now()
	short := hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": start.Add(20 * time.Second).Unix()})
	long := hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "bob", "exp": start.Add(time.Hour).Unix()})
	requireVerified(t, a, short, "alice")
	requireVerified(t, a, long, "bob")

	// Past its exp the entry is not used; the full verification still
	// grants the leeway, and no more.
	clock.set(start.Add(25 * time.Second))
	require.False(t, cached(a, short), "an entry never outlives the token's exp")
	requireVerified(t, a, short, "alice")
	require.False(t, cached(a, short), "a token within its leeway is not remembered")
	clock.set(start.Add(31 * time.Second))
	requireUnauthenticated(t, a, short, "expired beyond the leeway")

	// The long-lived token is verified afresh after tokenCacheTTL.
	require.True(t, cached(a, long))
	clock.set(start.Add(tokenCacheTTL))
	require.False(t, cached(a, long), "an entry lasts tokenCacheTTL at most")
	requireVerified(t, a, long, "bob")
	require.True(t, cached(a, long))
}

func TestCacheIsPerAuthenticatorIssuerAndAudience(t *testing.T) {
	t.Parallel()
	cfg := TokenConfig{Secret: []byte(cacheTestSecret), Issuer: "https://idp.test/", Audience: "capacityd"}
	a, clock := clockedAuthenticator(t, cfg)
	exp := clock.now().Add(time.Hour).Unix()
	tok := hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "iss": "https://idp.test/", "aud": "capacityd"})
	requireVerified(t, a, tok, "alice")
	requireVerified(t, a, tok, "alice")
	for why, bad := range map[string]string{
		"other audience": hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "iss": "https://idp.test/", "aud": "other"}),
		"other issuer":   hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "iss": "https://evil.test/", "aud": "capacityd"}),
		"no audience":    hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "iss": "https://idp.test/"}),
	} {
		requireUnauthenticated(t, a, bad, why)
	}
	// The same token, remembered by a, is refused by an Authenticator
	// that expects another audience.
	cfg.Audience = "billing"
	other, _ := clockedAuthenticator(t, cfg)
	requireUnauthenticated(t, other, tok, "audience of another service")
}

func TestCachedTokenOfThePreviousSecretEndsWithItsGracePeriod(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, clock := clockedAuthenticator(t, TokenConfig{Secret: []byte(cacheTestSecret), PreviousSecret: []byte(cacheTestOther),
		PreviousSecretUntil: now.Add(time.Minute / 2)})
	exp := now.Add(time.Hour).Unix()
	old := hs256(t, cacheTestOther, jwt.MapClaims{"sub": "alice", "exp": exp})
	current := hs256(t, cacheTestSecret, jwt.MapClaims{"sub": "bob", "exp": exp})
	requireVerified(t, a, old, "alice")
	requireVerified(t, a, current, "bob")
	require.True(t, cached(a, old))
	clock.set(now.Add(time.Minute/2 + time.Second))
	require.True(t, cached(a, old), "the entry itself still lives")
	requireUnauthenticated(t, a, old, "grace period over")
	requireVerified(t, a, current, "bob")
}

func TestTokenCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := newTokenCache(64)
	now := time.Now()
	for i := range 1000 {
		c.put(fmt.Sprintf("token-%d", i), &verifiedToken{until: now.Add(time.Minute)}, now)
		require.LessOrEqual(t, c.entries.Len(), 64)
	}
	_, ok := c.get("token-999", now)
	require.True(t, ok, "the last token put is kept")
	c.put("late", &verifiedToken{until: now}, now)
	_, ok = c.get("late", now)
	require.False(t, ok, "an entry already at its end is not kept")
}

func TestCachedVerificationUnderConcurrency(t *testing.T) {
	t.Parallel()
	a, clock := clockedAuthenticator(t, TokenConfig{Secret: []byte(cacheTestSecret)})
	a.verified = newTokenCache(16) // evictions while others read
	exp := clock.now().Add(time.Hour).Unix()
	var good, bad []string
	for i := range 40 {
		sub := fmt.Sprintf("user-%d", i)
		good = append(good, hs256(t, cacheTestSecret, jwt.MapClaims{"sub": sub, "exp": exp}))
		bad = append(bad, hs256(t, cacheTestOther, jwt.MapClaims{"sub": sub, "exp": exp}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 32 {
		wg.Go(func() {
			for n := range 200 {
				i := (g*7 + n) % len(good)
				caller, err := a.Verify(good[i])
				if err != nil || caller.UserID != fmt.Sprintf("user-%d", i) {
					errs <- fmt.Errorf("good token %d: %v %v", i, caller.UserID, err)
					return
				}
				if _, err := a.Verify(bad[i]); err == nil {
					errs <- fmt.Errorf("bad token %d accepted", i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, a.verified.entries.Len(), 16)
}

// BenchmarkVerifyToken compares a poll's token remembered with its full
// verification.
func BenchmarkVerifyToken(b *testing.B) {
	a, err := NewTokenAuthenticator(context.Background(), TokenConfig{Secret: []byte(cacheTestSecret)})
	require.NoError(b, err)
	tok, err := a.Sign("user-4711", false, time.Hour)
	require.NoError(b, err)
	ctx := context.Background()
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.VerifyContext(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.verify(ctx, tok, a.now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
