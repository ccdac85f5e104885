package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// sign returns a token of claims signed with method and key.
func signJWT(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return tok
}

// badTokens returns every kind of token the service must refuse with 401.
func badTokens(t *testing.T) map[string]string {
	t.Helper()
	secret := []byte(apptest.Secret)
	exp := time.Now().Add(time.Hour).Unix()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	valid := signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": exp})
	parts := strings.Split(valid, ".")
	enc := base64.RawURLEncoding.EncodeToString
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "mallory", "exp": exp, "roles": []string{"admin"}}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	return map[string]string{
		"wrong secret":        signJWT(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-another"), jwt.MapClaims{"sub": "mallory", "exp": exp}),
		"alg none":            none,
		"alg none no dot":     strings.TrimSuffix(none, "."),
		"alg none forged hdr": enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".",
		"alg NONE with sig":   enc([]byte(`{"alg":"NONE","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2],
		"HS512 right secret":  signJWT(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "mallory", "exp": exp}),
		"HS384 right secret":  signJWT(t, jwt.SigningMethodHS384, secret, jwt.MapClaims{"sub": "mallory", "exp": exp}),
		"RS256":               signJWT(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"sub": "mallory", "exp": exp}),
		"ES256":               signJWT(t, jwt.SigningMethodES256, ecKey, jwt.MapClaims{"sub": "mallory", "exp": exp}),
		"HS256 header on RS":  enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + parts[1] + "." + strings.Split(signJWT(t, jwt.SigningMethodRS256, rsaKey, jwt.MapClaims{"sub": "mallory", "exp": exp}), ".")[2],
		"expired an hour ago": signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": time.Now().Add(-time.Hour).Unix()}),
		"expired 31s ago":     signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": time.Now().Add(-31 * time.Second).Unix()}),
		"no exp":              signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory"}),
		"exp as string":       signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": "tomorrow"}),
		"exp numeric string":  signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": strconv.FormatInt(exp, 10)}),
		"exp null":            signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": nil}),
		"exp bool":            signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": true}),
		"nbf numeric string":  signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": exp, "nbf": "1"}),
		"nbf object":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": exp, "nbf": map[string]int{"t": 1}}),
		"iat numeric string":  signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": exp, "iat": "1"}),
		"exp huge":            signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": 1e300}),
		"not yet valid":       signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": exp, "nbf": time.Now().Add(time.Hour).Unix()}),
		"no sub":              signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp}),
		"empty sub":           signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "", "exp": exp}),
		"sub number":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": 42, "exp": exp}),
		"over-long sub":       signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": strings.Repeat("s", 129), "exp": exp}),
		"129-character sub":   signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": strings.Repeat("é", 129), "exp": exp}),
		"nul in sub":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\x00lory", "exp": exp}),
		"RLO in sub":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\u202elory", "exp": exp}),
		"LRI in sub":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "\u2066mallory", "exp": exp}),
		"zero-width in sub":   signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\u200blory", "exp": exp}),
		"ZWJ in sub":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\u200dlory", "exp": exp}),
		"BOM in sub":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "\ufeffmallory", "exp": exp}),
		"soft hyphen in sub":  signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\u00adlory", "exp": exp}),
		"line sep in sub":     signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\u2028lory", "exp": exp}),
		"DEL in sub":          signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\u007flory", "exp": exp}),
		"C1 control in sub":   signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\u0085lory", "exp": exp}),
		"tag char in sub":     signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory\U000e0041", "exp": exp}),
		"newline in sub":      signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mal\nlory", "exp": exp}),
		"roles not an array":  signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "mallory", "exp": exp, "roles": "admin"}),
		"tampered payload":    parts[0] + "." + enc([]byte(`{"sub":"mallory","exp":99999999999,"roles":["admin"]}`)) + "." + parts[2],
		"signature stripped":  parts[0] + "." + parts[1] + ".",
		"two parts":           parts[0] + "." + parts[1],
		"four parts":          valid + ".x",
		"garbage":             "garbage",
		"dots":                "...",
		"bad base64":          "!!!.@@@.###",
		"json header garbage": enc([]byte(`{"alg":`)) + "." + parts[1] + "." + parts[2],
		"huge token":          strings.Repeat("a", 6000) + "." + strings.Repeat("b", 6000) + "." + strings.Repeat("c", 100),
	}
}

func TestBadTokensAre401(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	signup := "/v1/activities/" + f.activity + "/registrations"
	for name, tok := range badTokens(t) {
		for _, rt := range []struct{ method, path string }{
			{http.MethodPost, signup},
			{http.MethodGet, "/v1/registrations/" + f.reg},
			{http.MethodPost, "/v1/activities"},
		} {
			r := f.inst.MustDo(t, rt.method, rt.path, "", `{}`, "Authorization", "Bearer "+tok)
			t.Run(name+" "+rt.path, func(t *testing.T) { requireErrorShape(t, r, 401, "unauthenticated") })
		}
	}
	// Headers that are not "Bearer <token>".
	valid := f.inst.Token(t, "sweep-user", false)
	for name, h := range map[string]string{
		"no scheme":        valid,
		"basic":            "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p")),
		"bearer empty":     "Bearer ",
		"bearer only":      "Bearer",
		"token scheme":     "Token " + valid,
		"bearer no space":  "Bearer" + valid,
		"bearer and junk":  "Bearer " + valid + " junk",
		"empty header":     "",
		"bearer two":       "Bearer " + valid + "," + valid,
		"bearer tab token": "Bearer\t" + valid,
	} {
		r := f.inst.MustDo(t, http.MethodPost, signup, "", `{}`, "Authorization", h)
		t.Run(name, func(t *testing.T) { requireErrorShape(t, r, 401, "unauthenticated") })
	}
	// The sweep must not have admitted anyone.
	act, err := f.inst.Public().GetActivity(t.Context(), f.activity)
	require.NoError(t, err)
	require.Equal(t, 1, act.Taken)
}

func TestExpLeewayIsAtMost30Seconds(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	secret := []byte(apptest.Secret)
	at := func(d time.Duration) int {
		tok := signJWT(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "leeway", "exp": time.Now().Add(d).Unix()})
		_, err := client.New(f.inst.URL, tok, apptest.Client).GetRegistration(t.Context(), f.reg)
		return apptest.Refusal(t, err).Status
	}
	// Another user's registration: 404 means the token was accepted.
	require.Equal(t, http.StatusNotFound, at(time.Minute))
	require.Equal(t, http.StatusNotFound, at(-2*time.Second), "a small clock skew is tolerated")
	require.Equal(t, http.StatusUnauthorized, at(-31*time.Second), "leeway must be at most 30s")
	require.Equal(t, http.StatusUnauthorized, at(-10*time.Minute))
}

// TestSubIsCountedInCharacters signs up a user whose id is 128
// characters of two bytes each: a sub's length is counted in characters,
// as the documented limit and the schema count it.
func TestSubIsCountedInCharacters(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	sub := strings.Repeat("é", 128)
	tok := f.inst.Token(t, sub, false) // minted as capacityd token mints them
	res, err := client.New(f.inst.URL, tok, apptest.Client).Signup(t.Context(), f.activity, client.SignupOptions{})
	require.NoError(t, err)
	require.Equal(t, sub, res.Registration.UserID)
}

func TestOwnerChecksAnswer404ForOthers(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	other := f.inst.Token(t, "someone-else", false)
	path := "/v1/registrations/" + f.reg
	requireErrorShape(t, f.inst.MustDo(t, http.MethodGet, path, other, nil), 404, "not_found")
	requireErrorShape(t, f.inst.MustDo(t, http.MethodPost, path+"/cancel", other, `{}`), 404, "not_found")
	// The same answer as for a registration that does not exist.
	requireErrorShape(t, f.inst.MustDo(t, http.MethodGet, "/v1/registrations/"+f.missingR, other, nil), 404, "not_found")
	// Nothing changed; the owner and an admin still see it occupying.
	reg, err := client.New(f.inst.URL, f.user, apptest.Client).GetRegistration(t.Context(), f.reg)
	require.NoError(t, err)
	require.Equal(t, client.Pending, reg.Status)
	_, err = client.New(f.inst.URL, f.admin, apptest.Client).GetRegistration(t.Context(), f.reg)
	require.NoError(t, err)
	// A user token claiming a role other than admin is still a user.
	tok := signJWT(t, jwt.SigningMethodHS256, []byte(apptest.Secret), jwt.MapClaims{
		"sub": "x", "exp": time.Now().Add(time.Hour).Unix(), "roles": []string{"Admin", "admin "},
	})
	requireErrorShape(t, f.inst.MustDo(t, http.MethodPost, "/v1/activities", tok, `{"title":"a","capacity":1}`), 403, "forbidden")
}
