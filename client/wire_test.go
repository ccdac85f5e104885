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

// The check-in calls send their routes, queries, headers and bodies.
func TestCheckinRequests(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := client.New(rec.srv.URL, "door", nil)
	for _, tc := range []struct {
		name, method, uri, body string
		call                    func() error
	}{
		{"ticket", http.MethodGet, "/v1/registrations/r%2F1/ticket", "", func() error {
			_, err := c.Ticket(ctx(t), "r/1")
			return err
		}},
		{"keys", http.MethodGet, "/v1/checkin/keys", "", func() error {
			_, err := c.CheckinKeys(ctx(t))
			return err
		}},
		{"get list", http.MethodGet, "/v1/checkin-lists/cl_1", "", func() error {
			_, err := c.GetCheckinList(ctx(t), "cl_1")
			return err
		}},
		{"list lists", http.MethodGet, "/v1/checkin-lists?activity_id=a_1&cursor=Y3Vy&limit=5", "", func() error {
			_, err := c.ListCheckinLists(ctx(t), client.CheckinListOptions{ActivityID: "a_1", Limit: 5, Cursor: "Y3Vy"})
			return err
		}},
		{"patch list", http.MethodPatch, "/v1/checkin-lists/cl_1", `{"door_roles":[],"max_inside":null}`, func() error {
			_, err := c.UpdateCheckinList(ctx(t), "cl_1", client.CheckinListPatch{DoorRoles: &[]string{}, ClearMaxInside: true})
			return err
		}},
		{"checkins", http.MethodGet, "/v1/checkin-lists/cl_1/checkins?after=42&limit=10", "", func() error {
			_, err := c.Checkins(ctx(t), "cl_1", 42, 10)
			return err
		}},
		{"checkins from the start", http.MethodGet, "/v1/checkin-lists/cl_1/checkins", "", func() error {
			_, err := c.Checkins(ctx(t), "cl_1", 0, 0)
			return err
		}},
		{"ticket sync", http.MethodGet, "/v1/checkin-lists/cl_1/tickets?cursor=Y3Vy&limit=1000&wait=30", "", func() error {
			_, err := c.TicketSync(ctx(t), "cl_1", "Y3Vy", 1000, 30)
			return err
		}},
	} {
		rec.answer(http.StatusOK, `{}`)
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := rec.last(t)
		if got.method != tc.method || got.uri != tc.uri {
			t.Fatalf("%s: sent %s %s; want %s %s", tc.name, got.method, got.uri, tc.method, tc.uri)
		}
		if tc.body != "" && !jsonEqual(t, got.body, tc.body) {
			t.Fatalf("%s: sent body %s; want %s", tc.name, got.body, tc.body)
		}
	}

	rec.answer(http.StatusCreated, `{"id":"cl_1","name":"Hall A","activity_ids":["a_1"],"entry":"once","max_inside":null}`)
	l, err := c.CreateCheckinList(ctx(t), client.NewCheckinList{Name: "Hall A", ActivityIDs: []string{"a_1"}, DoorRoles: []string{"door-hall-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != "cl_1" || l.Entry != client.EntryOnce || l.MaxInside != nil {
		t.Fatalf("decoded %+v", l)
	}
	if got := rec.last(t); got.method != http.MethodPost || got.uri != "/v1/checkin-lists" ||
		!jsonEqual(t, got.body, `{"name":"Hall A","activity_ids":["a_1"],"door_roles":["door-hall-a"]}`) {
		t.Fatalf("sent %s %s %s", got.method, got.uri, got.body)
	}

	rec.answer(http.StatusNoContent, "")
	if err := c.DeleteCheckinList(ctx(t), "cl_1"); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(t); got.method != http.MethodDelete || got.uri != "/v1/checkin-lists/cl_1" {
		t.Fatalf("sent %s %s", got.method, got.uri)
	}

	rec.answer(http.StatusOK, "<svg/>", "Content-Type", "image/svg+xml")
	svg, err := c.TicketSVG(ctx(t), "r_1")
	if err != nil || string(svg) != "<svg/>" {
		t.Fatalf("svg %q, %v", svg, err)
	}
	if got := rec.last(t); got.uri != "/v1/registrations/r_1/ticket.svg" {
		t.Fatalf("sent %s", got.uri)
	}
}

func TestRedeemAndWalkIn(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := client.New(rec.srv.URL, "door", nil)
	at := time.Date(2026, 11, 29, 9, 41, 5, 0, time.UTC)
	rec.answer(http.StatusOK, `{"result":"entered","registration":{"id":"r_1","checked_in":true},`+
		`"checkin":{"id":"ci_1_7","seq":7,"type":"entry","forced":true,"conflict":"ticket_revoked"},"inside":3,"max_inside":null}`,
		"Idempotent-Replayed", "true")
	res, err := c.Redeem(ctx(t), "cl_1", client.RedeemRequest{Ticket: "eyJ.x.y", Device: "hall-a-1", Force: true, At: &at}, "scan-7")
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != "entered" || !res.Replayed || !res.Registration.CheckedIn || res.Checkin == nil || res.Checkin.Seq != 7 ||
		*res.Checkin.Conflict != client.CodeTicketRevoked || res.Inside != 3 || res.MaxInside != nil {
		t.Fatalf("redeem result %+v", res)
	}
	got := rec.last(t)
	if got.method != http.MethodPost || got.uri != "/v1/checkin-lists/cl_1/redeem" || got.header.Get("Idempotency-Key") != "scan-7" {
		t.Fatalf("sent %s %s %v", got.method, got.uri, got.header)
	}
	if !jsonEqual(t, got.body, `{"ticket":"eyJ.x.y","device":"hall-a-1","force":true,"at":"2026-11-29T09:41:05Z"}`) {
		t.Fatalf("body %s", got.body)
	}

	_, err = c.Redeem(ctx(t), "cl_1", client.RedeemRequest{RegistrationID: "r_1", Type: client.ScanExit, Device: "d"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.last(t); got.header.Get("Idempotency-Key") != "" ||
		!jsonEqual(t, got.body, `{"registration_id":"r_1","type":"exit","device":"d"}`) {
		t.Fatalf("sent %v %s", got.header, got.body)
	}

	rec.answer(http.StatusAccepted, `{"result":"waitlisted","registration":{"id":"r_2","status":"waitlisted"},"checkin":null,"inside":0,"max_inside":10}`)
	w, err := c.WalkIn(ctx(t), "cl_1", client.NewWalkIn{ActivityID: "a_1", UserID: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Result != "waitlisted" || w.Checkin != nil || w.Registration.Status != client.Waitlisted || *w.MaxInside != 10 {
		t.Fatalf("walk-in %+v", w)
	}
	if got := rec.last(t); got.uri != "/v1/checkin-lists/cl_1/walk-ins" || !jsonEqual(t, got.body, `{"activity_id":"a_1","user_id":"dave"}`) {
		t.Fatalf("sent %s %s", got.uri, got.body)
	}
}

func TestCheckinRefusals(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := client.New(rec.srv.URL, "door", nil)
	rec.answer(http.StatusConflict, `{"error":{"code":"already_checked_in","message":"again",`+
		`"previous":{"at":"2026-11-29T09:58:12Z","device":"hall-a-1","list_id":"cl_1"}}}`)
	_, err := c.Redeem(ctx(t), "cl_1", client.RedeemRequest{Ticket: "t", Device: "d"}, "")
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeAlreadyCheckedIn || e.Previous == nil ||
		e.Previous.Device != "hall-a-1" || e.Previous.ListID != "cl_1" || !e.Previous.At.Equal(time.Date(2026, 11, 29, 9, 58, 12, 0, time.UTC)) {
		t.Fatalf("err %+v", err)
	}

	rec.answer(http.StatusConflict, `{"error":{"code":"room_full","message":"full","inside":120,"max_inside":120}}`)
	_, err = c.WalkIn(ctx(t), "cl_1", client.NewWalkIn{ActivityID: "a_1", UserID: "dave"})
	if !errors.As(err, &e) || e.Code != client.CodeRoomFull || *e.Inside != 120 || *e.MaxInside != 120 || e.Previous != nil {
		t.Fatalf("err %+v", err)
	}

	rec.answer(http.StatusBadRequest, `{"error":{"code":"invalid_ticket","message":"bad signature"}}`)
	_, err = c.Redeem(ctx(t), "cl_1", client.RedeemRequest{Ticket: "t", Device: "d"}, "")
	if !client.IsCode(err, client.CodeInvalidTicket) || !errors.As(err, &e) || e.Inside != nil || e.MaxInside != nil {
		t.Fatalf("err %+v", err)
	}
}

func TestCheckinStream(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	rec.answer(http.StatusOK, "event: counts\ndata: {\"list_id\":\"cl_1\",\"checked_in\":4,\"inside\":3,\"max_inside\":null,\"conflicts\":1}\n\n"+
		": ping\n\nevent: counts\ndata: {\"list_id\":\"cl_1\",\"checked_in\":5,\"inside\":4,\"max_inside\":10,\"conflicts\":1}\n\n",
		"Content-Type", "text/event-stream")
	st, err := client.New(rec.srv.URL, "door", nil).StreamCheckinCounts(ctx(t), "cl_1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.Next()
	if err != nil || first.CheckedIn != 4 || first.MaxInside != nil {
		t.Fatalf("first %+v, %v", first, err)
	}
	second, err := st.Next()
	if err != nil || second.Inside != 4 || *second.MaxInside != 10 {
		t.Fatalf("second %+v, %v", second, err)
	}
	if got := rec.last(t); got.uri != "/v1/checkin-lists/cl_1/stream" || got.header.Get("Accept") != "text/event-stream" {
		t.Fatalf("sent %s %v", got.uri, got.header)
	}
	if _, err := st.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the stream's end: %v", err)
	}
}

// The attendance calls send their routes, queries and bodies, and decode
// the answers.
func TestAttendanceRequests(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := client.New(rec.srv.URL, "tok", nil)
	for _, tc := range []struct {
		name, method, uri string
		call              func() error
	}{
		{"activity attendance", http.MethodGet, "/v1/activities/a%2F1/attendance?cursor=Y3Vy&limit=50", func() error {
			_, err := c.ActivityAttendance(ctx(t), "a/1", "Y3Vy", 50)
			return err
		}},
		{"activity attendance from the start", http.MethodGet, "/v1/activities/a_1/attendance", func() error {
			_, err := c.ActivityAttendance(ctx(t), "a_1", "", 0)
			return err
		}},
		{"registration attendance", http.MethodGet, "/v1/registrations/r_1/attendance", func() error {
			_, err := c.RegistrationAttendance(ctx(t), "r_1")
			return err
		}},
		{"series attendance", http.MethodGet, "/v1/series/s_1/attendance?risk=0.01&room=120", func() error {
			_, err := c.SeriesAttendance(ctx(t), "s_1", 120, 0.01)
			return err
		}},
		{"series attendance without room", http.MethodGet, "/v1/series/s_1/attendance", func() error {
			_, err := c.SeriesAttendance(ctx(t), "s_1", 0, 0)
			return err
		}},
	} {
		rec.answer(http.StatusOK, `{}`)
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := rec.last(t); got.method != tc.method || got.uri != tc.uri || got.body != "" {
			t.Fatalf("%s: sent %s %s %q; want %s %s without a body", tc.name, got.method, got.uri, got.body, tc.method, tc.uri)
		}
	}

	rec.answer(http.StatusOK, `{"id":"r_1","status":"approved","confirmed_at":"2026-12-01T08:30:00Z","cancel_reason":null}`)
	r, err := c.Confirm(ctx(t), "r/1")
	if err != nil {
		t.Fatal(err)
	}
	if r.ConfirmedAt == nil || !r.ConfirmedAt.Equal(time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)) || r.CancelReason != nil {
		t.Fatalf("confirmed %+v", r)
	}
	if got := rec.last(t); got.method != http.MethodPost || got.uri != "/v1/registrations/r%2F1/confirm" || got.body != "" ||
		got.header.Get("Content-Type") != "" {
		t.Fatalf("sent %s %s %q %v", got.method, got.uri, got.body, got.header)
	}

	rec.answer(http.StatusConflict, `{"error":{"code":"confirmation_closed","message":"too late"}}`)
	if _, err := c.Confirm(ctx(t), "r_1"); !client.IsCode(err, client.CodeConfirmationClosed) {
		t.Fatalf("err %v", err)
	}

	rec.answer(http.StatusOK, `{"summary":{"registered":2,"checked_in":1,"no_show":1,"no_show_rate":0.5},`+
		`"items":[{"registration_id":"r_1","user_id":"alice","seats":1,"status":"approved","checked_in":true,`+
		`"first_entry_at":"2026-12-03T08:55:10Z","seconds":6300,"percent":87.5,"eligible":true},`+
		`{"registration_id":"r_2","user_id":"bob","seats":1,"status":"pending","checked_in":false,`+
		`"first_entry_at":null,"seconds":null,"percent":null,"eligible":false}],"next_cursor":null}`)
	p, err := c.ActivityAttendance(ctx(t), "a_1", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Summary.NoShowRate != 0.5 || len(p.Items) != 2 || p.NextCursor != nil || *p.Items[0].Seconds != 6300 ||
		*p.Items[0].Percent != 87.5 || !p.Items[0].Eligible || p.Items[1].FirstEntryAt != nil || p.Items[1].Seconds != nil {
		t.Fatalf("page %+v", p)
	}

	rec.answer(http.StatusOK, `{"registration_id":"r_1","user_id":"alice","seats":1,"status":"approved","checked_in":true,`+
		`"first_entry_at":"2026-12-03T08:55:10Z","seconds":6300,"percent":87.5,"eligible":true,"statement":"eyJ.x.y"}`)
	a, err := c.RegistrationAttendance(ctx(t), "r_1")
	if err != nil {
		t.Fatal(err)
	}
	if a.RegistrationID != "r_1" || !a.Eligible || a.Statement == nil || *a.Statement != "eyJ.x.y" {
		t.Fatalf("attendance %+v", a)
	}

	rec.answer(http.StatusOK, `{"series_id":"s_1","activities":6,"registered":680,"checked_in":578,"show_rate":0.85,"suggested_capacity":134}`)
	sa, err := c.SeriesAttendance(ctx(t), "s_1", 120, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Activities != 6 || *sa.ShowRate != 0.85 || *sa.SuggestedCapacity != 134 {
		t.Fatalf("series %+v", sa)
	}

	rec.answer(http.StatusOK, "registration_id,user_id,seats,status,checked_in,first_entry_at,seconds,percent,eligible\n",
		"Content-Type", "text/csv")
	csv, err := c.ExportAttendance(ctx(t), "a_1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(csv)
	_ = csv.Close()
	if err != nil || !strings.HasPrefix(string(b), "registration_id,") {
		t.Fatalf("csv %q, %v", b, err)
	}
	if got := rec.last(t); got.uri != "/v1/activities/a_1/attendance.csv" {
		t.Fatalf("sent %s", got.uri)
	}
}

// The attendance settings of an activity are sent when set, as null when
// cleared, and decoded from an answer.
func TestActivityAttendanceSettings(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	c := client.New(rec.srv.URL, "admin", nil)
	start, end := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	rec.answer(http.StatusCreated, `{"id":"a_1","starts_at":"2026-12-03T09:00:00Z","ends_at":"2026-12-03T11:00:00Z",`+
		`"attendance_percent":80,"confirm_by":null,"release_no_shows_after_minutes":15}`)
	a, err := c.CreateActivity(ctx(t), client.NewActivity{Title: "Rounds", Capacity: 10, StartsAt: &start, EndsAt: &end,
		AttendancePercent: new(80), ReleaseNoShowsAfterMinutes: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	if !a.StartsAt.Equal(start) || !a.EndsAt.Equal(end) || *a.AttendancePercent != 80 || a.ConfirmBy != nil ||
		*a.ReleaseNoShowsAfterMinutes != 15 {
		t.Fatalf("decoded %+v", a)
	}
	if got := rec.last(t); !jsonEqual(t, got.body, `{"title":"Rounds","capacity":10,"starts_at":"2026-12-03T09:00:00Z",`+
		`"ends_at":"2026-12-03T11:00:00Z","attendance_percent":80,"release_no_shows_after_minutes":0}`) {
		t.Fatalf("sent %s", got.body)
	}

	for _, tc := range []struct {
		patch client.ActivityPatch
		want  string
	}{
		{client.ActivityPatch{ConfirmBy: &end, AttendancePercent: new(75)}, `{"confirm_by":"2026-12-03T11:00:00Z","attendance_percent":75}`},
		{client.ActivityPatch{ClearStartsAt: true, ClearEndsAt: true, ClearAttendancePercent: true, ClearConfirmBy: true,
			ClearReleaseNoShowsAfterMinutes: true},
			`{"starts_at":null,"ends_at":null,"attendance_percent":null,"confirm_by":null,"release_no_shows_after_minutes":null}`},
		{client.ActivityPatch{Title: new("x")}, `{"title":"x"}`},
	} {
		rec.answer(http.StatusOK, `{"id":"a_1"}`)
		if _, err := c.UpdateActivity(ctx(t), "a_1", tc.patch); err != nil {
			t.Fatal(err)
		}
		if got := rec.last(t); !jsonEqual(t, got.body, tc.want) {
			t.Fatalf("sent %s; want %s", got.body, tc.want)
		}
	}
}

// jsonEqual reports whether two JSON texts are the same value.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
