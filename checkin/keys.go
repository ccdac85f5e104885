package checkin

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/physiciansnet/capacityd"
)

// Key is an Ed25519 key that signs tickets and attendance statements.
type Key struct {
	// ID is the key's kid: the first bytes of the public key's SHA-256,
	// in base64url, so that every instance names it alike.
	ID        string
	Private   ed25519.PrivateKey
	CreatedAt time.Time
}

// NewKey returns a fresh key.
func NewKey(now time.Time) (Key, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return Key{}, fmt.Errorf("checkin: new key: %w", err)
	}
	return KeyFromSeed(seed, now), nil
}

// KeyFromSeed returns the key of a 32-byte seed.
func KeyFromSeed(seed []byte, created time.Time) Key {
	priv := ed25519.NewKeyFromSeed(seed)
	sum := sha256.Sum256(priv.Public().(ed25519.PublicKey))
	return Key{ID: base64.RawURLEncoding.EncodeToString(sum[:12]), Private: priv, CreatedAt: created}
}

// Seed returns the key's 32-byte seed, what is stored.
func (k Key) Seed() []byte { return k.Private.Seed() }

// JWK is a public key as a JSON Web Key (RFC 8037).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// JWKSet is the published key set.
type JWKSet struct {
	Keys []JWK `json:"keys"`
}

// Keyring holds the keys this instance knows: the newest signs, every one
// verifies. It is safe for concurrent use.
type Keyring struct {
	mu   sync.RWMutex
	keys []Key // newest first
}

// NewKeyring returns a keyring of keys (any order).
func NewKeyring(keys []Key) *Keyring {
	k := &Keyring{}
	k.Set(keys)
	return k
}

// Set replaces the keys.
func (k *Keyring) Set(keys []Key) {
	keys = slices.Clone(keys)
	slices.SortStableFunc(keys, func(a, b Key) int { return b.CreatedAt.Compare(a.CreatedAt) })
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
}

// Len returns how many keys the keyring holds.
func (k *Keyring) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.keys)
}

// signing returns the newest key.
func (k *Keyring) signing() (Key, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if len(k.keys) == 0 {
		return Key{}, errors.New("checkin: no signing key")
	}
	return k.keys[0], nil
}

// key returns the key named kid.
func (k *Keyring) key(kid string) (Key, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, key := range k.keys {
		if key.ID == kid {
			return key, true
		}
	}
	return Key{}, false
}

// Knows reports whether kid names one of the keys.
func (k *Keyring) Knows(kid string) bool {
	_, ok := k.key(kid)
	return ok
}

// JWKS returns the public keys as a JWK Set, newest first.
func (k *Keyring) JWKS() JWKSet {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := JWKSet{Keys: make([]JWK, 0, len(k.keys))}
	for _, key := range k.keys {
		out.Keys = append(out.Keys, JWK{Kty: "OKP", Crv: "Ed25519", Kid: key.ID, Alg: "EdDSA", Use: "sig",
			X: base64.RawURLEncoding.EncodeToString(key.Private.Public().(ed25519.PublicKey))})
	}
	return out
}

// StatementType is the typ header of an attendance statement: signed
// with the same keys as tickets, it is never taken for one.
const StatementType = "capacityd-attendance+jwt"

// Sign returns claims as a compact JWS signed with the newest key
// (EdDSA, with its kid): a ticket.
func (k *Keyring) Sign(claims jwt.Claims) (string, error) { return k.SignAs(claims, "JWT") }

// SignAs is Sign with the typ header given (StatementType for an
// attendance statement).
func (k *Keyring) SignAs(claims jwt.Claims, typ string) (string, error) {
	key, err := k.signing()
	if err != nil {
		return "", err
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"], t.Header["typ"] = key.ID, typ
	return t.SignedString(crypto.Signer(key.Private))
}

// TicketClaims are a ticket's payload: the registration and its activity,
// nothing personal.
type TicketClaims struct {
	Reg string `json:"reg"`
	Act string `json:"act"`
	Iat int64  `json:"iat"`
}

// GetExpirationTime and the other jwt.Claims methods: a ticket has no
// expiry, issuer, audience or subject; whether it lets anyone in is
// decided from its registration's state at the door.
func (TicketClaims) GetExpirationTime() (*jwt.NumericDate, error) { return nil, nil }

// GetIssuedAt implements jwt.Claims.
func (c TicketClaims) GetIssuedAt() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(c.Iat, 0)), nil
}

// GetNotBefore implements jwt.Claims.
func (TicketClaims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }

// GetIssuer implements jwt.Claims.
func (TicketClaims) GetIssuer() (string, error) { return "", nil }

// GetSubject implements jwt.Claims.
func (TicketClaims) GetSubject() (string, error) { return "", nil }

// GetAudience implements jwt.Claims.
func (TicketClaims) GetAudience() (jwt.ClaimStrings, error) { return nil, nil }

// MaxTicketLen bounds a scanned ticket.
const MaxTicketLen = 2048

// InvalidTicket is the refusal of a ticket this service did not issue.
func InvalidTicket(why string) error {
	return capacityd.Errorf(capacityd.EInvalidTicket, "the ticket is not valid: %s", why)
}

// ErrUnknownKey means a ticket names a key the keyring does not hold (it
// may be a key another instance made since: reload and try again).
var ErrUnknownKey = errors.New("checkin: unknown key")

// ticketParser reads a ticket's segments; VerifyTicket checks the
// signature itself (see signedBy).
var ticketParser = jwt.NewParser()

// VerifyTicket checks a ticket's signature and returns its claims; an
// unknown kid returns ErrUnknownKey, anything else wrong InvalidTicket.
func (k *Keyring) VerifyTicket(ticket string) (TicketClaims, error) {
	if len(ticket) > MaxTicketLen {
		return TicketClaims{}, InvalidTicket("too long")
	}
	var claims TicketClaims
	t, parts, err := ticketParser.ParseUnverified(ticket, &claims)
	if err != nil || t.Method != jwt.SigningMethodEdDSA || t.Header["typ"] == StatementType {
		// An attendance statement, signed with the same keys, is not a ticket.
		return TicketClaims{}, InvalidTicket("malformed or wrongly signed")
	}
	kid, _ := t.Header["kid"].(string)
	key, ok := k.key(kid)
	switch {
	case !ok:
		return TicketClaims{}, ErrUnknownKey
	case !signedBy(key, parts[0]+"."+parts[1], t.Signature):
		return TicketClaims{}, InvalidTicket("malformed or wrongly signed")
	case claims.Reg == "" || claims.Act == "":
		return TicketClaims{}, InvalidTicket("it names no registration")
	}
	return claims, nil
}

// signedBy reports whether sig is key's Ed25519 signature of msg.
//
// Ed25519 signing is deterministic (RFC 8032): the service's own signature
// of msg, which its key makes in about half the time a verification takes,
// is the one a ticket it issued carries. A signature equal to it, compared
// in constant time so that a forger learns nothing byte by byte, is valid
// by construction; any other is verified in full, so that the answer is
// always ed25519.Verify's.
func signedBy(key Key, msg string, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize {
		return false
	}
	if subtle.ConstantTimeCompare(ed25519.Sign(key.Private, []byte(msg)), sig) == 1 {
		return true
	}
	return ed25519.Verify(key.Private.Public().(ed25519.PublicKey), []byte(msg), sig)
}

// StoredKey is a key as the database keeps it: its seed sealed.
type StoredKey struct {
	ID        string
	Sealed    []byte
	CreatedAt time.Time
}

// Sealer protects key seeds at rest (the webhook secrets' sealer:
// AES-256-GCM with WEBHOOK_SECRET_KEY, or in clear without one).
type Sealer interface {
	Seal(id string, key []byte) ([]byte, error)
	Open(id string, stored []byte) ([]byte, error)
}

// SealKey returns k as stored.
func SealKey(s Sealer, k Key) (StoredKey, error) {
	sealed, err := s.Seal("checkin-key:"+k.ID, k.Seed())
	return StoredKey{ID: k.ID, Sealed: sealed, CreatedAt: k.CreatedAt}, err
}

// openKey returns the key of a stored one.
func openKey(s Sealer, sk StoredKey) (Key, error) {
	seed, err := s.Open("checkin-key:"+sk.ID, sk.Sealed)
	if err != nil {
		return Key{}, fmt.Errorf("checkin: key %s: %w", sk.ID, err)
	}
	if len(seed) != ed25519.SeedSize {
		return Key{}, fmt.Errorf("checkin: key %s: a seed of %d bytes", sk.ID, len(seed))
	}
	return KeyFromSeed(seed, sk.CreatedAt.UTC()), nil
}
