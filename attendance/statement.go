package attendance

import (
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// StatementClaims are an attendance statement's payload: who attended
// which activity, when it took place, and the time they spent inside.
// Anyone verifies it with the published check-in keys
// (GET /v1/checkin/keys) alone; its typ header is checkin.StatementType,
// and a door refuses it as a ticket.
type StatementClaims struct {
	Reg string `json:"reg"`
	Act string `json:"act"`
	// Sub is the registration's user.
	Sub string `json:"sub"`
	// StartsAt and EndsAt are the activity's times, RFC 3339.
	StartsAt string  `json:"starts_at"`
	EndsAt   string  `json:"ends_at"`
	Seconds  int64   `json:"seconds"`
	Percent  float64 `json:"percent"`
	Eligible bool    `json:"eligible"`
	// Iat is when the statement was signed, in Unix seconds.
	Iat int64 `json:"iat"`
}

// NewStatement returns the claims of a registration's attendance item of
// a timed activity a, signed at now.
func NewStatement(a Activity, it Item, now time.Time) StatementClaims {
	c := StatementClaims{Reg: it.RegistrationID, Act: a.ID, Sub: it.UserID, Eligible: it.Eligible, Iat: now.Unix()}
	if a.Timed() {
		c.StartsAt, c.EndsAt = a.StartsAt.UTC().Format(time.RFC3339Nano), a.EndsAt.UTC().Format(time.RFC3339Nano)
	}
	if it.Seconds != nil {
		c.Seconds = *it.Seconds
	}
	if it.Percent != nil {
		c.Percent = *it.Percent
	}
	return c
}

// GetExpirationTime implements jwt.Claims: a statement does not expire.
func (StatementClaims) GetExpirationTime() (*jwt.NumericDate, error) { return nil, nil }

// GetIssuedAt implements jwt.Claims.
func (c StatementClaims) GetIssuedAt() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(c.Iat, 0)), nil
}

// GetNotBefore implements jwt.Claims.
func (StatementClaims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }

// GetIssuer implements jwt.Claims.
func (StatementClaims) GetIssuer() (string, error) { return "", nil }

// GetSubject implements jwt.Claims: the registration's user.
func (c StatementClaims) GetSubject() (string, error) { return c.Sub, nil }

// GetAudience implements jwt.Claims.
func (StatementClaims) GetAudience() (jwt.ClaimStrings, error) { return nil, nil }
