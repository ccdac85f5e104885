package httpapi_test

import (
	"encoding/csv"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// The tests of this file run the HTTP edge on fakes of the services it
// consumes: no PostgreSQL, no Redis, milliseconds each.

func TestEdgeAuthenticatesAndAuthorises(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	require.Equal(t, http.StatusUnauthorized, e.do(t, "GET", path, "", nil).Status, "no token")
	res := e.do(t, "GET", path, e.token(t, "alice", false), nil)
	require.Equal(t, http.StatusForbidden, res.Status, "a user on an admin route")
	require.Equal(t, "forbidden", res.ErrorCode())
	require.Equal(t, http.StatusOK, e.do(t, "GET", path, e.token(t, "root", true), nil).Status, "an admin")
	require.Equal(t, http.StatusOK, e.do(t, "GET", path, roleToken(t, "ops", "admin"), nil).Status, "the admin role")
	require.Equal(t, http.StatusForbidden, e.do(t, "GET", path, roleToken(t, "ops", "viewer"), nil).Status, "another role")
	for name, tok := range badTokens(t) {
		res := e.do(t, "GET", path, tok, nil)
		require.Equal(t, http.StatusUnauthorized, res.Status, "%s: %s", name, res.Body)
		require.Equal(t, "unauthenticated", res.ErrorCode(), name)
	}
}

func TestEdgeMapsDomainErrorsToStatuses(t *testing.T) {
	t.Parallel()
	for code, status := range map[string]int{
		capacityd.EInvalid: 400, capacityd.ENotFound: 404, capacityd.EForbidden: 403,
		capacityd.EActivityFull: 409, capacityd.EAlreadyRegistered: 409, capacityd.ELimitReached: 409,
		capacityd.ERegistrationClosed: 409, capacityd.EAdmissionRequired: 403, capacityd.EIdempotencyConflict: 409,
		capacityd.ERateLimited: 429, capacityd.EUnavailable: 503,
	} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			e := startEdge(t)
			err := capacityd.Errorf(code, "the fake says %s", code)
			err.RegistrationID, err.RegistrationIDs = fakeRegID, []string{fakeRegID} // what those codes carry
			e.regs.err = err
			res := e.do(t, "POST", "/v1/activities/"+fakeActivityID+"/registrations", e.token(t, "alice", false), `{}`)
			require.Equal(t, status, res.Status, "%s", res.Body)
			require.Equal(t, code, res.ErrorCode())
			if status == 503 || status == 429 {
				require.NotEmpty(t, res.Header.Get("Retry-After"))
			}
		})
	}
	// A 500 is documented on no route, so this one exchange goes around
	// the description's check.
	e := startEdge(t)
	e.regs.err = errors.New("a cause nobody may see")
	req, err := http.NewRequest("GET", e.URL+"/v1/activities/"+fakeActivityID, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.token(t, "root", true))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.JSONEq(t, `{"error":{"code":"internal","message":"internal error"}}`, string(body), "the cause stays in the log")
}

func TestEdgeDecodesStrictly(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	admin := e.token(t, "root", true)
	for name, body := range map[string]string{
		"unknown field":    `{"title":"x","capacity":1,"colour":"red"}`,
		"trailing data":    `{"title":"x","capacity":1} {}`,
		"wrong type":       `{"title":"x","capacity":"1"}`,
		"duplicate key":    `{"title":"x","title":"y","capacity":1}`,
		"not an object":    `[1]`,
		"truncated":        `{"title":"x"`,
		"missing capacity": `{"title":"x"}`,
	} {
		res := e.do(t, "POST", "/v1/activities", admin, body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", name, res.Body)
		require.Equal(t, "invalid_request", res.ErrorCode(), name)
	}
	res := e.do(t, "POST", "/v1/activities", admin, `{"title":"x","capacity":4}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

func TestEdgeSignupReplayAndIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	user := e.token(t, "alice", false)
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	res := e.do(t, "POST", path, user, `{}`, "Idempotency-Key", "k1")
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Empty(t, res.Header.Get("Idempotent-Replayed"))
	e.regs.replayed = true
	res = e.do(t, "POST", path, user, `{}`, "Idempotency-Key", "k1")
	require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"), "%s", res.Body)
	require.Equal(t, "k1", e.regs.signups[1].IdempotencyKey)
	require.Equal(t, "alice", e.regs.signups[1].Caller.UserID)
	res = e.do(t, "POST", path, user, `{}`, "Idempotency-Key", "k1", "Idempotency-Key", "k2")
	require.Equal(t, http.StatusBadRequest, res.Status, "a second key")
	require.Len(t, e.regs.signups, 2, "a refused request reaches no service")
}

func TestEdgeReadsPaginationParams(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	admin := e.token(t, "root", true)
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	for _, q := range []string{"?limit=0", "?limit=abc", "?limit=100000", "?cursor=zzz", "?colour=red"} {
		res := e.do(t, "GET", path+q, admin, nil)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", q, res.Body)
		require.Equal(t, "invalid_request", res.ErrorCode(), q)
	}
	require.Empty(t, e.regs.listed, "a refused request reaches no service")
	res := e.do(t, "GET", path+"?limit=5&status=approved", admin, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, 5, e.regs.listed[0].Limit)
	require.EqualValues(t, "approved", e.regs.listed[0].Status)
}

func TestEdgeAnswersUnknownRoutesAndIDsInTheErrorShape(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	res := e.do(t, "GET", "/v1/activities/not-an-id", "", nil)
	require.Equal(t, http.StatusNotFound, res.Status)
	require.Equal(t, "not_found", res.ErrorCode())
	res = e.do(t, "GET", "/v1/activities/"+fakeOtherID, e.token(t, "root", true), nil)
	require.Equal(t, http.StatusNotFound, res.Status)
	require.Equal(t, "not_found", res.ErrorCode())
	res = e.do(t, "DELETE", "/v1/activities/"+fakeActivityID, e.token(t, "root", true), nil)
	require.Equal(t, http.StatusMethodNotAllowed, res.Status)
	require.Equal(t, "method_not_allowed", res.ErrorCode())
}

func TestEdgeExportsCSVWithItsHeaders(t *testing.T) {
	t.Parallel()
	e := startEdge(t)
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	e.regs.exported = []registration.Registration{{ID: fakeRegID, ActivityID: fakeActivityID, UserID: "alice",
		Status: registration.Approved, Seats: 2, Metadata: []byte(`{"seat":"front, \"left\""}`), CreatedAt: at, UpdatedAt: at}}
	path := "/v1/activities/" + fakeActivityID + "/registrations.csv"
	require.Equal(t, http.StatusForbidden, e.do(t, "GET", path, e.token(t, "alice", false), nil).Status)
	res := e.do(t, "GET", path, e.token(t, "root", true), nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "text/csv; charset=utf-8", res.Header.Get("Content-Type"))
	require.Contains(t, res.Header.Get("Content-Disposition"), "attachment")
	recs, err := csv.NewReader(strings.NewReader(string(res.Body))).ReadAll()
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"id", "user_id", "status", "created_at", "updated_at", "expires_at", "metadata", "seats", "block_id"},
		{fakeRegID, "alice", "approved", "2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z", "", `{"seat":"front, \"left\""}`, "2", ""},
	}, recs)
	res = e.do(t, "GET", "/v1/activities/"+fakeOtherID+"/registrations.csv", e.token(t, "root", true), nil)
	require.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	require.Equal(t, "not_found", res.ErrorCode())
}
