package loadtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The identity provider's names, as the capacityd under test is told them
// (JWT_ISSUER, JWT_AUDIENCE).
const (
	idpIssuer   = "https://idp.loadtest.invalid/"
	idpAudience = "capacityd"
	idpKeyID    = "loadtest-rs256"
)

// identityProvider stands in for the identity provider of a real
// deployment: an RSA key (2048 bits, the least capacityd accepts for
// RS256) whose public half it serves as a JWK Set on the loopback
// interface, and with which it signs RS256 tokens.
type identityProvider struct {
	key *rsa.PrivateKey
	srv *http.Server
	// jwksURL is the JWK Set's address, for JWT_JWKS_URL.
	jwksURL string
}

// startIdentityProvider makes a key and serves its JWK Set until close.
func startIdentityProvider() (*identityProvider, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("loadtest: identity provider key: %w", err)
	}
	body, err := json.Marshal(map[string]any{"keys": []map[string]string{rsaJWK(idpKeyID, &key.PublicKey)}})
	if err != nil {
		return nil, fmt.Errorf("loadtest: identity provider key set: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loadtest: identity provider: %w", err)
	}
	p := &identityProvider{key: key, jwksURL: "http://" + ln.Addr().String() + "/.well-known/jwks.json"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *identityProvider) close() { _ = p.srv.Close() }

// rsaJWK returns the public JWK of an RS256 key.
func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	b64 := base64.RawURLEncoding.EncodeToString
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

// sign returns an RS256 token for sub, with the key's kid, the
// provider's iss and aud, and the admin role if admin, expiring after ttl.
func (p *identityProvider) sign(sub string, admin bool, ttl time.Duration) (string, error) {
	now := time.Now()
	c := jwt.MapClaims{"sub": sub, "iss": idpIssuer, "aud": idpAudience, "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
	if admin {
		c["roles"] = []string{"admin"}
	}
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	t.Header["kid"] = idpKeyID
	return t.SignedString(p.key)
}

// signMany signs n tokens of distinct users, sub(i) for the i-th, on
// every core: an RS256 signature costs about a millisecond of processor
// time, so that tens of thousands take seconds even so.
func (p *identityProvider) signMany(n int, sub func(i int) string, ttl time.Duration) ([]string, error) {
	out := make([]string, n)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += workers {
				out[i], errs[w] = p.sign(sub(i), false, ttl)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("loadtest: sign RS256 tokens: %w", err)
		}
	}
	return out, nil
}
