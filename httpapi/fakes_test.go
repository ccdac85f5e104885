package httpapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
)

// fakeActivityID and fakeOtherID are well-formed activity ids; only the
// first names an activity of a fakeRegistrations.
const (
	fakeActivityID = "a_01HZZZZZZZZZZZZZZZZZZZZZZZ"
	fakeOtherID    = "a_01HYYYYYYYYYYYYYYYYYYYYYYY"
	fakeRegID      = "r_01HZZZZZZZZZZZZZZZZZZZZZZZ"
)

// fakeRegistrations is a registration service in memory for the handler
// tests: one activity (fakeActivityID), signups that succeed (or replay,
// or fail with err), and what the edge passed it. A method it does not
// fake panics (the embedded interface is nil), which the edge turns into
// a 500 that fails the test.
type fakeRegistrations struct {
	httpapi.Registrations

	mu       sync.Mutex
	activity registration.Activity
	// err, when set, is what every faked method returns.
	err error
	// replayed is what Signup says of a repeated idempotency key.
	replayed bool
	// signups and listed are what the edge asked for.
	signups []registration.SignupInput
	listed  []registration.ListFilter
	// exported is what ExportRegistrations emits.
	exported []registration.Registration
}

func newFakeRegistrations() *fakeRegistrations {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	return &fakeRegistrations{activity: registration.Activity{
		ID: fakeActivityID, Title: "Fake", Capacity: 10, HoldSeconds: 600, MaxSeats: 1,
		Policy: registration.PolicyStrict, Pools: []string{}, Taken: 3, Reserved: 2, Remaining: 5,
		CreatedAt: now, UpdatedAt: now,
	}}
}

func (f *fakeRegistrations) GetActivity(_ context.Context, id string) (registration.Activity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return registration.Activity{}, f.err
	}
	if id != f.activity.ID {
		return registration.Activity{}, registration.ActivityNotFound(id)
	}
	return f.activity, nil
}

func (f *fakeRegistrations) CreateActivity(_ context.Context, in registration.NewActivity) (registration.Activity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return registration.Activity{}, f.err
	}
	a := f.activity
	a.Title, a.Capacity, a.Waitlist, a.Taken, a.Reserved, a.Remaining = in.Title, in.Capacity, in.Waitlist, 0, 0, in.Capacity
	return a, nil
}

func (f *fakeRegistrations) Signup(_ context.Context, in registration.SignupInput) (registration.Registration, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signups = append(f.signups, in)
	if f.err != nil {
		return registration.Registration{}, false, f.err
	}
	if in.ActivityID != f.activity.ID {
		return registration.Registration{}, false, registration.ActivityNotFound(in.ActivityID)
	}
	meta := in.Metadata
	if meta == nil {
		meta = []byte(`{}`)
	}
	return registration.Registration{
		ID: fakeRegID, ActivityID: in.ActivityID, UserID: in.Caller.UserID, Status: registration.Approved,
		Seats: max(in.Seats, 1), Metadata: meta, CreatedAt: f.activity.CreatedAt, UpdatedAt: f.activity.CreatedAt,
	}, f.replayed && in.IdempotencyKey != "", nil
}

func (f *fakeRegistrations) ListRegistrations(_ context.Context, lf registration.ListFilter) (registration.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed = append(f.listed, lf)
	if f.err != nil {
		return registration.Page{}, f.err
	}
	return registration.Page{Items: []registration.Registration{}}, nil
}

// fakeQueues is an admission queue that keeps everyone waiting, and
// records the places it was asked to forget.
type fakeQueues struct {
	mu        sync.Mutex
	joined    int
	forgotten []string
}

func (q *fakeQueues) Forget(activityID, userID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.forgotten = append(q.forgotten, activityID+"/"+userID)
}

func (q *fakeQueues) Join(_ context.Context, activityID, userID string) (onsale.Ticket, error) {
	q.joined++
	return onsale.Ticket{ActivityID: activityID, UserID: userID, State: onsale.Waiting, PollAfterMS: 1000}, nil
}

func (q *fakeQueues) Me(_ context.Context, activityID, userID string) (onsale.Ticket, error) {
	return onsale.Ticket{ActivityID: activityID, UserID: userID, State: onsale.Waiting, PollAfterMS: 1000}, nil
}

// edge is an HTTP edge on fakes, with no data service.
type edge struct {
	URL    string
	regs   *fakeRegistrations
	queues *fakeQueues
	auth   *httpapi.Authenticator
	server *httpapi.Server
}

// fakeNotes counts note views and waters in memory, every note open.
type fakeNotes struct {
	mu    sync.Mutex
	stats map[string]note.Stats
}

func (n *fakeNotes) Get(_ context.Context, noteID string) (note.Stats, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st, ok := n.stats[noteID]
	if !ok {
		st.NoteID = noteID
	}
	return st, nil
}

func (n *fakeNotes) Increment(_ context.Context, noteID string, kind note.Kind) (note.Stats, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stats == nil {
		n.stats = map[string]note.Stats{}
	}
	st := n.stats[noteID]
	st.NoteID = noteID
	if kind == note.View {
		st.Views++
	} else {
		st.Waters++
	}
	n.stats[noteID] = st
	return st, nil
}

func (n *fakeNotes) Register(ctx context.Context, noteID string) (note.Stats, bool, error) {
	st, err := n.Get(ctx, noteID)
	return st, false, err
}

// unusedWebhooks and unusedStreams register their routes on an edge; a
// test that calls one of their methods panics (the embedded interfaces
// are nil), which the edge answers 500.
type (
	unusedWebhooks struct{ httpapi.WebhookService }
	unusedStreams  struct{ httpapi.SeatStreams }
)

// startEdge serves an httpapi.Server on fakes, with every route, closed
// when t ends. configure, when given, changes the configuration first.
func startEdge(t *testing.T, configure ...func(*httpapi.Config)) *edge {
	t.Helper()
	auth, err := httpapi.NewTokenAuthenticator(t.Context(), httpapi.TokenConfig{Secret: []byte(apptest.Secret)})
	require.NoError(t, err)
	e := &edge{regs: newFakeRegistrations(), queues: &fakeQueues{}, auth: auth}
	seats := func(_ context.Context, id string) (registration.Seats, error) {
		a, err := e.regs.GetActivity(context.Background(), id)
		if err != nil {
			return registration.Seats{}, err
		}
		return registration.Seats{ActivityID: id, Capacity: a.Capacity, Taken: a.Taken, Remaining: a.Remaining,
			Reserved: a.Reserved, Source: registration.SourceDatabase, AsOf: a.UpdatedAt}, nil
	}
	cfg := httpapi.Config{
		Registrations: e.regs, Seats: seats, Auth: auth, Queues: e.queues,
		Notes: &fakeNotes{}, Webhooks: unusedWebhooks{}, Streams: unusedStreams{},
		PingPostgres: func(context.Context) error { return nil }, Logger: slog.New(slog.DiscardHandler),
	}
	for _, f := range configure {
		f(&cfg)
	}
	e.server = httpapi.New(cfg)
	ts := httptest.NewServer(e.server.Handler())
	t.Cleanup(ts.Close)
	e.URL = ts.URL
	return e
}

// token signs a token of sub, an admin's when admin is set.
func (e *edge) token(t *testing.T, sub string, admin bool) string {
	t.Helper()
	tok, err := e.auth.Sign(sub, admin, time.Hour)
	require.NoError(t, err)
	return tok
}

// do sends a request to the edge over apptest.Client, which checks the
// exchange against api/openapi.yaml; headers are pairs of name and value.
func (e *edge) do(t *testing.T, method, path, token string, body any, headers ...string) apptest.Response {
	t.Helper()
	res, err := apptest.Do(method, e.URL+path, token, body, headers...)
	require.NoError(t, err)
	return res
}

// ExportRegistrations emits exported, one by one.
func (f *fakeRegistrations) ExportRegistrations(_ context.Context, activityID string, _ registration.Status, emit func(registration.Registration) error) error {
	f.mu.Lock()
	rows, err := f.exported, f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if activityID != f.activity.ID {
		return registration.ActivityNotFound(activityID)
	}
	for _, r := range rows {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}
