package checkin_test

import (
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

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
