package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// TestMethodNotAllowedHasItsOwnCodeAndAllow checks that a known path with
// a method it does not serve is 405 method_not_allowed, with an Allow
// header listing the methods it serves.
func TestMethodNotAllowedHasItsOwnCodeAndAllow(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	id := inst.CreateActivity(t, "methods", 3)
	cases := []struct {
		method, path string
		allow        []string
	}{
		{http.MethodDelete, "/v1/activities/" + id, []string{"GET", "PATCH"}},
		{http.MethodPut, "/v1/activities", []string{"POST"}},
		{http.MethodPost, "/v1/activities/" + id + "/seats", []string{"GET"}},
		{http.MethodDelete, "/v1/notes/n1/views", []string{"POST"}},
		{http.MethodPost, "/healthz", []string{"GET"}},
		{http.MethodPut, "/openapi.yaml", []string{"GET"}},
	}
	for _, tc := range cases {
		r := inst.MustDo(t, tc.method, tc.path, admin, nil)
		requireErrorShape(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		allow := strings.Split(r.Header.Get("Allow"), ", ")
		for _, m := range tc.allow {
			require.Contains(t, allow, m, "%s %s: Allow %q", tc.method, tc.path, allow)
		}
		require.NotContains(t, allow, tc.method, "%s %s", tc.method, tc.path)
		require.Contains(t, string(r.Body), tc.method, "the message names the method")
	}
}

// TestAlreadyRegisteredCarriesTheIDOnceInsideTheError checks the shape of
// already_registered, fresh and replayed.
func TestAlreadyRegisteredCarriesTheIDOnceInsideTheError(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "twice", 3)
	tok := inst.Token(t, "alice", false)
	path := "/v1/activities/" + id + "/registrations"
	reg := inst.MustSignup(t, id, "alice")

	for _, key := range []string{"", "again-1"} {
		var headers []string
		if key != "" {
			headers = []string{"Idempotency-Key", key}
		}
		r := inst.MustDo(t, http.MethodPost, path, tok, "{}", headers...)
		requireErrorShape(t, r, http.StatusConflict, "already_registered")
		var body map[string]any
		r.JSON(t, &body)
		require.Len(t, body, 1, "only the error object at the top: %s", r.Body)
		inner := body["error"].(map[string]any)
		require.Equal(t, reg.ID, inner["registration_id"], "%s", r.Body)
		require.Equal(t, 1, strings.Count(string(r.Body), "registration_id"), "%s", r.Body)
	}
	// The stored refusal replays in the same shape.
	r := inst.MustDo(t, http.MethodPost, path, tok, "{}", "Idempotency-Key", "again-1")
	require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, `{"error":{"code":"already_registered","message":`+jsonString(t, r)+`,"registration_id":"`+reg.ID+`"}}`, string(r.Body))
}

// jsonString returns the message of an error response as a JSON string.
func jsonString(t *testing.T, r apptest.Response) string {
	t.Helper()
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	r.JSON(t, &e)
	return `"` + strings.ReplaceAll(strings.ReplaceAll(e.Error.Message, `\`, `\\`), `"`, `\"`) + `"`
}

// TestUnknownQueryParametersAre400 checks that every route refuses query
// parameters it does not take, like unknown body fields, and takes the
// ones it documents.
func TestUnknownQueryParametersAre400(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	user := inst.Token(t, "quentin", false)
	id := inst.CreateActivity(t, "queries", 3)
	reg := inst.MustSignup(t, id, "quentin")
	a, rg := "/v1/activities/"+id, "/v1/registrations/"+reg.ID

	refused := []struct{ method, path, token, body string }{
		{"GET", a + "?x=1", "", ""},
		{"GET", a + "?limit=1", "", ""}, // limit is for lists only
		{"PATCH", a + "?dry_run=true", admin, `{"title":"t"}`},
		{"POST", "/v1/activities?title=x", admin, `{"title":"t","capacity":1}`},
		{"GET", a + "/seats?fresh=1", "", ""},
		{"POST", a + "/registrations?user=bob", user, "{}"},
		{"GET", a + "/registrations?page=2", admin, ""},
		{"GET", a + "/registrations?status=pending&sort=asc", admin, ""},
		{"GET", rg + "?x", user, ""},
		{"POST", rg + "/cancel?force=1", user, ""},
		{"POST", rg + "/status?status=approved", admin, `{"status":"approved"}`},
		{"POST", "/v1/notes/n1/views?x=1", "", ""},
		{"GET", "/v1/notes/n1/stats?x=1", "", ""},
		{"GET", "/healthz?verbose=1", "", ""},
		{"GET", "/readyz?x=", "", ""},
		{"GET", "/openapi.yaml?format=json", "", ""},
		{"GET", "/widget/seats.js?v=2", "", ""},
		{"GET", "/demo?activity=" + id + "&theme=dark", "", ""},
		{"GET", a + "?limit=%zz", "", ""},
	}
	for _, tc := range refused {
		r := inst.MustDo(t, tc.method, tc.path, tc.token, bodyOrNil(tc.body))
		requireErrorShape(t, r, http.StatusBadRequest, "invalid_request")
		require.Contains(t, string(r.Body), "query", "%s %s", tc.method, tc.path)
	}
	// The message names the parameter and what the route takes.
	r := inst.MustDo(t, http.MethodGet, a+"/registrations?page=2", admin, nil)
	require.Contains(t, string(r.Body), "page")
	require.Contains(t, string(r.Body), "status, limit, cursor")

	taken := []struct{ method, path, token string }{
		{"GET", a + "/registrations?status=pending&limit=1", admin},
		{"GET", "/demo?activity=" + id + "&note=n1", ""},
		{"GET", a, ""},
	}
	for _, tc := range taken {
		r := inst.MustDo(t, tc.method, tc.path, tc.token, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s %s: %s", tc.method, tc.path, r.Body)
	}
	// Unknown paths and methods keep their own answers.
	requireErrorShape(t, inst.MustDo(t, http.MethodGet, "/v2/nothing?x=1", "", nil), http.StatusNotFound, "not_found")
	requireErrorShape(t, inst.MustDo(t, http.MethodDelete, a+"?x=1", admin, nil), http.StatusMethodNotAllowed, "method_not_allowed")
}

func bodyOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestMessagesAreNotHTMLEscaped checks that <, > and & reach clients as
// they are, in data and in error messages.
func TestMessagesAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	title := `Rounds <live> & "Q&A"`
	r := inst.MustDo(t, http.MethodPost, "/v1/activities", admin, map[string]any{"title": title, "capacity": 1})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"title":"Rounds <live> & \"Q&A\""`)
	require.NotContains(t, string(r.Body), `\u003c`)

	r = inst.MustDo(t, http.MethodPost, "/v1/activities", admin, `{"title":"t","capacity":1,"<b>&":1}`)
	requireErrorShape(t, r, http.StatusBadRequest, "invalid_request")
	require.Contains(t, string(r.Body), `<b>&`)
	require.NotContains(t, string(r.Body), `\u0026`)
	require.NotContains(t, string(r.Body), `\u003c`)
	require.False(t, strings.HasSuffix(string(r.Body), "\n"), "no trailing newline")
}
