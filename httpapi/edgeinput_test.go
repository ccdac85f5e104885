package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestEdgeRefusesTextFieldsThatAreNotPlainText(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	admin := e.token(t, "root", true)
	for name, body := range map[string]any{
		"invalid UTF-8":      []byte("{\"title\":\"a\xffb\",\"capacity\":1}"),
		"lone high escape":   `{"title":"a\ud800b","capacity":1}`,
		"lone low escape":    `{"title":"a\udc00","capacity":1}`,
		"reversed pair":      `{"title":"\udc00\ud800","capacity":1}`,
		"tab":                `{"title":"a\tb","capacity":1}`,
		"line feed":          `{"title":"a\nb","capacity":1}`,
		"C1 control":         "{\"title\":\"a\u0085b\",\"capacity\":1}",
		"right-to-left mark": "{\"title\":\"a\u200fb\",\"capacity\":1}",
		"RLO override":       `{"title":"a\u202eb","capacity":1}`,
		"isolate":            "{\"title\":\"\u2066a\u2069\",\"capacity\":1}",
		"byte order mark":    `{"title":"\ufeffa","capacity":1}`,
		"in a pool id":       `{"title":"a","capacity":1,"pools":["p\u202e"]}`,
	} {
		res := e.do(t, "POST", "/v1/activities", admin, body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", name, res.Body)
		require.Equal(t, "invalid_request", res.ErrorCode(), name)
	}
	for name, title := range map[string]string{
		"accents": "Café à l'Opéra", "a family emoji with joiners": "👨\u200d👩\u200d👧", "a pair of escapes": `\ud83d\ude00`,
	} {
		res := e.do(t, "POST", "/v1/activities", admin, `{"title":"`+title+`","capacity":1}`)
		require.Equal(t, http.StatusCreated, res.Status, "%s: %s", name, res.Body)
	}
}

func TestEdgeKeepsMetadataAsSentButValid(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	user := e.token(t, "alice", false)
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	res := e.do(t, "POST", path, user, `{"metadata":{"note":"line one\nline two\u202e"}}`)
	require.Equal(t, http.StatusCreated, res.Status, "metadata is the client's own: %s", res.Body)
	for name, body := range map[string]any{
		"invalid UTF-8": []byte("{\"metadata\":{\"n\":\"\xff\"}}"),
		"lone escape":   `{"metadata":{"n":"\ud800"}}`,
	} {
		res := e.do(t, "POST", path, user, body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", name, res.Body)
	}
}

func TestEdgeQueueJoinTakesAnEmptyBodyOnly(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	user := e.token(t, "alice", false)
	path := "/v1/activities/" + fakeActivityID + "/queue"
	for _, body := range []any{nil, `{}`, " "} {
		res := e.do(t, "POST", path, user, body)
		require.Equal(t, http.StatusOK, res.Status, "%q: %s", body, res.Body)
	}
	for _, body := range []string{`{`, `[1]`, `{"seats":2}`, `"x"`, `{} {}`} {
		res := e.do(t, "POST", path, user, body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%q: %s", body, res.Body)
		require.Equal(t, "invalid_request", res.ErrorCode(), body)
	}
	require.Equal(t, 3, e.queues.joined, "a refused body joins no line")
}

func TestEdgeRefusesASecondAdmissionToken(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	user := e.token(t, "alice", false)
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	res := e.do(t, "POST", path, user, `{}`, "Admission-Token", "one", "Admission-Token", "two")
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	require.Equal(t, "invalid_request", res.ErrorCode())
	require.Empty(t, e.regs.signups, "a refused request reaches no service")
	res = e.do(t, "POST", path, user, `{}`, "Admission-Token", "one")
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "one", e.regs.signups[0].AdmissionToken)
}

// TestEdgeForgetsAPlaceWhoseTokenWasRefused: a signup refused
// admission_required with an Admission-Token makes this instance forget
// the caller's place, so that its next read asks the authority; other
// refusals, and refusals without a token, forget nothing.
func TestEdgeForgetsAPlaceWhoseTokenWasRefused(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	user := e.token(t, "alice", false)
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	e.regs.mu.Lock()
	e.regs.err = capacityd.Errorf(capacityd.EAdmissionRequired, "the admission token was used")
	e.regs.mu.Unlock()
	res := e.do(t, "POST", path, user, `{}`)
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Empty(t, e.queues.forgotten, "no token sent: no place to forget")
	res = e.do(t, "POST", path, user, `{}`, "Admission-Token", "adm_used")
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	require.Equal(t, []string{fakeActivityID + "/alice"}, e.queues.forgotten)

	e.regs.mu.Lock()
	zero := 0
	e.regs.err = &capacityd.Error{Code: capacityd.EActivityFull, Message: "no seats left", Remaining: &zero}
	e.regs.mu.Unlock()
	res = e.do(t, "POST", path, user, `{}`, "Admission-Token", "adm_live")
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	require.Len(t, e.queues.forgotten, 1, "a refusal for another reason keeps the place")
}

// rawToken signs the claims JSON payload as it is (golang-jwt would
// marshal a map, which cannot name a key twice).
func rawToken(t *testing.T, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(signing, []byte(apptest.Secret))
	require.NoError(t, err)
	return signing + "." + enc(sig)
}

func TestEdgeRefusesATokenThatNamesAClaimTwice(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	res := e.do(t, "GET", path, rawToken(t, `{"sub":"mallory","exp":`+exp+`,"roles":["admin"]}`), nil)
	require.Equal(t, http.StatusOK, res.Status, "the raw token is well signed: %s", res.Body)
	for name, payload := range map[string]string{
		"roles twice": `{"sub":"mallory","exp":` + exp + `,"roles":[],"roles":["admin"]}`,
		"sub twice":   `{"sub":"alice","sub":"mallory","exp":` + exp + `,"roles":["admin"]}`,
		"exp twice":   `{"sub":"mallory","exp":1,"exp":` + exp + `,"roles":["admin"]}`,
		"escaped key": `{"sub":"mallory","exp":` + exp + `,"roles":[],"r\u006fles":["admin"]}`,
	} {
		res := e.do(t, "GET", path, rawToken(t, payload), nil)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s: %s", name, res.Body)
		require.Equal(t, "unauthenticated", res.ErrorCode(), name)
	}
}

func TestEdgeSeatsShowReserved(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	var s struct{ Capacity, Taken, Reserved, Remaining int }
	res := e.do(t, "GET", "/v1/activities/"+fakeActivityID+"/seats", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res.JSON(t, &s)
	require.Equal(t, 2, s.Reserved)
	require.Equal(t, s.Capacity, s.Taken+s.Reserved+s.Remaining, "they add up: %s", res.Body)
}
