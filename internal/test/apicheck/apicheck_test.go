package apicheck_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apicheck"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// canned is one response of the fake server.
type canned struct {
	status  int
	ctype   string
	body    string
	headers []string
}

// recorder collects the violations a Transport reports.
type recorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *recorder) report(err error) { r.mu.Lock(); r.errs = append(r.errs, err); r.mu.Unlock() }

func (r *recorder) take() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := r.errs
	r.errs = nil
	return errs
}

// fake serves one canned response, set per case, and checks exchanges
// through a Transport.
type fake struct {
	srv    *httptest.Server
	client *http.Client
	rec    *recorder
	mu     sync.Mutex
	next   canned
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{rec: &recorder{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		c := f.next
		f.mu.Unlock()
		for i := 0; i+1 < len(c.headers); i += 2 {
			w.Header().Set(c.headers[i], c.headers[i+1])
		}
		if c.ctype != "" {
			w.Header().Set("Content-Type", c.ctype)
		}
		w.WriteHeader(c.status)
		_, _ = io.WriteString(w, c.body)
	}))
	t.Cleanup(f.srv.Close)
	checker, err := apicheck.Default()
	require.NoError(t, err)
	f.client = &http.Client{Transport: &apicheck.Transport{Checker: checker, Report: f.rec.report}}
	return f
}

// exchange sends a request answered with c and returns the violations.
func (f *fake) exchange(t *testing.T, method, path, token, body string, c canned, headers ...string) []error {
	t.Helper()
	f.mu.Lock()
	f.next = c
	f.mu.Unlock()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, c.body, string(got), "the body is handed on unchanged")
	return f.rec.take()
}

const jsonCT = "application/json; charset=utf-8"

const activity = `{"id":"a_1","title":"Rounds","capacity":3,"hold_seconds":900,"waitlist":false,"max_seats_per_registration":1,"waitlist_policy":"strict","pools":[],"series_id":null,"opens_at":null,"closes_at":null,"queue":null,` +
	`"starts_at":null,"ends_at":null,"attendance_percent":null,"confirm_by":null,"release_no_shows_after_minutes":null,"taken":1,"reserved":0,"remaining":2,"waiting":0,` +
	`"created_at":"2026-11-29T10:00:00Z","updated_at":"2026-11-29T10:00:00Z"}`

const registration = `{"id":"r_1","activity_id":"a_1","user_id":"alice","status":"pending","seats":1,"metadata":{},` +
	`"created_at":"2026-11-29T10:00:00Z","updated_at":"2026-11-29T10:00:00Z","expires_at":null,"waitlist_position":null,` +
	`"confirmed_at":null,"cancel_reason":null,"checked_in":false}`

func TestTransportPassesWhatKeepsToTheDescription(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cases := []struct {
		name, method, path, token, body string
		c                               canned
		headers                         []string
	}{
		{"activity", "GET", "/v1/activities/a_1", "", "", canned{200, jsonCT, activity, nil}, nil},
		{"create", "POST", "/v1/activities", "tok", `{"title":"Rounds","capacity":3}`,
			canned{201, jsonCT, activity, []string{"Location", "/v1/activities/a_1"}}, nil},
		{"signup", "POST", "/v1/activities/a_1/registrations", "tok", `{}`,
			canned{201, jsonCT, registration, []string{"Location", "/v1/registrations/r_1"}}, []string{"Idempotency-Key", "k-1"}},
		{"signup without body", "POST", "/v1/activities/a_1/registrations", "tok", ``,
			canned{201, jsonCT, registration, []string{"Location", "/v1/registrations/r_1"}}, nil},
		{"waitlisted", "POST", "/v1/activities/a_1/registrations", "tok", `{"metadata":{"a":1}}`,
			canned{202, jsonCT, strings.Replace(strings.Replace(registration, `"pending"`, `"waitlisted"`, 1), `"waitlist_position":null`, `"waitlist_position":3`, 1),
				[]string{"Location", "/v1/registrations/r_1", "Idempotent-Replayed", "true"}}, nil},
		{"already registered", "POST", "/v1/activities/a_1/registrations", "tok", `{}`,
			canned{409, jsonCT, `{"error":{"code":"already_registered","message":"m","registration_id":"r_1"}}`, nil}, nil},
		{"activity full", "POST", "/v1/activities/a_1/registrations", "tok", `{}`,
			canned{409, jsonCT, `{"error":{"code":"activity_full","message":"full"}}`, nil}, nil},
		{"list", "GET", "/v1/activities/a_1/registrations?status=pending&limit=2", "tok", "",
			canned{200, jsonCT, `{"items":[` + registration + `],"next_cursor":null}`, nil}, nil},
		{"unknown query refused", "GET", "/v1/activities/a_1?x=1", "", "",
			canned{400, jsonCT, `{"error":{"code":"invalid_request","message":"unknown query parameter x"}}`, nil}, nil},
		{"missing token refused", "GET", "/v1/me/registrations", "", "",
			canned{401, jsonCT, `{"error":{"code":"unauthenticated","message":"missing token"}}`, nil}, nil},
		{"unknown path", "GET", "/v2/nothing", "", "",
			canned{404, jsonCT, `{"error":{"code":"not_found","message":"no such resource"}}`, nil}, nil},
		{"wrong method", "DELETE", "/v1/activities/a_1", "tok", "",
			canned{405, jsonCT, `{"error":{"code":"method_not_allowed","message":"no"}}`, []string{"Allow", "OPTIONS, GET, PATCH"}}, nil},
		{"rate limited", "POST", "/v1/notes/n-1/views", "", "",
			canned{429, jsonCT, `{"error":{"code":"rate_limited","message":"slow down"}}`, []string{"Retry-After", "1"}}, nil},
		{"unavailable", "GET", "/v1/activities/a_1", "", "",
			canned{503, jsonCT, `{"error":{"code":"unavailable","message":"down"}}`, []string{"Retry-After", "1"}}, nil},
		{"csv", "GET", "/v1/activities/a_1/registrations.csv?status=pending", "tok", "",
			canned{200, "text/csv; charset=utf-8", "id,user_id,status,created_at,updated_at,expires_at,metadata\n", nil}, nil},
		{"webhook deleted", "DELETE", "/v1/webhooks/wh_1", "tok", "", canned{204, "", "", nil}, nil},
		{"events", "GET", "/v1/activities/a_1/events?after=3&limit=10&wait=2", "tok", "",
			canned{200, jsonCT, `{"items":[],"next_after":3}`, nil}, nil},
		{"preflight", "OPTIONS", "/v1/activities", "", "", canned{204, "", "", nil}, nil},
		{"encoded note id", "GET", "/v1/notes/%4Eote/stats", "", "",
			canned{200, jsonCT, `{"note_id":"Note","views":0,"waters":0}`, nil}, nil},
		{"encoded slash refused", "GET", "/v1/notes/a%2Fb/stats", "", "",
			canned{400, jsonCT, `{"error":{"code":"invalid_request","message":"bad note id"}}`, nil}, nil},
	}
	for _, tc := range cases {
		errs := f.exchange(t, tc.method, tc.path, tc.token, tc.body, tc.c, tc.headers...)
		require.Empty(t, errs, tc.name)
	}
}

func TestTransportReportsWhatBreaksTheDescription(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	cases := []struct {
		name, method, path, token, body string
		c                               canned
		want                            string
	}{
		{"missing field", "GET", "/v1/activities/a_1", "", "",
			canned{200, jsonCT, strings.Replace(activity, `"waitlist":false,`, "", 1), nil}, "waitlist"},
		{"extra field", "GET", "/v1/activities/a_1", "", "",
			canned{200, jsonCT, strings.Replace(activity, `"id"`, `"seats":1,"id"`, 1), nil}, "seats"},
		{"null where not nullable", "GET", "/v1/activities/a_1", "", "",
			canned{200, jsonCT, strings.Replace(activity, `"taken":1`, `"taken":null`, 1), nil}, "taken"},
		{"time not in UTC", "GET", "/v1/activities/a_1", "", "",
			canned{200, jsonCT, strings.Replace(activity, `10:00:00Z","updated`, `10:00:00+01:00","updated`, 1), nil}, "created_at"},
		{"missing nullable field", "GET", "/v1/registrations/r_1", "tok", "",
			canned{200, jsonCT, strings.Replace(registration, `,"waitlist_position":null`, "", 1), nil}, "waitlist_position"},
		{"undocumented status", "GET", "/v1/activities/a_1", "", "",
			canned{500, jsonCT, `{"error":{"code":"internal","message":"boom"}}`, nil}, "status 500 is not documented"},
		{"wrong content type", "GET", "/v1/activities/a_1", "", "",
			canned{200, "text/plain; charset=utf-8", activity, nil}, "Content-Type"},
		{"JSON without charset", "GET", "/v1/activities/a_1", "", "",
			canned{200, "application/json", activity, nil}, "Content-Type"},
		{"registration_id at the top", "POST", "/v1/activities/a_1/registrations", "tok", `{}`,
			canned{409, jsonCT, `{"error":{"code":"already_registered","message":"m","registration_id":"r_1"},"registration_id":"r_1"}`, nil}, "registration_id"},
		{"already_registered without id", "POST", "/v1/activities/a_1/registrations", "tok", `{}`,
			canned{409, jsonCT, `{"error":{"code":"already_registered","message":"m"}}`, nil}, "409"},
		{"wrong code for status", "GET", "/v1/activities/a_1", "", "",
			canned{404, jsonCT, `{"error":{"code":"invalid_request","message":"m"}}`, nil}, "not_found"},
		{"unknown query answered", "GET", "/v1/activities/a_1?x=1", "", "",
			canned{200, jsonCT, activity, nil}, `query parameter "x" is not declared`},
		{"unknown body field answered", "POST", "/v1/activities", "tok", `{"title":"t","capacity":1,"seats":2}`,
			canned{201, jsonCT, activity, []string{"Location", "/v1/activities/a_1"}}, "not refused"},
		{"missing token answered", "GET", "/v1/me/registrations", "", "",
			canned{200, jsonCT, `{"items":[],"next_cursor":null}`, nil}, "not refused"},
		{"encoded slash answered", "GET", "/v1/notes/a%2Fb/stats", "", "",
			canned{200, jsonCT, `{"note_id":"a/b","views":0,"waters":0}`, nil}, "noteId"},
		{"unknown path answered", "GET", "/v1/nothing", "", "",
			canned{200, jsonCT, `{}`, nil}, "want 404"},
		{"405 without Allow", "DELETE", "/v1/activities/a_1", "tok", "",
			canned{405, jsonCT, `{"error":{"code":"method_not_allowed","message":"no"}}`, nil}, "Allow"},
		{"405 with another code", "DELETE", "/v1/activities/a_1", "tok", "",
			canned{405, jsonCT, `{"error":{"code":"invalid_request","message":"no"}}`, []string{"Allow", "GET"}}, "method_not_allowed"},
		{"429 without Retry-After", "POST", "/v1/notes/n-1/views", "", "",
			canned{429, jsonCT, `{"error":{"code":"rate_limited","message":"slow down"}}`, nil}, "Retry-After"},
		{"csv as JSON", "GET", "/v1/activities/a_1/registrations.csv", "tok", "",
			canned{200, jsonCT, `[]`, nil}, "Content-Type"},
		{"stream as JSON", "GET", "/v1/activities/a_1/seats/stream", "", "",
			canned{200, jsonCT, `{}`, nil}, "Content-Type"},
		{"200 where 204 is documented", "DELETE", "/v1/webhooks/wh_1", "tok", "",
			canned{200, jsonCT, `{}`, nil}, "status 200 is not documented"},
		{"secret in a webhook read", "GET", "/v1/webhooks/wh_1", "tok", "",
			canned{200, jsonCT, `{"id":"wh_1","url":"https://x.example/h","events":["*"],"activity_id":null,"secret":"whsec_x","created_at":"2026-11-29T10:00:00Z"}`, nil}, "secret"},
	}
	for _, tc := range cases {
		errs := f.exchange(t, tc.method, tc.path, tc.token, tc.body, tc.c)
		require.Len(t, errs, 1, tc.name)
		t.Log(tc.name, ": ", errs[0])
		require.Contains(t, errs[0].Error(), tc.want, tc.name)
		var v *apicheck.Violation
		require.ErrorAs(t, errs[0], &v, tc.name)
		require.Equal(t, tc.c.status, v.Status, tc.name)
	}
}

// TestTransportLeavesStreamsStreaming checks that a server-sent event
// stream is checked by its status and headers and handed on unread.
func TestTransportLeavesStreamsStreaming(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: seats\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	rec := &recorder{}
	checker, err := apicheck.Default()
	require.NoError(t, err)
	client := &http.Client{Transport: &apicheck.Transport{Checker: checker, Report: rec.report}}

	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := client.Get(srv.URL + "/v1/activities/a_1/seats/stream")
		if !assert.NoError(t, err) {
			return
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		assert.NoError(t, err)
		if line != "event: seats\n" {
			t.Errorf("first line %q", line)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the transport held the stream")
	}
	require.Empty(t, rec.take())
}

// TestTransportOnARealInstance checks today's service through the
// transport, on the routes whose answers already follow the description:
// notes, operations, the description itself, and the error answers.
func TestTransportOnARealInstance(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	rec := &recorder{}
	checker, err := apicheck.Default()
	require.NoError(t, err)
	client := &http.Client{Transport: &apicheck.Transport{Base: apptest.Client.Transport, Checker: checker, Report: rec.report}}
	admin := inst.Token(t, "admin", true)
	id := inst.CreateActivity(t, "real", 2)
	requests := []struct{ method, path, token, body string }{
		{"GET", "/healthz", "", ""},
		{"GET", "/readyz", "", ""},
		{"GET", "/metrics", "", ""},
		{"GET", "/openapi.yaml", "", ""},
		{"GET", "/widget/seats.js", "", ""},
		{"GET", "/widget/nothing.js", "", ""},
		{"GET", "/demo?activity=" + id, "", ""},
		{"POST", "/v1/notes/real-note/views", "", ""},
		{"POST", "/v1/notes/real-note/waters", "", "{}"},
		{"GET", "/v1/notes/real-note/stats", "", ""},
		{"GET", "/v1/notes/bad.id/stats", "", ""},
		{"POST", "/v1/notes/real-note/views", "", `{"x":1}`},
		{"GET", "/v1/activities/a_01JD0000000000000000000000", "", ""},
		{"GET", "/v1/activities/" + id + "?x=1", "", ""},
		{"DELETE", "/v1/activities/" + id, admin, ""},
		{"PATCH", "/v1/activities/" + id, "", `{"title":"t"}`},
		{"PATCH", "/v1/activities/" + id, inst.Token(t, "u", false), `{"title":"t"}`},
		{"POST", "/v1/activities", admin, `{"title":"t","capacity":-1}`},
		{"POST", "/v1/activities", admin, `{"title":"t","capacity":1,"x":1}`},
		{"POST", "/v1/activities", admin, `{"title":"` + strings.Repeat("x", 70<<10) + `"}`},
		{"GET", "/v2/nothing", "", ""},
	}
	for _, r := range requests {
		req, err := http.NewRequest(r.method, inst.URL+r.path, strings.NewReader(r.body))
		require.NoError(t, err)
		if r.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.token != "" {
			req.Header.Set("Authorization", "Bearer "+r.token)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Empty(t, rec.take(), "%s %s", r.method, r.path)
	}
}
