package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// The tests of this module use the standard library only, so that the
// module requires nothing. The tests against a running service and against
// api/openapi.yaml are in the service's module (internal/test/clienttest).

// recorder is an httptest server that records each request and answers
// with the status, headers and body set by answer.
type recorder struct {
	srv *httptest.Server

	mu     sync.Mutex
	reqs   []recorded
	status int
	header http.Header
	body   string
}

// recorded is what the server saw of one request.
type recorded struct {
	method, uri string
	header      http.Header
	body        string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{status: http.StatusOK, header: http.Header{}, body: "{}"}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.reqs = append(rec.reqs, recorded{method: r.Method, uri: r.URL.RequestURI(), header: r.Header.Clone(), body: string(b)})
		for k, vs := range rec.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.status)
		_, _ = io.WriteString(w, rec.body)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// answer sets the status, body and headers (name, value pairs) of the
// next answers.
func (rec *recorder) answer(status int, body string, header ...string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.status, rec.body, rec.header = status, body, http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		rec.header.Set(header[i], header[i+1])
	}
}

// last returns the last request the server saw.
func (rec *recorder) last(t *testing.T) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return rec.reqs[len(rec.reqs)-1]
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRequestsCarryTokenPathAndBody(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := client.New(rec.srv.URL+"/", "tok", nil)

	rec.answer(http.StatusOK, `{"id":"a/1","title":"x","capacity":3}`)
	a, err := c.GetActivity(ctx(t), "a/1")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "a/1" || a.Capacity != 3 {
		t.Fatalf("decoded %+v", a)
	}
	got := rec.last(t)
	if got.method != http.MethodGet || got.uri != "/v1/activities/a%2F1" {
		t.Fatalf("sent %s %s; want GET /v1/activities/a%%2F1 (the base URL's slash trimmed, the id one escaped segment)", got.method, got.uri)
	}
	if h := got.header.Get("Authorization"); h != "Bearer tok" {
		t.Fatalf("Authorization %q", h)
	}
	if h := got.header.Get("Content-Type"); h != "" {
		t.Fatalf("a request without a body sent Content-Type %q", h)
	}

	_, err = c.WithToken("").GetActivity(ctx(t), "a_1")
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := rec.last(t).header["Authorization"]; ok {
		t.Fatalf("an empty token sent Authorization %q", h)
	}
	if c.Token != "tok" {
		t.Fatal("WithToken changed the original")
	}

	rec.answer(http.StatusAccepted, `{"id":"r_1","status":"waitlisted"}`, "Idempotent-Replayed", "true")
	res, err := c.Signup(ctx(t), "a_1", client.SignupOptions{IdempotencyKey: "k-1", Seats: 2, Metadata: map[string]string{"seat": "front"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Waitlisted || !res.Replayed || res.Registration.Status != client.Waitlisted {
		t.Fatalf("signup result %+v", res)
	}
	got = rec.last(t)
	if got.method != http.MethodPost || got.uri != "/v1/activities/a_1/registrations" {
		t.Fatalf("sent %s %s", got.method, got.uri)
	}
	if got.header.Get("Idempotency-Key") != "k-1" || got.header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", got.header)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(got.body), &body); err != nil {
		t.Fatalf("body %q: %v", got.body, err)
	}
	if body["seats"] != float64(2) || body["metadata"].(map[string]any)["seat"] != "front" {
		t.Fatalf("body %q", got.body)
	}
}

func TestRefusalsAreErrors(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := client.New(rec.srv.URL, "tok", nil)
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		header []string
		want   client.Error
	}{
		{name: "error shape", status: http.StatusConflict,
			body: `{"error":{"code":"already_registered","message":"already registered","registration_id":"r_1"}}`,
			want: client.Error{Status: 409, Code: client.CodeAlreadyRegistered, Message: "already registered", RegistrationID: "r_1"}},
		{name: "remaining seats", status: http.StatusConflict,
			body: `{"error":{"code":"activity_full","message":"full","remaining":1}}`,
			want: client.Error{Status: 409, Code: client.CodeActivityFull, Message: "full", Remaining: new(1)}},
		{name: "retry after", status: http.StatusTooManyRequests, header: []string{"Retry-After", "3"},
			body: `{"error":{"code":"rate_limited","message":"slow down"}}`,
			want: client.Error{Status: 429, Code: client.CodeRateLimited, Message: "slow down", RetryAfter: 3 * time.Second}},
		{name: "not the error shape", status: http.StatusBadGateway, body: " bad gateway \n",
			want: client.Error{Status: 502, Message: "bad gateway"}},
		{name: "no body", status: http.StatusServiceUnavailable, body: "",
			want: client.Error{Status: 503, Message: "Service Unavailable"}},
		{name: "long body", status: http.StatusInternalServerError, body: long,
			want: client.Error{Status: 500, Message: long[:200] + "…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.answer(tc.status, tc.body, tc.header...)
			_, err := c.GetActivity(ctx(t), "a_1")
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v (%T) is no *client.Error", err, err)
			}
			if e.Status != tc.want.Status || e.Code != tc.want.Code || e.Message != tc.want.Message ||
				e.RegistrationID != tc.want.RegistrationID || e.RetryAfter != tc.want.RetryAfter ||
				(e.Remaining == nil) != (tc.want.Remaining == nil) || (e.Remaining != nil && *e.Remaining != *tc.want.Remaining) {
				t.Fatalf("got %+v, want %+v", *e, tc.want)
			}
			if tc.want.Code != "" && !client.IsCode(err, tc.want.Code) {
				t.Fatalf("IsCode(%v, %q) is false", err, tc.want.Code)
			}
			if !strings.Contains(e.Error(), tc.want.Message) {
				t.Fatalf("Error() %q does not say %q", e.Error(), tc.want.Message)
			}
		})
	}
}

func TestUndecodableAnswerIsNotAServiceError(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	rec.answer(http.StatusOK, "not json")
	_, err := client.New(rec.srv.URL, "", nil).GetActivity(ctx(t), "a_1")
	if err == nil || !strings.Contains(err.Error(), "decode") {
		t.Fatalf("err %v; want a decode error", err)
	}
	var e *client.Error
	if errors.As(err, &e) {
		t.Fatalf("a decode error is an *Error: %v", err)
	}
}

func TestTransportErrorsAreNotServiceErrors(t *testing.T) {
	t.Parallel()
	c := client.New("http://127.0.0.1:1", "", nil)
	_, err := c.GetActivity(ctx(t), "a_1")
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	var e *client.Error
	if errors.As(err, &e) {
		t.Fatalf("a transport error is an *Error: %v", err)
	}
}

// Many goroutines share one Client and its copies.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	rec.answer(http.StatusOK, `{"id":"a_1","capacity":1}`)
	c := client.New(rec.srv.URL, "admin", nil)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			cc := c
			if i%2 == 1 {
				cc = c.WithToken("")
			}
			if _, err := cc.GetActivity(ctx(t), "a_1"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != 32 {
		t.Fatalf("server saw %d requests, want 32", len(rec.reqs))
	}
	var withToken int
	for _, r := range rec.reqs {
		if r.header.Get("Authorization") == "Bearer admin" {
			withToken++
		}
	}
	if withToken != 16 {
		t.Fatalf("%d requests carried the token, want 16", withToken)
	}
}
