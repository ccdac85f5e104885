package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// MinSecretBytes is the shortest HS256 secret accepted.
const MinSecretBytes = 32

// expLeeway is the clock skew tolerated on exp.
const expLeeway = 10 * time.Second

// Claims are the claims of a capacityd token.
type Claims struct {
	jwt.RegisteredClaims
	Roles []string `json:"roles,omitempty"`
}

// TokenConfig is how tokens are verified: HS256 with a shared secret (the
// tokens capacityd token mints), RS256 and ES256 against an identity
// provider's JWK Set, or both. The algorithm of a token picks its keys, so
// a token of one kind is never checked with a key of the other.
type TokenConfig struct {
	// Secret signs and verifies HS256 tokens, at least MinSecretBytes long.
	// It may be empty only when JWKSURL is set: HS256 tokens are then
	// refused.
	Secret []byte
	// PreviousSecret, during a rotation, is still accepted for HS256 tokens
	// (never used to sign) until PreviousSecretUntil.
	PreviousSecret      []byte
	PreviousSecretUntil time.Time
	// JWKSURL is the identity provider's JWK Set. Its keys are fetched at
	// start, cached, refetched every JWKSRefreshInterval, and refetched
	// at once (at most every UnknownKIDRefreshInterval) for a token whose
	// kid is not among them.
	JWKSURL                   string
	JWKSRefreshInterval       time.Duration // default 1h
	UnknownKIDRefreshInterval time.Duration // default 1m
	// Issuer and Audience, when set, must be every token's iss and one of
	// its aud; Sign sets them.
	Issuer   string
	Audience string
	// Logger receives JWK Set fetch failures; default slog.Default().
	Logger *slog.Logger
}

// Authenticator signs and verifies tokens. It remembers the tokens it
// accepted (see tokenCache) and answers them again without parsing them
// while the keys that verified them are still the ones it would use.
type Authenticator struct {
	cfg      TokenConfig
	jwks     keyfunc.Keyfunc // nil without JWKSURL
	now      func() time.Time
	verified *tokenCache
	// parser parses and validates every token (newParser).
	parser *jwt.Parser
	// hs256 are the HS256 keys: the secret alone, and with the previous
	// one for its grace period (see secrets), made once.
	hs256, hs256Rotating jwt.VerificationKeySet
}

// NewAuthenticator returns an Authenticator for HS256 tokens signed with
// secret, which must be at least MinSecretBytes long.
func NewAuthenticator(secret []byte) (*Authenticator, error) {
	return NewTokenAuthenticator(context.Background(), TokenConfig{Secret: secret})
}

// NewTokenAuthenticator returns an Authenticator for cfg. With a JWKSURL it
// fetches the key set once before it returns (a failure is logged, not
// returned: keys are fetched again on demand) and refreshes it until ctx
// ends.
func NewTokenAuthenticator(ctx context.Context, cfg TokenConfig) (*Authenticator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Authenticator{cfg: cfg, now: time.Now, verified: newTokenCache(tokenCacheEntries),
		hs256:         jwt.VerificationKeySet{Keys: []jwt.VerificationKey{cfg.Secret}},
		hs256Rotating: jwt.VerificationKeySet{Keys: []jwt.VerificationKey{cfg.Secret, cfg.PreviousSecret}},
	}
	if cfg.JWKSURL != "" {
		kf, err := newJWKS(ctx, cfg)
		if err != nil {
			return nil, err
		}
		a.jwks = kf
	}
	a.parser = a.newParser() // after jwks: it chooses the algorithms
	return a, nil
}

func (cfg TokenConfig) validate() error {
	if len(cfg.Secret) < MinSecretBytes && (len(cfg.Secret) > 0 || cfg.JWKSURL == "") {
		return errors.New("CAPACITY_JWT_SECRET must be at least 32 bytes")
	}
	if len(cfg.PreviousSecret) > 0 && len(cfg.PreviousSecret) < MinSecretBytes {
		return errors.New("CAPACITY_JWT_PREVIOUS_SECRET must be at least 32 bytes")
	}
	return nil
}

// Sign returns an HS256 token for sub that expires after ttl, with the
// admin role if admin, and the configured iss and aud.
func (a *Authenticator) Sign(sub string, admin bool, ttl time.Duration) (string, error) {
	var roles []string
	if admin {
		roles = []string{"admin"}
	}
	return a.SignRoles(sub, roles, ttl)
}

// SignRoles returns an HS256 token for sub that expires after ttl, with
// roles as its roles claim (none: no claim; "admin" among them makes an
// admin), and the configured iss and aud.
func (a *Authenticator) SignRoles(sub string, roles []string, ttl time.Duration) (string, error) {
	if len(a.cfg.Secret) == 0 {
		return "", errors.New("no CAPACITY_JWT_SECRET to sign with")
	}
	if !registration.ValidUserIDLength(sub) {
		return "", errors.New("sub must be 1 to 128 characters")
	}
	if !validSubject(sub) {
		return "", errors.New("sub must be UTF-8 without control, format (such as bidi overrides and zero-width spaces) or separator characters")
	}
	now := a.now()
	c := Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   sub,
		Issuer:    a.cfg.Issuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if a.cfg.Audience != "" {
		c.Audience = jwt.ClaimStrings{a.cfg.Audience}
	}
	c.Roles = slices.Clone(roles)
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.cfg.Secret)
}

// Verify checks a token (see VerifyContext) with no deadline of its own.
func (a *Authenticator) Verify(token string) (registration.Caller, error) {
	return a.VerifyContext(context.Background(), token)
}

// VerifyContext parses and checks a token: HS256 with the secret (or the
// previous one during its grace period), or RS256/ES256 with a key of the
// JWK Set; exp present and not passed (10s leeway); exp, nbf and iat JSON
// numbers; iss and aud as configured; sub of 1 to 128 characters, none of
// them control, format or separator characters (see validSubject). ctx
// bounds a refetch of the JWK Set for an unknown kid.
//
// A token accepted before is answered from memory, without being parsed
// again, until its exp (without leeway) or for tokenCacheTTL at most, and
// only while the keys its algorithm and kid select now are the very keys
// its signature was checked against: a key retired from the JWK Set, or
// the previous secret's grace period ending, sends the token through the
// full verification again.
func (a *Authenticator) VerifyContext(ctx context.Context, token string) (registration.Caller, error) {
	now := a.now()
	if e, ok := a.verified.get(token, now); ok {
		if keys, err := a.keysOf(ctx, e.method, e.header); err == nil && sameKeys(keys.Keys, e.keys) {
			return e.caller, nil
		}
	}
	return a.verify(ctx, token, now)
}

// verify is VerifyContext's full verification; it remembers an accepted
// token.
func (a *Authenticator) verify(ctx context.Context, token string, now time.Time) (registration.Caller, error) {
	var c Claims
	var used verifiedToken
	keyfunc := func(t *jwt.Token) (any, error) {
		keys, err := a.keysOf(ctx, t.Method, t.Header)
		if err != nil {
			return nil, err
		}
		used.method, used.header, used.keys = t.Method, keyHeader(t.Method, t.Header), keys.Keys
		return keys, nil
	}
	if _, err := a.parser.ParseWithClaims(token, &c, keyfunc); err != nil {
		return registration.Caller{}, unauthenticated("invalid token")
	}
	if !registration.ValidUserIDLength(c.Subject) {
		return registration.Caller{}, unauthenticated("token sub must be 1 to 128 characters")
	}
	if !validSubject(c.Subject) {
		return registration.Caller{}, unauthenticated("token sub must be UTF-8 without control, format or separator characters")
	}
	roles := slices.Clip(c.Roles)
	caller := registration.Caller{UserID: c.Subject, Admin: slices.Contains(roles, "admin"), Roles: roles}
	if c.ExpiresAt != nil {
		used.caller, used.until = caller, c.ExpiresAt.Time
		if ttl := now.Add(tokenCacheTTL); ttl.Before(used.until) {
			used.until = ttl
		}
		a.verified.put(token, &used, now)
	}
	return caller, nil
}

// newParser returns the parser of every token: the algorithms accepted,
// exp required (with expLeeway), iss and aud as configured, times read
// from a.now at each parse. It keeps no state of a parse, so one serves
// every request.
func (a *Authenticator) newParser() *jwt.Parser {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(a.algorithms()),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(expLeeway),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
	}
	if a.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(a.cfg.Issuer))
	}
	if a.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(a.cfg.Audience))
	}
	return jwt.NewParser(opts...)
}

// algorithms returns the signing algorithms accepted: HS256 with a secret,
// RS256 and ES256 with a JWK Set.
func (a *Authenticator) algorithms() []string {
	var algs []string
	if len(a.cfg.Secret) > 0 {
		algs = append(algs, jwt.SigningMethodHS256.Alg())
	}
	if a.jwks != nil {
		algs = append(algs, jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg())
	}
	return algs
}

// keysOf picks the keys by the token's algorithm: the secrets for HS256,
// the JWK Set's keys of the matching type for RS256 and ES256 (by the kid
// of header, or all of them without one).
func (a *Authenticator) keysOf(ctx context.Context, method jwt.SigningMethod, header map[string]any) (jwt.VerificationKeySet, error) {
	if method == jwt.SigningMethodHS256 {
		return a.secrets(), nil
	}
	return a.publicKey(ctx, &jwt.Token{Method: method, Header: header})
}

// keyHeader returns the header fields that choose the keys of a token
// signed with method: alg and, when present, kid; none for HS256, whose
// keys are the secrets.
func keyHeader(method jwt.SigningMethod, h map[string]any) map[string]any {
	if method == jwt.SigningMethodHS256 {
		return nil
	}
	kept := map[string]any{"alg": h["alg"]}
	if kid, ok := h["kid"]; ok {
		kept["kid"] = kid
	}
	return kept
}

// secrets returns the HS256 keys: the secret and, until its grace period
// ends, the previous one. The lists are shared, made once: nothing
// changes them.
func (a *Authenticator) secrets() jwt.VerificationKeySet {
	if len(a.cfg.PreviousSecret) > 0 && a.now().Before(a.cfg.PreviousSecretUntil) {
		return a.hs256Rotating
	}
	return a.hs256
}

// validSubject reports whether sub is valid UTF-8 without control
// characters (PostgreSQL refuses NUL in text, and one such user id would
// fail a whole admission batch), format characters (category Cf: bidi
// overrides such as U+202E, zero-width spaces and joiners, U+FEFF, soft
// hyphens, which make one user id display as another) or line and
// paragraph separators.
func validSubject(sub string) bool {
	if !utf8.ValidString(sub) {
		return false
	}
	for _, r := range sub {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return false
		}
	}
	return true
}

func unauthenticated(msg string) error {
	return capacityd.Errorf(capacityd.EUnauthenticated, "%s", msg)
}

const callerKey = "capacityd.caller"

// authenticate is middleware for routes that need a token.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if caller, ok := c.Request().Context().Value(sessionCallerKey{}).(registration.Caller); ok {
			caller.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
			c.Set(callerKey, caller)
			return next(c)
		}
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return unauthenticated("missing or malformed Authorization header: want Bearer <token>")
		}
		caller, err := s.auth.VerifyContext(c.Request().Context(), strings.TrimSpace(token))
		if err != nil {
			return err
		}
		caller.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
		c.Set(callerKey, caller)
		return next(c)
	}
}

// requireAdmin is middleware, after authenticate, for admin routes.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !callerOf(c).Admin {
			return capacityd.Errorf(capacityd.EForbidden, "this route needs the admin role")
		}
		return next(c)
	}
}

func callerOf(c echo.Context) registration.Caller {
	caller, _ := c.Get(callerKey).(registration.Caller)
	return caller
}
