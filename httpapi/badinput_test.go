package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// badCase is one bad request and the documented answer it must get.
type badCase struct {
	name    string
	method  string
	path    string // sent as is: percent-encode what must be encoded
	token   string
	body    any
	headers []string
	status  int
	code    string
}

// requireErrorShape checks that r is the documented error: the status, the
// JSON content type, {"error":{"code","message"}} with the code, and
// Retry-After on 429 and 503.
func requireErrorShape(t *testing.T, r apptest.Response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"), "body: %s", r.Body)
	var body struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &body), "body: %q", r.Body)
	require.NotNil(t, body.Error, "body: %s", r.Body)
	require.NotNil(t, body.Error.Code, "body: %s", r.Body)
	require.NotNil(t, body.Error.Message, "body: %s", r.Body)
	require.NotEmpty(t, *body.Error.Message)
	require.Equal(t, code, *body.Error.Code, "body: %s", r.Body)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		require.NotEmpty(t, r.Header.Get("Retry-After"))
	}
}

// sweepFixture is an instance with an activity and a registration to aim
// bad requests at.
type sweepFixture struct {
	inst     *apptest.Instance
	admin    string
	user     string
	activity string
	reg      string
	missingA string
	missingR string
}

func newSweepFixture(t *testing.T) sweepFixture {
	t.Helper()
	inst := apptest.Start(t, apptest.Options{})
	f := sweepFixture{
		inst:     inst,
		admin:    inst.Token(t, "sweep-admin", true),
		user:     inst.Token(t, "sweep-user", false),
		activity: inst.CreateActivity(t, "sweep", 10),
		missingA: "a_00000000000000000000000000",
		missingR: "r_00000000000000000000000000",
	}
	f.reg = inst.MustSignup(t, f.activity, "sweep-user").ID
	return f
}

func TestBadInputSweepAnswersDocumented4xx(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	acts := "/v1/activities/" + f.activity
	regs := "/v1/registrations/" + f.reg
	long := strings.Repeat("x", 10_000)
	const inv, nf, una, forb, tooBig = "invalid_request", "not_found", "unauthenticated", "forbidden", "payload_too_large"

	cases := []badCase{
		// Malformed and truncated JSON.
		{name: "truncated object", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title": "x", "capa`, status: 400, code: inv},
		{name: "truncated after colon", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":`, status: 400, code: inv},
		{name: "just a brace", method: "POST", path: "/v1/activities", token: f.admin, body: `{`, status: 400, code: inv},
		{name: "garbage", method: "POST", path: "/v1/activities", token: f.admin, body: `not json at all`, status: 400, code: inv},
		{name: "empty body", method: "POST", path: "/v1/activities", token: f.admin, body: ``, status: 400, code: inv},
		{name: "whitespace body", method: "POST", path: "/v1/activities", token: f.admin, body: " \n\t ", status: 400, code: inv},
		{name: "two values", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1}{}`, status: 400, code: inv},
		{name: "trailing garbage", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1} x`, status: 400, code: inv},
		{name: "array body", method: "POST", path: "/v1/activities", token: f.admin, body: `[]`, status: 400, code: inv},
		{name: "string body", method: "POST", path: "/v1/activities", token: f.admin, body: `"x"`, status: 400, code: inv},
		{name: "number body", method: "POST", path: "/v1/activities", token: f.admin, body: `42`, status: 400, code: inv},
		{name: "null body", method: "POST", path: "/v1/activities", token: f.admin, body: `null`, status: 400, code: inv},
		{name: "byte order mark", method: "POST", path: "/v1/activities", token: f.admin, body: "\ufeff{\"title\":\"a\",\"capacity\":1}", status: 400, code: inv},
		{name: "deep nesting", method: "POST", path: "/v1/activities", token: f.admin, body: strings.Repeat("[", 20000) + strings.Repeat("]", 20000), status: 400, code: inv},
		{name: "invalid utf8 in body", method: "POST", path: "/v1/activities", token: f.admin, body: []byte("{\"title\":\"\xff\xfe\",\"capacity\":\xff}"), status: 400, code: inv},
		{name: "single quotes", method: "POST", path: "/v1/activities", token: f.admin, body: `{'title':'a','capacity':1}`, status: 400, code: inv},
		{name: "trailing comma", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,}`, status: 400, code: inv},
		// Wrong types, unknown fields, missing fields.
		{name: "capacity string", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":"10"}`, status: 400, code: inv},
		{name: "capacity float", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1.5}`, status: 400, code: inv},
		{name: "capacity bool", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":true}`, status: 400, code: inv},
		{name: "capacity object", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":{}}`, status: 400, code: inv},
		{name: "title number", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":1,"capacity":1}`, status: 400, code: inv},
		{name: "title array", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":["a"],"capacity":1}`, status: 400, code: inv},
		{name: "hold string", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,"hold_seconds":"60"}`, status: 400, code: inv},
		{name: "unknown field", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,"seats":3}`, status: 400, code: inv},
		{name: "unknown field case", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,"Taken":3}`, status: 400, code: inv},
		{name: "field in another case", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","Capacity":1}`, status: 400, code: inv},
		// Duplicate keys: encoding/json and jsonb keep the last, other
		// readers may keep the first.
		{name: "duplicate capacity", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":5,"capacity":1000000}`, status: 400, code: inv},
		{name: "duplicate escaped key", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":5,"c\u0061pacity":6}`, status: 400, code: inv},
		{name: "duplicate title", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","title":"b","capacity":5}`, status: 400, code: inv},
		{name: "patch duplicate capacity", method: "PATCH", path: acts, token: f.admin, body: `{"capacity":5,"capacity":1000000}`, status: 400, code: inv},
		{name: "signup duplicate metadata", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{},"metadata":{}}`, status: 400, code: inv},
		{name: "signup duplicate key in metadata", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"seat":"a","seat":"b"}}`, status: 400, code: inv},
		{name: "signup duplicate key deep in metadata", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"x":[{"k":1,"k":2}]}}`, status: 400, code: inv},
		{name: "status duplicate", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":"approved","status":"rejected"}`, status: 400, code: inv},
		{name: "webhook duplicate url", method: "POST", path: "/v1/webhooks", token: f.admin, body: `{"url":"https://example.org/a","url":"https://example.org/b","events":["*"]}`, status: 400, code: inv},
		{name: "patch field in another case", method: "PATCH", path: acts, token: f.admin, body: `{"CAPACITY":5}`, status: 400, code: inv},
		{name: "signup field in another case", method: "POST", path: acts + "/registrations", token: f.user, body: `{"Metadata":{}}`, status: 400, code: inv},
		{name: "status field in another case", method: "POST", path: regs + "/status", token: f.admin, body: `{"Status":"approved"}`, status: 400, code: inv},
		{name: "missing capacity", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a"}`, status: 400, code: inv},
		{name: "missing title", method: "POST", path: "/v1/activities", token: f.admin, body: `{"capacity":1}`, status: 400, code: inv},
		{name: "empty object", method: "POST", path: "/v1/activities", token: f.admin, body: `{}`, status: 400, code: inv},
		{name: "null fields", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":null,"capacity":null}`, status: 400, code: inv},
		// Huge numbers and out-of-range values.
		{name: "capacity huge", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":99999999999999999999999}`, status: 400, code: inv},
		{name: "capacity exponent", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1e400}`, status: 400, code: inv},
		{name: "capacity max int64", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":9223372036854775807}`, status: 400, code: inv},
		{name: "capacity min int64", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":-9223372036854775808}`, status: 400, code: inv},
		{name: "capacity above max", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1000001}`, status: 400, code: inv},
		{name: "capacity negative", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":-1}`, status: 400, code: inv},
		{name: "hold zero", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,"hold_seconds":0}`, status: 400, code: inv},
		{name: "hold too small", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,"hold_seconds":59}`, status: 400, code: inv},
		{name: "hold too big", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,"hold_seconds":86401}`, status: 400, code: inv},
		{name: "hold int32 overflow", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a","capacity":1,"hold_seconds":4294967356}`, status: 400, code: inv},
		{name: "empty title", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"","capacity":1}`, status: 400, code: inv},
		{name: "long title", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"` + strings.Repeat("é", 201) + `","capacity":1}`, status: 400, code: inv},
		{name: "nul in title", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"a\u0000b","capacity":1}`, status: 400, code: inv},
		// Patch.
		{name: "patch empty", method: "PATCH", path: acts, token: f.admin, body: `{}`, status: 400, code: inv},
		{name: "patch no body", method: "PATCH", path: acts, token: f.admin, body: nil, status: 400, code: inv},
		{name: "patch wrong type", method: "PATCH", path: acts, token: f.admin, body: `{"capacity":"x"}`, status: 400, code: inv},
		{name: "patch huge", method: "PATCH", path: acts, token: f.admin, body: `{"capacity":1e30}`, status: 400, code: inv},
		{name: "patch nul title", method: "PATCH", path: acts, token: f.admin, body: `{"title":"\u0000"}`, status: 400, code: inv},
		{name: "patch unknown", method: "PATCH", path: acts, token: f.admin, body: `{"taken":0}`, status: 400, code: inv},
		{name: "patch missing activity", method: "PATCH", path: "/v1/activities/" + f.missingA, token: f.admin, body: `{"capacity":3}`, status: 404, code: nf},
		// Signup bodies and Idempotency-Key.
		{name: "signup metadata array", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":[]}`, status: 400, code: inv},
		{name: "signup metadata string", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":"x"}`, status: 400, code: inv},
		{name: "signup metadata number", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":1}`, status: 400, code: inv},
		{name: "signup metadata too big", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"x":"` + strings.Repeat("a", 5000) + `"}}`, status: 400, code: inv},
		{name: "signup metadata invalid utf8", method: "POST", path: acts + "/registrations", token: f.user, body: []byte("{\"metadata\":{\"a\":\"\xff\xfe\"}}"), status: 400, code: inv},
		{name: "signup unknown field", method: "POST", path: acts + "/registrations", token: f.user, body: `{"user_id":"bob"}`, status: 400, code: inv},
		{name: "signup metadata lone high surrogate", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"a":"\ud800"}}`, status: 400, code: inv},
		{name: "signup metadata lone low surrogate", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"a":"x\udc00"}}`, status: 400, code: inv},
		{name: "signup metadata high then letter", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"a":"\ud83dx"}}`, status: 400, code: inv},
		{name: "signup metadata surrogate in key", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"\ud83d\ud83d":1}}`, status: 400, code: inv},
		{name: "signup truncated", method: "POST", path: acts + "/registrations", token: f.user, body: `{"metadata":{"a":`, status: 400, code: inv},
		{name: "signup array", method: "POST", path: acts + "/registrations", token: f.user, body: `[{}]`, status: 400, code: inv},
		{name: "idempotency key too long", method: "POST", path: acts + "/registrations", token: f.user, body: `{}`, headers: []string{"Idempotency-Key", strings.Repeat("k", 256)}, status: 400, code: inv},
		{name: "idempotency key non-ascii", method: "POST", path: acts + "/registrations", token: f.user, body: `{}`, headers: []string{"Idempotency-Key", "clé"}, status: 400, code: inv},
		{name: "idempotency key tab", method: "POST", path: acts + "/registrations", token: f.user, body: `{}`, headers: []string{"Idempotency-Key", "a\tb"}, status: 400, code: inv},
		{name: "idempotency key empty", method: "POST", path: acts + "/registrations", token: f.user, body: `{}`, headers: []string{"Idempotency-Key", ""}, status: 400, code: inv},
		// Status changes.
		{name: "status unknown", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":"bogus"}`, status: 400, code: inv},
		{name: "status empty", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":""}`, status: 400, code: inv},
		{name: "status missing", method: "POST", path: regs + "/status", token: f.admin, body: `{}`, status: 400, code: inv},
		{name: "status number", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":1}`, status: 400, code: inv},
		{name: "status null", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":null}`, status: 400, code: inv},
		{name: "status nul byte", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":"appr\u0000oved"}`, status: 400, code: inv},
		{name: "status no body", method: "POST", path: regs + "/status", token: f.admin, body: nil, status: 400, code: inv},
		{name: "status extra field", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":"approved","x":1}`, status: 400, code: inv},
		{name: "status to cancelled", method: "POST", path: regs + "/status", token: f.admin, body: `{"status":"cancelled"}`, status: 409, code: "invalid_transition"},
		{name: "status missing registration", method: "POST", path: "/v1/registrations/" + f.missingR + "/status", token: f.admin, body: `{"status":"approved"}`, status: 404, code: nf},
		{name: "cancel body garbage", method: "POST", path: regs + "/cancel", token: f.user, body: `{"x":1}`, status: 400, code: inv},
		// Ids in paths: malformed, over-long, NUL, invalid UTF-8.
		{name: "activity id junk", method: "GET", path: "/v1/activities/42", status: 404, code: nf},
		{name: "activity id lower case", method: "GET", path: "/v1/activities/" + strings.ToLower(f.activity), status: 404, code: nf},
		{name: "activity id as registration", method: "GET", path: "/v1/activities/" + f.reg, status: 404, code: nf},
		{name: "activity id missing", method: "GET", path: "/v1/activities/" + f.missingA, status: 404, code: nf},
		{name: "activity id over-long", method: "GET", path: "/v1/activities/" + long, status: 404, code: nf},
		{name: "activity id nul", method: "GET", path: "/v1/activities/a_%00", status: 404, code: nf},
		{name: "activity id invalid utf8", method: "GET", path: "/v1/activities/%ff%fe", status: 404, code: nf},
		{name: "activity id sql", method: "GET", path: "/v1/activities/" + url.PathEscape("' OR 1=1 --"), status: 404, code: nf},
		{name: "activity id encoded slash", method: "GET", path: "/v1/activities/a%2F..%2Fx", status: 404, code: nf},
		{name: "activity id with RLO", method: "GET", path: "/v1/activities/" + f.activity + "%E2%80%AE", status: 404, code: nf},
		{name: "activity id with zero-width space", method: "GET", path: "/v1/activities/%E2%80%8B" + f.activity, status: 404, code: nf},
		{name: "activity id with BOM", method: "GET", path: "/v1/activities/%EF%BB%BF" + f.activity + "/seats", status: 404, code: nf},
		{name: "activity id with DEL", method: "GET", path: "/v1/activities/" + f.activity + "%7F", status: 404, code: nf},
		{name: "registration id with RLO", method: "GET", path: regs + "%E2%80%AE", token: f.user, status: 404, code: nf},
		{name: "registration id with ZWJ", method: "POST", path: "/v1/registrations/%E2%80%8D" + f.reg + "/cancel", token: f.user, body: `{}`, status: 404, code: nf},
		{name: "webhook id with RLO", method: "GET", path: "/v1/webhooks/wh_01JD0000000000000000000000%E2%80%AE", token: f.admin, status: 404, code: nf},
		{name: "webhook id with control", method: "GET", path: "/v1/webhooks/wh_01JD000000000000000000000%01", token: f.admin, status: 404, code: nf},
		{name: "note id with RLO", method: "POST", path: "/v1/notes/note%E2%80%AE/views", status: 400, code: inv},
		{name: "note id with zero-width space", method: "GET", path: "/v1/notes/no%E2%80%8Bte/stats", status: 400, code: inv},
		{name: "note id with BOM", method: "POST", path: "/v1/notes/%EF%BB%BFnote/waters", status: 400, code: inv},
		{name: "seats id nul", method: "GET", path: "/v1/activities/%00/seats", status: 404, code: nf},
		{name: "seats over-long", method: "GET", path: "/v1/activities/" + long + "/seats", status: 404, code: nf},
		{name: "registration id junk", method: "GET", path: "/v1/registrations/xyz", token: f.user, status: 404, code: nf},
		{name: "registration id as activity", method: "GET", path: "/v1/registrations/" + f.activity, token: f.admin, status: 404, code: nf},
		{name: "registration id over-long", method: "GET", path: "/v1/registrations/" + long, token: f.admin, status: 404, code: nf},
		{name: "registration id nul", method: "POST", path: "/v1/registrations/r_%00/cancel", token: f.user, body: `{}`, status: 404, code: nf},
		{name: "registration id utf8", method: "POST", path: "/v1/registrations/%c3%28/status", token: f.admin, body: `{"status":"approved"}`, status: 404, code: nf},
		{name: "signup id over-long", method: "POST", path: "/v1/activities/" + long + "/registrations", token: f.user, body: `{}`, status: 404, code: nf},
		{name: "signup id missing", method: "POST", path: "/v1/activities/" + f.missingA + "/registrations", token: f.user, body: `{}`, status: 404, code: nf},
		{name: "no such route", method: "GET", path: "/v1/nothing/here", status: 404, code: nf},
		{name: "wrong method", method: "PUT", path: "/v1/activities", token: f.admin, body: `{}`, status: 405, code: "method_not_allowed"},
		// Query strings: limit, cursor, status.
		{name: "limit text", method: "GET", path: acts + "/registrations?limit=abc", token: f.admin, status: 400, code: inv},
		{name: "limit empty", method: "GET", path: acts + "/registrations?limit=", token: f.admin, status: 400, code: inv},
		{name: "limit zero", method: "GET", path: acts + "/registrations?limit=0", token: f.admin, status: 400, code: inv},
		{name: "limit negative", method: "GET", path: acts + "/registrations?limit=-1", token: f.admin, status: 400, code: inv},
		{name: "limit too big", method: "GET", path: acts + "/registrations?limit=501", token: f.admin, status: 400, code: inv},
		{name: "limit huge", method: "GET", path: acts + "/registrations?limit=99999999999999999999999", token: f.admin, status: 400, code: inv},
		{name: "limit float", method: "GET", path: acts + "/registrations?limit=1.5", token: f.admin, status: 400, code: inv},
		{name: "limit nul", method: "GET", path: acts + "/registrations?limit=%00", token: f.admin, status: 400, code: inv},
		{name: "limit invalid utf8", method: "GET", path: acts + "/registrations?limit=%ff", token: f.admin, status: 400, code: inv},
		{name: "cursor garbage", method: "GET", path: acts + "/registrations?cursor=!!!", token: f.admin, status: 400, code: inv},
		{name: "cursor empty", method: "GET", path: acts + "/registrations?cursor=", token: f.admin, status: 400, code: inv},
		{name: "cursor nul", method: "GET", path: acts + "/registrations?cursor=%00", token: f.admin, status: 400, code: inv},
		{name: "cursor invalid utf8", method: "GET", path: acts + "/registrations?cursor=%ff%fe", token: f.admin, status: 400, code: inv},
		{name: "cursor negative", method: "GET", path: acts + "/registrations?cursor=" + b64("r-1"), token: f.admin, status: 400, code: inv},
		{name: "cursor overflow", method: "GET", path: acts + "/registrations?cursor=" + b64("r99999999999999999999999"), token: f.admin, status: 400, code: inv},
		{name: "cursor wrong prefix", method: "GET", path: acts + "/registrations?cursor=" + b64("a12"), token: f.admin, status: 400, code: inv},
		// Cursors carry public ids (never the internal row number) and name
		// an item of the very listing they are used with.
		{name: "cursor row number", method: "GET", path: acts + "/registrations?cursor=" + b64("r1"), token: f.admin, status: 400, code: inv},
		{name: "cursor row number of mine", method: "GET", path: "/v1/me/registrations?cursor=" + b64("r1"), token: f.user, status: 400, code: inv},
		{name: "cursor row number of activities", method: "GET", path: "/v1/activities?cursor=" + b64("r1"), token: f.admin, status: 400, code: inv},
		{name: "cursor activity on registrations", method: "GET", path: acts + "/registrations?cursor=" + b64(f.activity), token: f.admin, status: 400, code: inv},
		{name: "cursor registration on activities", method: "GET", path: "/v1/activities?cursor=" + b64(f.reg), token: f.admin, status: 400, code: inv},
		{name: "cursor of nothing", method: "GET", path: acts + "/registrations?cursor=" + b64(f.missingR), token: f.admin, status: 400, code: inv},
		{name: "cursor of no activity", method: "GET", path: "/v1/activities?cursor=" + b64(f.missingA), token: f.admin, status: 400, code: inv},
		{name: "cursor of another user", method: "GET", path: "/v1/me/registrations?cursor=" + b64(f.reg), token: f.admin, status: 400, code: inv},
		{name: "cursor padded", method: "GET", path: acts + "/registrations?cursor=" + b64(f.reg) + "%3D", token: f.admin, status: 400, code: inv},
		{name: "cursor over-long", method: "GET", path: acts + "/registrations?cursor=" + long, token: f.admin, status: 400, code: inv},
		{name: "status filter unknown", method: "GET", path: acts + "/registrations?status=bogus", token: f.admin, status: 400, code: inv},
		{name: "status filter nul", method: "GET", path: acts + "/registrations?status=%00", token: f.admin, status: 400, code: inv},
		{name: "status filter invalid utf8", method: "GET", path: acts + "/registrations?status=%ff", token: f.admin, status: 400, code: inv},
		{name: "limit twice", method: "GET", path: acts + "/registrations?limit=1&limit=x", token: f.admin, status: 400, code: inv},
		{name: "status twice", method: "GET", path: acts + "/registrations?status=pending&status=approved", token: f.admin, status: 400, code: inv},
		{name: "bad query escape", method: "GET", path: acts + "/registrations?limit=%zz", token: f.admin, status: 400, code: inv},
		{name: "list missing activity", method: "GET", path: "/v1/activities/" + f.missingA + "/registrations", token: f.admin, status: 404, code: nf},
		// Registering a note.
		{name: "register note without token", method: "PUT", path: "/v1/notes/n1", status: 401, code: una},
		{name: "register note as user", method: "PUT", path: "/v1/notes/n1", token: f.user, status: 403, code: forb},
		{name: "register note bad id", method: "PUT", path: "/v1/notes/a.b", token: f.admin, status: 400, code: inv},
		{name: "register note over-long id", method: "PUT", path: "/v1/notes/" + long, token: f.admin, status: 400, code: inv},
		{name: "register note nul id", method: "PUT", path: "/v1/notes/a%00", token: f.admin, status: 400, code: inv},
		{name: "register note body field", method: "PUT", path: "/v1/notes/n1", token: f.admin, body: `{"id":"n1"}`, status: 400, code: inv},
		{name: "register note body array", method: "PUT", path: "/v1/notes/n1", token: f.admin, body: `[]`, status: 400, code: inv},
		{name: "register note oversize", method: "PUT", path: "/v1/notes/n1", token: f.admin, body: strings.Repeat(" ", 65_537), status: 413, code: tooBig},
		{name: "note wrong method", method: "POST", path: "/v1/notes/n1", token: f.admin, body: `{}`, status: 405, code: "method_not_allowed"},
		// Oversize bodies.
		{name: "oversize body", method: "POST", path: "/v1/activities", token: f.admin, body: `{"title":"` + strings.Repeat("a", 70_000) + `","capacity":1}`, status: 413, code: tooBig},
		{name: "oversize signup", method: "POST", path: acts + "/registrations", token: f.user, body: strings.Repeat(" ", 65_537), status: 413, code: tooBig},
		// Authorization.
		{name: "signup without token", method: "POST", path: acts + "/registrations", body: `{}`, status: 401, code: una},
		{name: "admin route as user", method: "POST", path: "/v1/activities", token: f.user, body: `{"title":"a","capacity":1}`, status: 403, code: forb},
		{name: "patch as user", method: "PATCH", path: acts, token: f.user, body: `{"capacity":1}`, status: 403, code: forb},
		{name: "list as user", method: "GET", path: acts + "/registrations", token: f.user, status: 403, code: forb},
		{name: "status as user", method: "POST", path: regs + "/status", token: f.user, body: `{"status":"approved"}`, status: 403, code: forb},
	}
	for _, tc := range cases {
		r := f.inst.MustDo(t, tc.method, tc.path, tc.token, tc.body, tc.headers...)
		t.Run(tc.name, func(t *testing.T) { requireErrorShape(t, r, tc.status, tc.code) })
	}
}

// b64 encodes s as cursors are encoded.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestOversizeChunkedBodyIs413 sends a body without Content-Length, so that
// only reading it finds it too large.
func TestOversizeChunkedBodyIs413(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	for _, path := range []string{"/v1/activities", "/v1/activities/" + f.activity + "/registrations"} {
		body := io.MultiReader(strings.NewReader(`{"title":"`), strings.NewReader(strings.Repeat("a", 100_000)), strings.NewReader(`"}`))
		req, err := http.NewRequest(http.MethodPost, f.inst.URL+path, body)
		require.NoError(t, err)
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+f.admin)
		resp, err := apptest.Client.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		requireErrorShape(t, apptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, 413, "payload_too_large")
	}
}

// TestRawBytesInPathsAndQueries sends what no HTTP client would: raw NUL,
// control and invalid UTF-8 bytes in the path and the query, straight to
// the handler.
func TestRawBytesInPathsAndQueries(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	h := f.inst.App.Server.Handler()
	acts := "/v1/activities/" + f.activity
	cases := []struct {
		method, path, query, token string
		status                     int
		code                       string
	}{
		{"GET", "/v1/activities/a_\x00\x00", "", "", 404, "not_found"},
		{"GET", "/v1/activities/\xff\xfe\xfd", "", "", 404, "not_found"},
		{"GET", "/v1/activities/\xff/seats", "", "", 404, "not_found"},
		{"GET", "/v1/activities/a_\r\n", "", "", 404, "not_found"},
		{"GET", "/v1/registrations/r_\x00", "", f.user, 404, "not_found"},
		{"POST", "/v1/registrations/\xc3\x28/cancel", "", f.user, 404, "not_found"},
		{"POST", "/v1/activities/\x00/registrations", "", f.user, 404, "not_found"},
		{"GET", "/v1/\x00", "", "", 404, "not_found"},
		{"GET", acts + "/registrations", "limit=\x00", f.admin, 400, "invalid_request"},
		{"GET", acts + "/registrations", "limit=\xff", f.admin, 400, "invalid_request"},
		{"GET", acts + "/registrations", "cursor=\x00\xff", f.admin, 400, "invalid_request"},
		{"GET", acts + "/registrations", "status=\xff\x00", f.admin, 400, "invalid_request"},
		{"GET", acts + "/registrations", "status=pending\x00", f.admin, 400, "invalid_request"},
		{"GET", acts + "/registrations", "%%%", f.admin, 400, "invalid_request"},
	}
	for _, tc := range cases {
		req := &http.Request{
			Method:     tc.method,
			URL:        &url.URL{Path: tc.path, RawQuery: tc.query},
			Proto:      "HTTP/1.1",
			ProtoMajor: 1, ProtoMinor: 1,
			Header:     http.Header{},
			Body:       io.NopCloser(bytes.NewReader([]byte("{}"))),
			Host:       "capacityd.test",
			RemoteAddr: "192.0.2.1:1234",
			RequestURI: tc.path,
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		t.Run(strings.ToValidUTF8(tc.path+"?"+tc.query, "?"), func(t *testing.T) {
			requireErrorShape(t, apptest.Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}, tc.status, tc.code)
		})
	}
}

// TestBodiesUpTo64KiBAreRead sends bodies of exactly 64 KiB (65,536 bytes),
// with and without Content-Length: they are read and answered as their
// content deserves; one byte more is payload_too_large.
func TestBodiesUpTo64KiBAreRead(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t)
	padded := func(n int) string {
		head := `{"title":"limit","capacity":1`
		return head + strings.Repeat(" ", n-len(head)-1) + "}"
	}
	for _, chunked := range []bool{false, true} {
		for _, tc := range []struct {
			size   int
			status int
		}{{64 << 10, http.StatusCreated}, {64<<10 + 1, http.StatusRequestEntityTooLarge}} {
			body := padded(tc.size)
			require.Len(t, body, tc.size)
			var r io.Reader = strings.NewReader(body)
			if chunked {
				r = io.MultiReader(r) // hides the length from the client
			}
			req, err := http.NewRequest(http.MethodPost, f.inst.URL+"/v1/activities", r)
			require.NoError(t, err)
			if chunked {
				req.ContentLength = -1
			}
			req.Header.Set("Authorization", "Bearer "+f.admin)
			req.Header.Set("Content-Type", "application/json")
			resp, err := apptest.Client.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.status == http.StatusRequestEntityTooLarge {
				requireErrorShape(t, apptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, tc.status, "payload_too_large")
				continue
			}
			require.Equal(t, tc.status, resp.StatusCode, "%d bytes, chunked %v: %s", tc.size, chunked, b)
		}
	}
}
