package httpapi

import (
	"errors"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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

// Authenticator signs and verifies HS256 tokens.
type Authenticator struct {
	secret []byte
	now    func() time.Time
}

// NewAuthenticator returns an Authenticator for secret, which must be at
// least MinSecretBytes long.
func NewAuthenticator(secret []byte) (*Authenticator, error) {
	if len(secret) < MinSecretBytes {
		return nil, errors.New("CAPACITY_JWT_SECRET must be at least 32 bytes")
	}
	return &Authenticator{secret: secret, now: time.Now}, nil
}

// Sign returns a token for sub that expires after ttl, with the admin role
// if admin.
func (a *Authenticator) Sign(sub string, admin bool, ttl time.Duration) (string, error) {
	if n := len(sub); n < 1 || n > registration.MaxUserIDLen {
		return "", errors.New("sub must be 1 to 128 characters")
	}
	now := a.now()
	c := Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   sub,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if admin {
		c.Roles = []string{"admin"}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.secret)
}

// Verify parses and checks a token: HS256 only, signed with the secret,
// exp present and not passed, sub of 1 to 128 characters.
func (a *Authenticator) Verify(token string) (registration.Caller, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return a.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(expLeeway),
		jwt.WithTimeFunc(a.now),
	)
	if err != nil {
		return registration.Caller{}, unauthenticated("invalid token")
	}
	if n := len(c.Subject); n < 1 || n > registration.MaxUserIDLen {
		return registration.Caller{}, unauthenticated("token sub must be 1 to 128 characters")
	}
	if !validSubject(c.Subject) {
		return registration.Caller{}, unauthenticated("token sub must be printable UTF-8")
	}
	return registration.Caller{UserID: c.Subject, Admin: slices.Contains(c.Roles, "admin")}, nil
}

// validSubject reports whether sub is valid UTF-8 without control
// characters: PostgreSQL refuses NUL in text, and one such user id would
// fail a whole admission batch.
func validSubject(sub string) bool {
	if !utf8.ValidString(sub) {
		return false
	}
	for _, r := range sub {
		if unicode.IsControl(r) {
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
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			return unauthenticated("missing or malformed Authorization header: want Bearer <token>")
		}
		caller, err := s.auth.Verify(strings.TrimSpace(token))
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
