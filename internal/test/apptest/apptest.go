// Package apptest starts whole capacityd instances in a test, on real
// PostgreSQL and Redis, and talks to them over HTTP.
package apptest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apicheck"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// Secret signs the tokens of test instances.
const Secret = "apptest-secret-apptest-secret-apptest-secret"

// WebhookKey seals the webhook secrets of test instances (WEBHOOK_SECRET_KEY
// of test processes): 32 bytes in base64.
const WebhookKey = "YXBwdGVzdC13ZWJob29rLWtleS0zMi1ieXRlcy0hISE="

// Options configure an instance. The zero value gives a fresh database and
// the shared Redis.
type Options struct {
	// DatabaseURL of a migrated database; empty: a fresh one.
	DatabaseURL string
	// RedisURL of the display tier; empty: the shared test Redis.
	RedisURL string
	// Redis is the display tier's client when set (a Redis Cluster's, for
	// one); it takes precedence over RedisURL.
	Redis redis.UniversalClient
	// NoRedis runs without a display tier.
	NoRedis bool
	// App overrides the service options (the JWT secret is always Secret;
	// the webhook key is WebhookKey unless set, an empty one for none).
	App app.Options
}

// Instance is one running service instance.
type Instance struct {
	URL         string
	DatabaseURL string
	App         *app.App
	Server      *httptest.Server
	// Queries counts the statements the instance sent to PostgreSQL.
	Queries *QueryCounter
	auth    *httpapi.Authenticator
}

// QueryCounter is a pgx tracer that counts queries.
type QueryCounter struct{ n atomic.Int64 }

// TraceQueryStart counts one query.
func (q *QueryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing.
func (q *QueryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Count returns the number of queries so far.
func (q *QueryCounter) Count() int64 { return q.n.Load() }

// Start starts an instance, stopped when t ends.
func Start(t testing.TB, o Options) *Instance {
	t.Helper()
	testenv.SkipShort(t, "a whole instance on PostgreSQL and Redis")
	if o.DatabaseURL == "" {
		o.DatabaseURL = testenv.NewDatabase(t)
	}
	queries := &QueryCounter{}
	// A dial may wait for a loaded machine's scheduler longer than the
	// service's default (3 s) while the whole suite runs with -race; the
	// requests' own deadlines still bound what a client waits.
	pool := testenv.PoolWith(t, o.DatabaseURL, store.ConnPoolConfig{MaxConns: 16, ConnectTimeout: 10 * time.Second, Tracer: queries})
	var rdb redis.UniversalClient
	switch {
	case o.NoRedis:
	case o.Redis != nil:
		rdb = o.Redis
	default:
		rdb = testenv.RedisClient(t, cmp.Or(o.RedisURL, testenv.RedisURL()))
	}
	opts := o.App
	opts.JWTSecret = Secret
	if opts.WebhookSecretKey == nil {
		opts.WebhookSecretKey, _ = base64.StdEncoding.DecodeString(WebhookKey)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	a, err := app.New(opts, pool, rdb)
	if err != nil {
		t.Fatal(err)
	}
	a.StartWorkers()
	// Started means its first background reads are done: the check-in
	// keys (read when the workers start), so that a test that counts the
	// instance's statements counts only its own requests'.
	tick := time.NewTicker(5 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); !a.Checkins.KeysLoaded() && time.Now().Before(deadline); <-tick.C {
	}
	tick.Stop()
	srv := httptest.NewServer(a.Server.Handler())
	auth, _ := httpapi.NewAuthenticator([]byte(Secret))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return &Instance{URL: srv.URL, DatabaseURL: o.DatabaseURL, App: a, Server: srv, Queries: queries, auth: auth}
}

// Token returns a valid token for sub.
func (i *Instance) Token(t testing.TB, sub string, admin bool) string {
	t.Helper()
	tok, err := i.auth.Sign(sub, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Response is an HTTP response read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
}

// ErrorCode returns the error code of an error body, or "".
func (r Response) ErrorCode() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// Client is shared by every request of the tests: keep-alive, many
// connections per host. Every exchange it carries is checked against the
// API description (api/openapi.yaml): one that breaks it fails with the
// violation as its error, so the description cannot drift from the code.
var Client = &http.Client{
	Timeout: 30 * time.Second,
	Transport: &apicheck.Transport{
		Base:    &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second},
		Checker: mustChecker(),
	},
}

func mustChecker() *apicheck.Checker {
	c, err := apicheck.Default()
	if err != nil {
		panic(err)
	}
	return c
}

// API returns the typed client of the instance for a user (an admin when
// admin is set), over Client.
func (i *Instance) API(t testing.TB, sub string, admin bool) *client.Client {
	t.Helper()
	return client.New(i.URL, i.Token(t, sub, admin), Client)
}

// Public returns the typed client of the instance without a token, for
// the public routes, over Client.
func (i *Instance) Public() *client.Client {
	return client.New(i.URL, "", Client)
}

// Do sends a request. body may be nil, a string or []byte (sent as is), or
// any value sent as JSON. headers are pairs of name and value; a name
// given twice is sent twice.
func Do(method, url, token string, body any, headers ...string) (Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return Response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	given := map[string]bool{}
	for i := 0; i+1 < len(headers); i += 2 {
		name := http.CanonicalHeaderKey(headers[i])
		if given[name] {
			req.Header.Add(name, headers[i+1]) // a header sent twice
		} else {
			req.Header.Set(name, headers[i+1])
		}
		given[name] = true
	}
	resp, err := Client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// MustDo is Do that fails the test on a transport error.
func (i *Instance) MustDo(t testing.TB, method, path, token string, body any, headers ...string) Response {
	t.Helper()
	r, err := Do(method, i.URL+path, token, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// CreateActivity creates an activity through the API and returns its id.
func (i *Instance) CreateActivity(t testing.TB, title string, capacity int) string {
	t.Helper()
	a, err := i.API(t, "admin", true).CreateActivity(context.Background(), client.NewActivity{Title: title, Capacity: capacity})
	if err != nil {
		t.Fatalf("create activity: %v", err)
	}
	return a.ID
}

// CreateWaitlisted creates an activity that keeps a waiting list through
// the API and returns its id.
func (i *Instance) CreateWaitlisted(t testing.TB, title string, capacity int) string {
	t.Helper()
	a, err := i.API(t, "admin", true).CreateActivity(context.Background(), client.NewActivity{Title: title, Capacity: capacity, Waitlist: true})
	if err != nil {
		t.Fatalf("create activity: %v", err)
	}
	if !a.Waitlist {
		t.Fatalf("activity %s created without its waiting list", a.ID)
	}
	return a.ID
}

// CreateWaitlistedParties creates an activity with a waiting list whose
// registrations may hold up to maxSeats seats.
func (i *Instance) CreateWaitlistedParties(t testing.TB, title string, capacity, maxSeats int) string {
	t.Helper()
	a, err := i.API(t, "admin", true).CreateActivity(context.Background(),
		client.NewActivity{Title: title, Capacity: capacity, Waitlist: true, MaxSeatsPerRegistration: maxSeats})
	if err != nil {
		t.Fatalf("create activity: %v", err)
	}
	return a.ID
}

// WaitCommitted waits until the activity has at least n occupied seats
// in the database, or for 30 s at most. It may run in a goroutine of its
// own: it fails nothing.
func (i *Instance) WaitCommitted(activityID string, n int) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); <-tick.C {
		if st, err := i.App.Store.SeatState(context.Background(), activityID); err == nil && st.Taken >= n {
			return
		}
	}
}

// AuthorityTaken counts the occupied seats of an activity
// straight from the database.
func (i *Instance) AuthorityTaken(t testing.TB, activityID string) int {
	t.Helper()
	st, err := i.App.Store.SeatState(context.Background(), activityID)
	if err != nil {
		t.Fatalf("read the seat state: %v", err)
	}
	return st.Taken
}

// DisplayTaken reads the display counter of an activity straight from
// Redis, without rebuilding it: the seats it shows as taken (taken at the
// authority plus held for signups in flight).
func (i *Instance) DisplayTaken(t testing.TB, activityID string) int {
	t.Helper()
	v, err := i.App.Redis.HMGet(context.Background(), capacity.Key(activityID), "taken", "held").Result()
	if err != nil {
		t.Fatalf("read the display counter: %v", err)
	}
	n := 0
	for _, x := range v {
		s, ok := x.(string)
		if !ok {
			t.Fatalf("display counter of %s: no field in %v", activityID, v)
		}
		k, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("display counter of %s: %v", activityID, err)
		}
		n += k
	}
	return n
}

// RoleToken returns a valid token for sub with roles (and no admin role
// unless it is among them).
func (i *Instance) RoleToken(t testing.TB, sub string, roles ...string) string {
	t.Helper()
	tok, err := i.auth.SignRoles(sub, roles, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
