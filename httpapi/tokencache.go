package httpapi

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/physiciansnet/capacityd/internal/lru"
	"github.com/physiciansnet/capacityd/registration"
)

// Bounds of the verified-token cache: the entries kept and how long one is
// trusted at most.
const (
	tokenCacheEntries = 65_536
	tokenCacheTTL     = time.Minute
)

// verifiedToken is what a token's full verification found: its caller,
// until when that answer may be reused, and the keys its signature was
// checked against (with the algorithm and the header fields that chose
// them), so that a reuse can tell that those keys are still the ones a
// verification would use.
type verifiedToken struct {
	caller registration.Caller
	until  time.Time
	method jwt.SigningMethod
	header map[string]any // alg and, when present, kid; nil for HS256
	keys   []jwt.VerificationKey
}

// tokenCache remembers the tokens that passed a full verification, keyed
// by the SHA-256 of the exact token text (so that an entry's size does not
// depend on the token's), so that a client that polls with the same token
// is not parsed and checked again at every request. Only accepted tokens
// enter it (a refused token is refused afresh every time, and a token that
// differs in any byte is another key); an entry is not used past the
// token's exp or tokenCacheTTL, whichever comes first, and a full cache
// drops the entry put first.
type tokenCache struct {
	mu      sync.RWMutex
	entries *lru.Cache[[sha256.Size]byte, *verifiedToken]
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{entries: lru.New[[sha256.Size]byte, *verifiedToken](max)}
}

// get returns the entry of token if it is still within its time at now.
func (c *tokenCache) get(token string, now time.Time) (*verifiedToken, bool) {
	key := sha256.Sum256([]byte(token))
	c.mu.RLock()
	e, ok := c.entries.Peek(key) // Peek changes nothing: readers share the lock
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	return e, true
}

// put remembers a verified token.
func (c *tokenCache) put(token string, e *verifiedToken, now time.Time) {
	if !now.Before(e.until) {
		return
	}
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	c.entries.Add(key, e)
	c.mu.Unlock()
}

// sameKeys reports whether two key lists hold the same keys in the same
// order: HS256 secrets by their bytes, public keys by their Equal method.
func sameKeys(a, b []jwt.VerificationKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameKey(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sameKey(a, b jwt.VerificationKey) bool {
	if x, ok := a.([]byte); ok {
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	x, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && x.Equal(b)
}
