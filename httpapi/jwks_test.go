package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

const (
	testIssuer   = "https://idp.test/"
	testAudience = "capacityd"
)

// idp is an identity provider's JWK Set served by the test: the keys it
// lists can be changed (rotation) and its fetches are counted.
type idp struct {
	*httptest.Server
	fetches atomic.Int64
	mu      sync.Mutex
	keys    []map[string]any
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	p := &idp{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.fetches.Add(1)
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": p.keys})
	}))
	t.Cleanup(p.Close)
	return p
}

// publish makes the set list exactly these keys.
func (p *idp) publish(keys ...signingKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = nil
	for _, k := range keys {
		p.keys = append(p.keys, k.jwk())
	}
}

// signingKey is a private key with the kid and algorithm it signs with.
type signingKey struct {
	kid    string
	method jwt.SigningMethod
	key    any
}

func rsaKey(t *testing.T, kid string, bits int) signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	require.NoError(t, err)
	return signingKey{kid, jwt.SigningMethodRS256, k}
}

func ecKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return signingKey{kid, jwt.SigningMethodES256, k}
}

// jwk returns the public JWK of the key.
func (k signingKey) jwk() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	switch key := k.key.(type) {
	case *rsa.PrivateKey:
		return map[string]any{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}
	case *ecdsa.PrivateKey:
		pt, err := key.PublicKey.Bytes() // 0x04 || X || Y
		if err != nil {
			panic(err)
		}
		return map[string]any{"kty": "EC", "kid": k.kid, "use": "sig", "alg": "ES256", "crv": "P-256",
			"x": b64(pt[1:33]), "y": b64(pt[33:])}
	}
	panic("unknown key type")
}

// claims returns valid claims for sub from the test identity provider.
func claims(sub string, extra ...any) jwt.MapClaims {
	c := jwt.MapClaims{"sub": sub, "iss": testIssuer, "aud": testAudience, "exp": time.Now().Add(time.Hour).Unix()}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(c, extra[i].(string))
			continue
		}
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

// sign signs claims with k, naming its kid unless kid is false.
func (k signingKey) sign(t *testing.T, c jwt.MapClaims, kid bool) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, c)
	if kid {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.key)
	require.NoError(t, err)
	return s
}

// idpAuthenticator verifies tokens of p with issuer and audience checks,
// and HS256 tokens signed with apptest.Secret.
func idpAuthenticator(t *testing.T, p *idp, tune func(*httpapi.TokenConfig)) *httpapi.Authenticator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := httpapi.TokenConfig{
		Secret: []byte(apptest.Secret), JWKSURL: p.URL, Issuer: testIssuer, Audience: testAudience,
		UnknownKIDRefreshInterval: time.Hour,
	}
	if tune != nil {
		tune(&cfg)
	}
	a, err := httpapi.NewTokenAuthenticator(ctx, cfg)
	require.NoError(t, err)
	return a
}

func requireAccepted(t *testing.T, a *httpapi.Authenticator, tok, sub string, admin bool) {
	t.Helper()
	caller, err := a.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, sub, caller.UserID)
	require.Equal(t, admin, caller.Admin)
}

func requireRefused(t *testing.T, a *httpapi.Authenticator, tok, why string) {
	t.Helper()
	_, err := a.Verify(tok)
	require.Error(t, err, why)
	require.True(t, capacityd.IsCode(err, capacityd.EUnauthenticated), "%s: %v", why, err)
}

func TestIdentityProviderTokensAreVerifiedWithCachedKeys(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	r1, e1 := rsaKey(t, "r1", 2048), ecKey(t, "e1")
	p.publish(r1, e1)
	a := idpAuthenticator(t, p, nil)
	require.EqualValues(t, 1, p.fetches.Load(), "the set is fetched at start")

	for range 20 {
		requireAccepted(t, a, r1.sign(t, claims("alice"), true), "alice", false)
		requireAccepted(t, a, e1.sign(t, claims("bob", "roles", []string{"admin"}), true), "bob", true)
	}
	requireAccepted(t, a, r1.sign(t, claims("carol"), false), "carol", false)
	requireAccepted(t, a, e1.sign(t, claims("dan", "aud", []string{"other", testAudience}), false), "dan", false)
	require.EqualValues(t, 1, p.fetches.Load(), "known keys are served from the cache")

	for why, c := range map[string]jwt.MapClaims{
		"wrong issuer":   claims("m", "iss", "https://evil.test/"),
		"no issuer":      claims("m", "iss", nil),
		"wrong audience": claims("m", "aud", "someone-else"),
		"no audience":    claims("m", "aud", nil),
		"no exp":         claims("m", "exp", nil),
		"expired":        claims("m", "exp", time.Now().Add(-time.Minute).Unix()),
		"empty sub":      claims(""),
		"long sub":       claims(string(make([]byte, 129))),
	} {
		requireRefused(t, a, r1.sign(t, c, true), why)
		requireRefused(t, a, e1.sign(t, c, true), why)
	}
	// The service's own HS256 tokens must carry the same iss and aud.
	requireRefused(t, a, signJWT(t, jwt.SigningMethodHS256, []byte(apptest.Secret), claims("m", "iss", nil)), "HS256 without iss")
	requireAccepted(t, a, signJWT(t, jwt.SigningMethodHS256, []byte(apptest.Secret), claims("erin")), "erin", false)
	signed, err := a.Sign("frank", true, time.Minute)
	require.NoError(t, err)
	requireAccepted(t, a, signed, "frank", true)
}

func TestIdentityProviderKeyRotation(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	r1, r2 := rsaKey(t, "r1", 2048), rsaKey(t, "r2", 2048)
	p.publish(r1)
	a := idpAuthenticator(t, p, nil)
	requireAccepted(t, a, r1.sign(t, claims("alice"), true), "alice", false)

	// The provider rotates to r2: the first token naming the new kid
	// refetches the set once and is accepted.
	p.publish(r2)
	requireAccepted(t, a, r2.sign(t, claims("alice"), true), "alice", false)
	require.EqualValues(t, 2, p.fetches.Load())
	requireAccepted(t, a, r2.sign(t, claims("bob"), true), "bob", false)
	require.EqualValues(t, 2, p.fetches.Load())
	// The retired key is gone from the cache with the refetch.
	requireRefused(t, a, r1.sign(t, claims("alice"), true), "a key no longer in the set")
	requireRefused(t, a, r1.sign(t, claims("alice"), false), "a key no longer in the set, no kid")
}

func TestUnknownKeyIDTriggersOneRefetch(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	r1 := rsaKey(t, "r1", 2048)
	p.publish(r1)
	a := idpAuthenticator(t, p, nil)
	stranger := rsaKey(t, "stranger", 2048)
	for range 5 {
		requireRefused(t, a, stranger.sign(t, claims("mallory"), true), "a key not in the set")
	}
	require.EqualValues(t, 2, p.fetches.Load(), "one refetch for unknown kids, then rate limited")
	// A key not in the set that claims a known kid, or names none.
	impostor := rsaKey(t, "r1", 2048)
	requireRefused(t, a, impostor.sign(t, claims("mallory"), true), "wrong key under a known kid")
	requireRefused(t, a, impostor.sign(t, claims("mallory"), false), "wrong key without a kid")
	require.EqualValues(t, 2, p.fetches.Load())
	requireAccepted(t, a, r1.sign(t, claims("alice"), true), "alice", false)
}

func TestKeySetIsRefreshedPeriodically(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	r1, r2 := rsaKey(t, "r1", 2048), rsaKey(t, "r2", 2048)
	p.publish(r1)
	a := idpAuthenticator(t, p, func(c *httpapi.TokenConfig) { c.JWKSRefreshInterval = 50 * time.Millisecond })
	p.publish(r2)
	require.Eventually(t, func() bool { return p.fetches.Load() >= 3 }, 10*time.Second, 10*time.Millisecond)
	// Without any unknown-kid refetch, the new key is known and the old one
	// is not.
	requireAccepted(t, a, r2.sign(t, claims("alice"), false), "alice", false)
	requireRefused(t, a, r1.sign(t, claims("alice"), false), "retired key")
}

func TestRememberedTokenOfARetiredKeyIsRefused(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	r1, r2, e1 := rsaKey(t, "r1", 2048), rsaKey(t, "r2", 2048), ecKey(t, "e1")
	p.publish(r1, e1)
	a := idpAuthenticator(t, p, func(c *httpapi.TokenConfig) { c.JWKSRefreshInterval = 50 * time.Millisecond })
	withKid, noKid := r1.sign(t, claims("alice"), true), r1.sign(t, claims("bob"), false)
	ec := e1.sign(t, claims("carol"), true)
	for range 3 { // accepted, then answered from memory
		requireAccepted(t, a, withKid, "alice", false)
		requireAccepted(t, a, noKid, "bob", false)
		requireAccepted(t, a, ec, "carol", false)
	}
	// A key of the same kid but other material, then no r1 at all: the
	// very tokens accepted before are refused once the set says so.
	impostor := rsaKey(t, "r1", 2048)
	p.publish(impostor, r2, e1)
	fetches := p.fetches.Load()
	require.Eventually(t, func() bool { return p.fetches.Load() >= fetches+2 }, 10*time.Second, 10*time.Millisecond)
	requireRefused(t, a, withKid, "remembered token whose kid now names another key")
	requireRefused(t, a, noKid, "remembered token without kid, its key no longer in the set")
	requireAccepted(t, a, ec, "carol", false)
	p.publish(r2)
	fetches = p.fetches.Load()
	require.Eventually(t, func() bool { return p.fetches.Load() >= fetches+2 }, 10*time.Second, 10*time.Millisecond)
	requireRefused(t, a, withKid, "remembered token of a retired kid")
	requireRefused(t, a, noKid, "remembered token of a retired key, no kid")
	requireRefused(t, a, ec, "remembered token of a retired EC key")
	requireAccepted(t, a, r2.sign(t, claims("alice"), true), "alice", false)
}

func TestAlgorithmsArePinnedToTheirKeys(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	r1, e1, weak := rsaKey(t, "r1", 2048), ecKey(t, "e1"), rsaKey(t, "weak", 1024)
	p.publish(r1, e1, weak)
	a := idpAuthenticator(t, p, nil)
	der, err := x509.MarshalPKIXPublicKey(&r1.key.(*rsa.PrivateKey).PublicKey)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hsWithKid := func(secret []byte, kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims("mallory", "roles", []string{"admin"}))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(secret)
		require.NoError(t, err)
		return s
	}
	requireRefused(t, a, hsWithKid(pemKey, "r1"), "HS256 keyed with the RSA public key (PEM)")
	requireRefused(t, a, hsWithKid(der, "r1"), "HS256 keyed with the RSA public key (DER)")
	requireRefused(t, a, hsWithKid(r1.key.(*rsa.PrivateKey).N.Bytes(), "r1"), "HS256 keyed with the modulus")
	// ES256 naming an RSA key's kid, and RS256 naming an EC key's kid.
	otherEC := ecKey(t, "r1")
	requireRefused(t, a, otherEC.sign(t, claims("mallory"), true), "ES256 under an RSA kid")
	otherRSA := rsaKey(t, "e1", 2048)
	requireRefused(t, a, otherRSA.sign(t, claims("mallory"), true), "RS256 under an EC kid")
	requireRefused(t, a, weak.sign(t, claims("mallory"), true), "RSA key under 2048 bits")
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodRS384, jwt.SigningMethodRS512, jwt.SigningMethodPS256} {
		tok := jwt.NewWithClaims(m, claims("mallory"))
		tok.Header["kid"] = "r1"
		s, err := tok.SignedString(r1.key)
		require.NoError(t, err)
		requireRefused(t, a, s, m.Alg())
	}

	// Without a secret, HS256 is refused outright, even signed with what
	// would otherwise be the secret.
	noSecret := idpAuthenticator(t, p, func(c *httpapi.TokenConfig) { c.Secret = nil })
	requireRefused(t, noSecret, hsWithKid([]byte(apptest.Secret), "r1"), "HS256 with no secret configured")
	requireAccepted(t, noSecret, r1.sign(t, claims("alice"), true), "alice", false)
	_, err = noSecret.Sign("alice", false, time.Minute)
	require.Error(t, err, "nothing to sign with")
	// Without a JWK Set, RS256 and ES256 are refused.
	hsOnly, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	require.NoError(t, err)
	requireRefused(t, hsOnly, r1.sign(t, claims("alice"), true), "RS256 with no JWK Set")
	requireRefused(t, hsOnly, e1.sign(t, claims("alice"), true), "ES256 with no JWK Set")
}

func TestPreviousSecretIsAcceptedDuringItsGracePeriod(t *testing.T) {
	t.Parallel()
	current := []byte("current-secret-current-secret-current!!")
	previous := []byte(apptest.Secret)
	oldToken := signJWT(t, jwt.SigningMethodHS256, previous, claims("alice", "iss", nil, "aud", nil))
	stranger := signJWT(t, jwt.SigningMethodHS256, []byte("a-third-secret-a-third-secret-a-third"), claims("m", "iss", nil, "aud", nil))
	rotating, err := httpapi.NewTokenAuthenticator(context.Background(), httpapi.TokenConfig{
		Secret: current, PreviousSecret: previous, PreviousSecretUntil: time.Now().Add(time.Hour),
	})
	require.NoError(t, err)
	requireAccepted(t, rotating, oldToken, "alice", false)
	requireRefused(t, rotating, stranger, "neither secret")
	newToken, err := rotating.Sign("bob", false, time.Minute)
	require.NoError(t, err)
	// New tokens are signed with the current secret only.
	onlyCurrent, err := httpapi.NewAuthenticator(current)
	require.NoError(t, err)
	requireAccepted(t, onlyCurrent, newToken, "bob", false)
	requireRefused(t, onlyCurrent, oldToken, "previous secret not configured")

	ended, err := httpapi.NewTokenAuthenticator(context.Background(), httpapi.TokenConfig{
		Secret: current, PreviousSecret: previous, PreviousSecretUntil: time.Now().Add(-time.Second),
	})
	require.NoError(t, err)
	requireRefused(t, ended, oldToken, "grace period over")
	requireAccepted(t, ended, newToken, "bob", false)

	_, err = httpapi.NewTokenAuthenticator(context.Background(), httpapi.TokenConfig{Secret: current, PreviousSecret: []byte("short")})
	require.ErrorContains(t, err, "CAPACITY_JWT_PREVIOUS_SECRET")
}

func TestIdentityProviderTokensThroughTheAPI(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	e1 := ecKey(t, "e1")
	p.publish(e1)
	inst := apptest.Start(t, apptest.Options{App: app.Options{Auth: idpAuthenticator(t, p, nil)}})
	admin := client.New(inst.URL, e1.sign(t, claims("idp-admin", "roles", []string{"admin"}), true), apptest.Client)
	act, err := admin.CreateActivity(t.Context(), client.NewActivity{Title: "from the IdP", Capacity: 1})
	require.NoError(t, err)
	user := admin.WithToken(e1.sign(t, claims("idp-user"), true))
	res, err := user.Signup(t.Context(), act.ID, client.SignupOptions{})
	require.NoError(t, err)
	require.False(t, res.Waitlisted)
	require.Equal(t, "idp-user", res.Registration.UserID)
	// The refusal is read as it is sent, for its shape.
	stranger := ecKey(t, "e1")
	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+act.ID+"/registrations", stranger.sign(t, claims("mallory"), true), `{}`)
	requireErrorShape(t, r, http.StatusUnauthorized, "unauthenticated")
}
