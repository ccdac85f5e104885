package httpapi_test

// Fuzz targets for everything a client controls: request bodies, path ids,
// query strings, note ids and tokens. Each sends the fuzzed request through
// the real handlers of a whole instance on real PostgreSQL and Redis and
// requires a documented answer: never a 5xx (a panic would be one: echo's
// Recover turns it into a 500), and every 4xx in the error shape.
//
// make fuzz-smoke runs each target for a few seconds; see docs/testing.md
// ("Fuzzing") for longer runs. Seed corpora are in testdata/fuzz/<target>/.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// fuzzTarget is an instance with an activity and a registration, shared by
// every input of one fuzz target in one process.
type fuzzTarget struct {
	h        http.Handler
	admin    string
	user     string
	activity string
	reg      string
}

func newFuzzTarget(f *testing.F) *fuzzTarget {
	f.Helper()
	inst := apptest.Start(f, apptest.Options{})
	ft := &fuzzTarget{
		h:        inst.App.Server.Handler(),
		admin:    inst.Token(f, "fuzz-admin", true),
		user:     inst.Token(f, "fuzz-user", false),
		activity: inst.CreateActivity(f, "fuzz", registration.MaxCapacity),
	}
	ft.reg = inst.MustSignup(f, ft.activity, "fuzz-owner").ID
	return ft
}

// do sends a request with a raw path and query (any bytes) straight to the
// handler and checks the answer.
func (ft *fuzzTarget) do(t *testing.T, method, path, rawQuery string, body []byte, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := &http.Request{
		Method:        method,
		URL:           &url.URL{Path: path, RawQuery: rawQuery},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Host:          "capacityd.test",
		RemoteAddr:    "192.0.2.7:4321",
		RequestURI:    path,
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	ft.h.ServeHTTP(rec, req)
	checkAnswer(t, method, rec)
	return rec
}

// checkAnswer fails on a 5xx and on an error without the documented shape
// (HEAD answers have no body).
func checkAnswer(t *testing.T, method string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
	}
	if rec.Code < 400 || method == http.MethodHead {
		return
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("status %d without the error shape: %q", rec.Code, rec.Body.Bytes())
	}
	if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After")
	}
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func FuzzActivityBody(f *testing.F) {
	for _, s := range []string{
		`{"title":"a","capacity":1}`, `{"title":"a","capacity":1,"hold_seconds":60}`, `{"capacity":1e400}`,
		`{"title":"\u0000","capacity":0}`, `{"title":"a","capacity":-1}`, `{"title":null}`, `[]`, `{`, ``, `null`,
		`{"title":"a","capacity":1,"x":1}`, `{"title":"a","capacity":"1"}`, `{"hold_seconds":86400}`,
	} {
		f.Add([]byte(s))
	}
	ft := newFuzzTarget(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		ft.do(t, http.MethodPost, "/v1/activities", "", body, bearer(ft.admin)...)
		ft.do(t, http.MethodPatch, "/v1/activities/"+ft.activity, "", body, bearer(ft.admin)...)
	})
}

func FuzzSignupRequest(f *testing.F) {
	f.Add("", []byte(`{}`), "")
	f.Add("", []byte(`{"metadata":{"seat":"front"}}`), "key-1")
	f.Add("", []byte(`{"metadata":[]}`), "")
	f.Add("", []byte("{\"metadata\":{\"a\":\"\xff\"}}"), "")
	f.Add("", []byte(`{"metadata":{"a":"\u0000"}}`), "k\x00")
	f.Add("a_00000000000000000000000000", []byte(``), "")
	f.Add("a_%00", []byte(`null`), strings.Repeat("k", 256))
	ft := newFuzzTarget(f)
	auth, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	if err != nil {
		f.Fatal(err)
	}
	var users atomic.Int64
	f.Fuzz(func(t *testing.T, id string, body []byte, key string) {
		if id == "" {
			id = ft.activity
		}
		// A user of its own per input, so that valid inputs are admitted.
		tok, err := auth.Sign(fmt.Sprintf("fuzz-%d", users.Add(1)), false, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		headers := bearer(tok)
		if key != "" {
			headers = append(headers, "Idempotency-Key", key)
		}
		ft.do(t, http.MethodPost, "/v1/activities/"+id+"/registrations", "", body, headers...)
	})
}

func FuzzStatusChange(f *testing.F) {
	for _, s := range []string{
		`{"status":"approved"}`, `{"status":"awaiting_payment"}`, `{"status":"cancelled"}`, `{"status":""}`,
		`{"status":null}`, `{"status":1}`, `{}`, ``, `{"status":"approved","x":1}`, "{\"status\":\"\xff\"}",
	} {
		f.Add("", []byte(s))
	}
	f.Add("r_00000000000000000000000000", []byte(`{"status":"approved"}`))
	f.Add("r_\x00", []byte(`{"status":"approved"}`))
	ft := newFuzzTarget(f)
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		if id == "" {
			id = ft.reg
		}
		ft.do(t, http.MethodPost, "/v1/registrations/"+id+"/status", "", body, bearer(ft.admin)...)
		ft.do(t, http.MethodPost, "/v1/registrations/"+id+"/cancel", "", body, bearer(ft.admin)...)
	})
}

func FuzzPathAndQuery(f *testing.F) {
	for _, s := range []string{
		"/v1/activities/a_00000000000000000000000000", "/v1/activities/%00/seats", "/v1/registrations/r_\xff",
		"/v1/activities//registrations", "/v1/notes/x/stats", "/v1/notes/%2F/views", "/v1/../v1/activities",
		"/healthz", "/readyz", "/v1/activities/A", "/", "//", "/v1/notes/" + strings.Repeat("n", 129) + "/stats",
	} {
		f.Add("GET", s, "")
	}
	f.Add("POST", "/v1/activities/ACT/registrations", "")
	f.Add("GET", "/v1/activities/ACT/registrations", "limit=0")
	f.Add("GET", "/v1/activities/ACT/registrations", "limit=500&cursor=cjE&status=pending")
	f.Add("GET", "/v1/activities/ACT/registrations", "cursor=%ff&status=\x00")
	f.Add("DELETE", "/v1/registrations/REG", "")
	ft := newFuzzTarget(f)
	f.Fuzz(func(t *testing.T, method, path, query string) {
		switch method {
		case "GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS":
		default:
			method = "GET"
		}
		path = strings.ReplaceAll(strings.ReplaceAll(path, "ACT", ft.activity), "REG", ft.reg)
		ft.do(t, method, path, query, []byte(`{}`), bearer(ft.admin)...)
		ft.do(t, method, path, query, nil, bearer(ft.user)...)
	})
}

func FuzzListQuery(f *testing.F) {
	for _, s := range []string{
		"", "limit=1", "limit=500", "limit=501", "limit=-1", "limit=abc", "limit=99999999999999999999",
		"cursor=cjE", "cursor=", "cursor=!!", "status=pending", "status=bogus", "status=%00", "limit=%zz",
		"limit=1&limit=2", "cursor=" + strings.Repeat("A", 4000),
	} {
		f.Add(s)
	}
	ft := newFuzzTarget(f)
	f.Fuzz(func(t *testing.T, query string) {
		ft.do(t, http.MethodGet, "/v1/activities/"+ft.activity+"/registrations", query, nil, bearer(ft.admin)...)
	})
}

func FuzzNoteID(f *testing.F) {
	for _, s := range []string{
		"note-1", "N_2", "", "%41", "%zz", "a%2Fb", "\x00", "\xff", strings.Repeat("n", 128), strings.Repeat("n", 129),
		"a b", "é", "..", "%00",
	} {
		f.Add(s, []byte(``))
	}
	f.Add("note-1", []byte(`{}`))
	f.Add("note-1", []byte(`{"x":1}`))
	f.Add("note-1", []byte(`[`))
	ft := newFuzzTarget(f)
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		ft.do(t, http.MethodPost, "/v1/notes/"+id+"/views", "", body)
		ft.do(t, http.MethodPost, "/v1/notes/"+id+"/waters", "", body)
		ft.do(t, http.MethodGet, "/v1/notes/"+id+"/stats", "", nil)
	})
}

func FuzzAuthorizationHeader(f *testing.F) {
	for _, s := range []string{
		"", "Bearer", "Bearer ", "Bearer x", "Basic dTpw", "Bearer a.b.c", "Bearer ...",
		"Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJ4IiwiZXhwIjo5OTk5OTk5OTk5fQ.",
		"Bearer eyJhbGciOiJIUzUxMiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.AAAA",
		"bearer " + strings.Repeat("a", 300),
	} {
		f.Add(s)
	}
	ft := newFuzzTarget(f)
	f.Add("Bearer " + ft.user)
	f.Add("Bearer " + ft.admin)
	auth, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header string) {
		rec := ft.do(t, http.MethodGet, "/v1/registrations/"+ft.reg, "", nil, "Authorization", header)
		switch rec.Code {
		case http.StatusOK, http.StatusNotFound, http.StatusUnauthorized:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		if rec.Code == http.StatusUnauthorized {
			return
		}
		// Let in: it must be "Bearer" and a valid token; a 200 (another
		// user's registration) needs the admin role.
		scheme, tok, _ := strings.Cut(header, " ")
		caller, err := auth.Verify(strings.TrimSpace(tok))
		if !strings.EqualFold(scheme, "Bearer") || err != nil {
			t.Fatalf("let in %q: %v", header, err)
		}
		if rec.Code == http.StatusOK && !caller.Admin {
			t.Fatalf("a non-admin saw another user's registration: %q", header)
		}
	})
}
