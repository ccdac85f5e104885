package checkin_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
)

func TestTicketVerifiesWithThePublishedKeySetAlone(t *testing.T) {
	old, err := checkin.NewKey(t0.Add(-time.Hour))
	require.NoError(t, err)
	ring := checkin.NewKeyring([]checkin.Key{old})
	before, err := ring.Sign(checkin.TicketClaims{Reg: "r_1", Act: "a_1", Iat: t0.Unix()})
	require.NoError(t, err)
	again, err := ring.Sign(checkin.TicketClaims{Reg: "r_1", Act: "a_1", Iat: t0.Unix()})
	require.NoError(t, err)
	assert.Equal(t, before, again, "the same registration gets the same ticket")

	// A rotation: the new key signs, the old one still verifies.
	fresh, err := checkin.NewKey(t0)
	require.NoError(t, err)
	ring.Set([]checkin.Key{old, fresh})
	after, err := ring.Sign(checkin.TicketClaims{Reg: "r_2", Act: "a_1", Iat: t0.Unix()})
	require.NoError(t, err)

	set, err := json.Marshal(ring.JWKS())
	require.NoError(t, err)
	kf, err := keyfunc.NewJWKSetJSON(set)
	require.NoError(t, err)
	for _, tok := range []string{before, after} {
		parsed, err := jwt.Parse(tok, kf.Keyfunc, jwt.WithValidMethods([]string{"EdDSA"}))
		require.NoError(t, err, "an outside JOSE library verifies it with the key set")
		claims := parsed.Claims.(jwt.MapClaims)
		assert.Contains(t, []any{"r_1", "r_2"}, claims["reg"])
		assert.Equal(t, "a_1", claims["act"])
		assert.Len(t, claims, 3, "reg, act and iat: nothing personal")
		c, err := ring.VerifyTicket(tok)
		require.NoError(t, err)
		assert.Equal(t, "a_1", c.Act)
	}
	assert.Equal(t, fresh.ID, headerKid(t, after))
	assert.Equal(t, old.ID, headerKid(t, before))
}

func headerKid(t *testing.T, tok string) string {
	p, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	require.NoError(t, err)
	assert.Equal(t, "EdDSA", p.Header["alg"])
	return p.Header["kid"].(string)
}

func TestVerifyTicketRefusesForgeriesAndUnknownKeys(t *testing.T) {
	k, err := checkin.NewKey(t0)
	require.NoError(t, err)
	ring := checkin.NewKeyring([]checkin.Key{k})
	tok, err := ring.Sign(checkin.TicketClaims{Reg: "r_1", Act: "a_1", Iat: t0.Unix()})
	require.NoError(t, err)
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
	for _, bad := range []string{"", "not-a-ticket", forged, parts[0] + "." + parts[1] + ".", strings.Repeat("a", 3000)} {
		_, err := ring.VerifyTicket(bad)
		assert.Equal(t, capacityd.EInvalidTicket, capacityd.ErrorCode(err), "%q", bad)
	}
	other, err := checkin.NewKey(t0)
	require.NoError(t, err)
	foreign, err := checkin.NewKeyring([]checkin.Key{other}).Sign(checkin.TicketClaims{Reg: "r_1", Act: "a_1", Iat: t0.Unix()})
	require.NoError(t, err)
	_, err = ring.VerifyTicket(foreign)
	assert.ErrorIs(t, err, checkin.ErrUnknownKey)

	statement, err := ring.SignAs(checkin.TicketClaims{Reg: "r_1", Act: "a_1", Iat: t0.Unix()}, checkin.StatementType)
	require.NoError(t, err)
	_, err = ring.VerifyTicket(statement)
	assert.Equal(t, capacityd.EInvalidTicket, capacityd.ErrorCode(err), "a statement is not a ticket")

	hs, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"reg": "r_1", "act": "a_1"}).SignedString([]byte("secret"))
	require.NoError(t, err)
	_, err = ring.VerifyTicket(hs)
	assert.Error(t, err, "only EdDSA tickets")
}

func TestVerifyTicketAnswersAsAFullVerification(t *testing.T) {
	k, err := checkin.NewKey(t0)
	require.NoError(t, err)
	ring := checkin.NewKeyring([]checkin.Key{k})
	tok, err := ring.Sign(checkin.TicketClaims{Reg: "r_1", Act: "a_1", Iat: t0.Unix()})
	require.NoError(t, err)
	signing, sig := splitSignature(t, tok)

	// Any bit of the signature changed: refused.
	for _, bit := range []int{0, 100, 255, 256, 400, 511} {
		bad := slices.Clone(sig)
		bad[bit/8] ^= 1 << (bit % 8)
		_, err := ring.VerifyTicket(signing + "." + base64.RawURLEncoding.EncodeToString(bad))
		assert.Equal(t, capacityd.EInvalidTicket, capacityd.ErrorCode(err), "bit %d", bit)
	}

	// Another key's signature under this key's kid: refused.
	other, err := checkin.NewKey(t0)
	require.NoError(t, err)
	impostor := jwt.NewWithClaims(jwt.SigningMethodEdDSA, checkin.TicketClaims{Reg: "r_1", Act: "a_1", Iat: t0.Unix()})
	impostor.Header["kid"], impostor.Header["typ"] = k.ID, "JWT"
	forged, err := impostor.SignedString(crypto.Signer(other.Private))
	require.NoError(t, err)
	_, err = ring.VerifyTicket(forged)
	assert.Equal(t, capacityd.EInvalidTicket, capacityd.ErrorCode(err))

	// A valid signature of the same ticket that is not the deterministic
	// one (another nonce, as a hedged signer would make): accepted, as
	// ed25519.Verify accepts it.
	hedged := signWithNonce(t, k.Private, []byte(signing))
	require.NotEqual(t, sig, hedged)
	require.True(t, ed25519.Verify(k.Private.Public().(ed25519.PublicKey), []byte(signing), hedged))
	c, err := ring.VerifyTicket(signing + "." + base64.RawURLEncoding.EncodeToString(hedged))
	require.NoError(t, err)
	assert.Equal(t, "r_1", c.Reg)
}

// splitSignature returns a compact JWS's signed part and its signature.
func splitSignature(t testing.TB, tok string) (string, []byte) {
	i := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	require.NoError(t, err)
	return tok[:i], sig
}

// signWithNonce signs msg as Ed25519 does (RFC 8032, 5.1.6) but with a
// random nonce in place of the one derived from the key and msg.
func signWithNonce(t testing.TB, priv ed25519.PrivateKey, msg []byte) []byte {
	h := sha512.Sum512(priv.Seed())
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	require.NoError(t, err)
	nonce := make([]byte, 64)
	_, err = rand.Read(nonce)
	require.NoError(t, err)
	r, err := edwards25519.NewScalar().SetUniformBytes(nonce)
	require.NoError(t, err)
	R := (&edwards25519.Point{}).ScalarBaseMult(r).Bytes()
	d := sha512.New()
	d.Write(R)
	d.Write(priv.Public().(ed25519.PublicKey))
	d.Write(msg)
	k, err := edwards25519.NewScalar().SetUniformBytes(d.Sum(nil))
	require.NoError(t, err)
	return append(R, edwards25519.NewScalar().MultiplyAdd(k, s, r).Bytes()...)
}

func TestQRCodeSVGIsAnImage(t *testing.T) {
	svg, err := checkin.QRCodeSVG("eyJhbGciOiJFZERTQSJ9.eyJyZWciOiJyXzEifQ.sig")
	require.NoError(t, err)
	var doc struct {
		XMLName xml.Name
		ViewBox string `xml:"viewBox,attr"`
	}
	require.NoError(t, xml.Unmarshal(svg, &doc))
	assert.Equal(t, "svg", doc.XMLName.Local)
	assert.NotEmpty(t, doc.ViewBox)
}

// BenchmarkVerifyTicket measures a ticket this service issued (the signature
// made again and compared) against one signed with another nonce (verified
// in full, as every ticket once was).
func BenchmarkVerifyTicket(b *testing.B) {
	k, err := checkin.NewKey(t0)
	require.NoError(b, err)
	ring := checkin.NewKeyring([]checkin.Key{k})
	own, err := ring.Sign(checkin.TicketClaims{Reg: "r_01JD00000000000000000003E9", Act: "a_01JD00000000000000000003E9", Iat: t0.Unix()})
	require.NoError(b, err)
	signing, _ := splitSignature(b, own)
	hedged := signing + "." + base64.RawURLEncoding.EncodeToString(signWithNonce(b, k.Private, []byte(signing)))
	for name, tok := range map[string]string{"issued": own, "other_nonce": hedged} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ring.VerifyTicket(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
