package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"log/slog"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// jwksFetchTimeout bounds one fetch of the JWK Set, and how long a request
// with an unknown kid may wait for the one it triggers.
const jwksFetchTimeout = 5 * time.Second

// minRSABits is the smallest RSA modulus accepted for RS256.
const minRSABits = 2048

// newJWKS returns the keys of cfg.JWKSURL, fetched now, refetched every
// JWKSRefreshInterval until ctx ends, and refetched at most every
// UnknownKIDRefreshInterval for a kid that is not among them.
func newJWKS(ctx context.Context, cfg TokenConfig) (keyfunc.Keyfunc, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	refresh := cfg.JWKSRefreshInterval
	if refresh <= 0 {
		refresh = time.Hour
	}
	unknownKID := cfg.UnknownKIDRefreshInterval
	if unknownKID <= 0 {
		unknownKID = time.Minute
	}
	// The first fetch failing is logged, not fatal: the identity provider
	// may start after capacityd, and an unknown kid refetches.
	startAnyway := true
	return keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
		HTTPTimeout:               jwksFetchTimeout,
		NoErrorReturnFirstHTTPReq: &startAnyway,
		RateLimitWaitMax:          jwksFetchTimeout,
		RefreshInterval:           refresh,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(unknownKID), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				log.Error("JWT_JWKS_URL: fetching the key set failed", "url", u, "err", err)
			}
		},
	})
}

// publicKey returns the JWK Set's keys for an RS256 or ES256 token: the key
// its kid names, or without a kid every key of the set, keeping only keys
// of the token's type (RSA of at least 2048 bits for RS256, P-256 for
// ES256).
func (a *Authenticator) publicKey(ctx context.Context, t *jwt.Token) (jwt.VerificationKeySet, error) {
	if a.jwks == nil {
		return jwt.VerificationKeySet{}, errors.New("no JWK Set configured")
	}
	key, err := a.jwks.KeyfuncCtx(ctx)(t)
	if err != nil {
		return jwt.VerificationKeySet{}, err
	}
	candidates := []jwt.VerificationKey{key}
	if set, ok := key.(jwt.VerificationKeySet); ok {
		candidates = set.Keys
	}
	var keys jwt.VerificationKeySet
	for _, k := range candidates {
		if keyFits(t.Method, k) {
			keys.Keys = append(keys.Keys, k)
		}
	}
	if len(keys.Keys) == 0 {
		return jwt.VerificationKeySet{}, errors.New("no key of the token's type in the JWK Set")
	}
	return keys, nil
}

// keyFits reports whether key is a public key of the kind method needs.
func keyFits(method jwt.SigningMethod, key any) bool {
	switch method {
	case jwt.SigningMethodRS256:
		k, ok := key.(*rsa.PublicKey)
		return ok && k.N.BitLen() >= minRSABits
	case jwt.SigningMethodES256:
		k, ok := key.(*ecdsa.PublicKey)
		return ok && k.Curve == elliptic.P256()
	}
	return false
}
