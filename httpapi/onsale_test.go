package httpapi_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/webhook"
)

// createOnSale creates an activity through the API and returns it.
func createOnSale(t *testing.T, inst *apptest.Instance, in client.NewActivity) client.Activity {
	t.Helper()
	a, err := inst.API(t, "admin", true).CreateActivity(t.Context(), in)
	require.NoError(t, err)
	return a
}

// TestSignupWindow: before opens_at a signup is registration_closed with
// both times; inside the window it is admitted; after closes_at it is
// closed again, and a cancellation still goes on. The window is moved on
// one instance and checked on the other (the authority's clock decides).
func TestSignupWindow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	opens := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	act := createOnSale(t, a, client.NewActivity{Title: "opens later", Capacity: 10, OpensAt: &opens})
	require.NotNil(t, act.OpensAt)
	require.True(t, opens.Equal(*act.OpensAt))
	require.Nil(t, act.ClosesAt)
	require.Nil(t, act.Queue)

	_, err := b.Signup(t, act.ID, "early")
	e := apptest.Refusal(t, err)
	require.Equal(t, http.StatusConflict, e.Status)
	require.Equal(t, client.CodeRegistrationClosed, e.Code)
	require.NotNil(t, e.OpensAt)
	require.True(t, opens.Equal(*e.OpensAt))
	require.Nil(t, e.ClosesAt)

	admin := a.API(t, "admin", true)
	past := time.Now().Add(-time.Minute)
	_, err = admin.UpdateActivity(ctx, act.ID, client.ActivityPatch{OpensAt: &past})
	require.NoError(t, err)
	reg := b.MustSignup(t, act.ID, "early")
	require.EqualValues(t, "pending", reg.Status)

	closes := time.Now().Add(-time.Second)
	_, err = admin.UpdateActivity(ctx, act.ID, client.ActivityPatch{ClosesAt: &closes})
	require.NoError(t, err)
	_, err = b.Signup(t, act.ID, "late")
	e = apptest.Refusal(t, err)
	require.Equal(t, client.CodeRegistrationClosed, e.Code)
	require.NotNil(t, e.ClosesAt)
	cancelled, err := b.API(t, "early", false).CancelRegistration(ctx, reg.ID)
	require.NoError(t, err)
	require.EqualValues(t, "cancelled", cancelled.Status)

	// A window that closes before it opens is refused, whole.
	_, err = admin.UpdateActivity(ctx, act.ID, client.ActivityPatch{ClosesAt: new(past.Add(-time.Hour))})
	require.Equal(t, client.CodeInvalidRequest, apptest.Refusal(t, err).Code)
	_, err = admin.UpdateActivity(ctx, act.ID, client.ActivityPatch{ClearOpensAt: true, ClearClosesAt: true})
	require.NoError(t, err)
	require.EqualValues(t, "pending", b.MustSignup(t, act.ID, "late").Status)
}

// pollUntil polls the user's ticket on the instances in turn until done
// says so, and returns the last ticket.
func pollUntil(t *testing.T, insts []*apptest.Instance, activityID, user string, within time.Duration, done func(client.Ticket) bool) client.Ticket {
	t.Helper()
	deadline := time.Now().Add(within)
	for i := 0; ; i++ {
		tk, err := insts[i%len(insts)].API(t, user, false).QueueTicket(t.Context(), activityID)
		require.NoError(t, err)
		if done(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticket of %s still %+v after %s", user, tk, within)
		}
		time.Sleep(100 * time.Millisecond) // the pace of a client that polls, not a wait for a condition: done is the condition
	}
}

// spearman returns the rank correlation of two permutations of 1..n.
func spearman(x, y []int64) float64 {
	n := float64(len(x))
	var d2 float64
	for i := range x {
		d := float64(x[i] - y[i])
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// TestQueueFairStartAndTokens: 60 users join before opens_at, on two
// instances, and hold no position; at opens_at their positions become a
// permutation of 1..60 unrelated to their join order, and all are
// admitted. A signup needs the user's own unused token; a replay under the
// same Idempotency-Key is not a second use.
func TestQueueFairStartAndTokens(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}
	// Opening later, then moved to now once everyone joined.
	opens := time.Now().Add(time.Hour)
	act := createOnSale(t, a, client.NewActivity{Title: "fair start", Capacity: 100, OpensAt: &opens,
		Queue: &client.QueueSettings{AdmitPerSecond: 1000, MaxAdmitted: 1000}})
	require.Equal(t, &client.QueueSettings{AdmitPerSecond: 1000, MaxAdmitted: 1000, TokenSeconds: 120, AbsentSeconds: 60}, act.Queue)

	const n = 60
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("fair-%02d", i)
		tk, err := insts[i%2].API(t, users[i], false).JoinQueue(ctx, act.ID)
		require.NoError(t, err)
		require.Equal(t, "waiting", tk.State)
		require.Nil(t, tk.Position, "no position before the opening")
		again, err := insts[(i+1)%2].API(t, users[i], false).JoinQueue(ctx, act.ID)
		require.NoError(t, err)
		require.Equal(t, tk.State, again.State, "joining again returns the same place")
	}
	// A signup before the opening is closed, token or not.
	_, err := a.Signup(t, act.ID, users[0])
	require.Equal(t, client.CodeRegistrationClosed, apptest.Refusal(t, err).Code)
	now := time.Now()
	_, err = b.API(t, "admin", true).UpdateActivity(ctx, act.ID, client.ActivityPatch{OpensAt: &now})
	require.NoError(t, err)

	tickets := make([]client.Ticket, n)
	for i, u := range users {
		tickets[i] = pollUntil(t, insts, act.ID, u, 30*time.Second, func(tk client.Ticket) bool { return tk.State == "admitted" })
		require.NotNil(t, tickets[i].Position)
		require.NotNil(t, tickets[i].AdmissionToken)
	}
	joinOrder, positions := make([]int64, n), make([]int64, n)
	for i, tk := range tickets {
		joinOrder[i], positions[i] = int64(i+1), *tk.Position
	}
	sorted := slices.Sorted(slices.Values(positions))
	for i, p := range sorted {
		require.Equal(t, int64(i+1), p, "the positions are a permutation of 1..%d", n)
	}
	rho := spearman(joinOrder, positions)
	t.Logf("Spearman's rho of join order and position: %.3f", rho)
	require.Less(t, math.Abs(rho), 0.5, "positions unrelated to join order")

	// Tokens: none, someone else's, then one's own (replayed), then used.
	_, err = b.Signup(t, act.ID, users[0])
	e := apptest.Refusal(t, err)
	require.Equal(t, http.StatusForbidden, e.Status)
	require.Equal(t, client.CodeAdmissionRequired, e.Code)
	_, err = b.Signup(t, act.ID, users[0], client.SignupOptions{AdmissionToken: *tickets[1].AdmissionToken})
	require.Equal(t, client.CodeAdmissionRequired, apptest.Refusal(t, err).Code)
	first, err := a.Signup(t, act.ID, users[0], client.SignupOptions{AdmissionToken: *tickets[0].AdmissionToken, IdempotencyKey: "k-0"})
	require.NoError(t, err)
	require.EqualValues(t, "pending", first.Registration.Status)
	replay, err := b.Signup(t, act.ID, users[0], client.SignupOptions{AdmissionToken: *tickets[0].AdmissionToken, IdempotencyKey: "k-0"})
	require.NoError(t, err)
	require.True(t, replay.Replayed)
	require.Equal(t, first.Registration.ID, replay.Registration.ID)
	_, err = a.Signup(t, act.ID, users[0], client.SignupOptions{AdmissionToken: *tickets[0].AdmissionToken, IdempotencyKey: "k-1"})
	require.Equal(t, client.CodeAdmissionRequired, apptest.Refusal(t, err).Code, "a used token")
	used := pollUntil(t, insts, act.ID, users[0], 10*time.Second, func(tk client.Ticket) bool { return tk.State == "used" })
	require.Nil(t, used.AdmissionToken)

	// Everyone else signs up with their own token, concurrently.
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() {
			_, err := insts[i%2].Signup(t, act.ID, users[i], client.SignupOptions{AdmissionToken: *tickets[i].AdmissionToken})
			if err != nil {
				t.Errorf("signup of %s: %v", users[i], err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, n, a.AuthorityTaken(t, act.ID))
}

// TestQueueRateAndCap: with admit_per_second 10, places are admitted at
// about 10 a second, in position order; with max_admitted 5, exactly 5
// tokens are out until one is used, and then another place is admitted.
func TestQueueRateAndCap(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}

	t.Run("rate", func(t *testing.T) {
		t.Parallel()
		act := createOnSale(t, a, client.NewActivity{Title: "rate", Capacity: 1000,
			Queue: &client.QueueSettings{AdmitPerSecond: 10, MaxAdmitted: 1000, TokenSeconds: 3600, AbsentSeconds: 3600}})
		const n = 80
		for i := range n {
			_, err := insts[i%2].API(t, fmt.Sprintf("rate-%02d", i), false).JoinQueue(ctx, act.ID)
			require.NoError(t, err)
		}
		// Sampled about ten times a second over four seconds.
		require.Never(t, func() bool {
			admitted, positions, err := readQueueStates(ctx, a, act.ID)
			return err != nil || admitted != positions
		}, 4*time.Second, 100*time.Millisecond, "the admitted places are the first positions")
		// By the authority's clock: in any span of T seconds, at most a
		// second's allowance saved (10) plus 10 T were admitted.
		rows, err := a.App.Pool.Query(ctx, `SELECT extract(epoch FROM t.admitted_at)::float8 FROM queue_ticket t
			JOIN activity a ON a.id = t.activity_id WHERE a.public_id = $1 AND t.admitted_at IS NOT NULL ORDER BY t.admitted_at`, act.ID)
		require.NoError(t, err)
		at, err := pgx.CollectRows(rows, pgx.RowTo[float64])
		require.NoError(t, err)
		require.Greater(t, len(at), 20, "admission goes on")
		for i := range at {
			for j := i; j < len(at); j++ {
				require.LessOrEqual(t, float64(j-i+1), 10+10*(at[j]-at[i])+0.5, "admitted %d in %.3fs", j-i+1, at[j]-at[i])
			}
		}
		span := at[len(at)-1] - at[0]
		t.Logf("admitted %d in %.2fs: %.1f a second after the first second's allowance", len(at), span, float64(len(at)-10)/span)
	})

	t.Run("cap", func(t *testing.T) {
		t.Parallel()
		act := createOnSale(t, a, client.NewActivity{Title: "cap", Capacity: 1000,
			Queue: &client.QueueSettings{AdmitPerSecond: 1000, MaxAdmitted: 5, TokenSeconds: 3600, AbsentSeconds: 3600}})
		users := make([]string, 12)
		for i := range users {
			users[i] = fmt.Sprintf("cap-%02d", i)
			_, err := insts[i%2].API(t, users[i], false).JoinQueue(ctx, act.ID)
			require.NoError(t, err)
		}
		first := pollUntil(t, insts, act.ID, users[0], 10*time.Second, func(tk client.Ticket) bool { return tk.State == "admitted" })
		// The cap holds over many advances of the controller (a tick is
		// 200 ms), not just the first.
		require.Never(t, func() bool {
			admitted, _, err := readQueueStates(ctx, a, act.ID)
			return err != nil || admitted > 5
		}, time.Second, 20*time.Millisecond, "more than max_admitted tokens out")
		admitted, _ := queueStates(t, a, act.ID)
		require.Equal(t, 5, admitted, "never more than max_admitted tokens out")
		_, err := b.Signup(t, act.ID, users[0], client.SignupOptions{AdmissionToken: *first.AdmissionToken})
		require.NoError(t, err)
		pollUntil(t, insts, act.ID, users[5], 10*time.Second, func(tk client.Ticket) bool { return tk.State == "admitted" })
		admitted, _ = queueStates(t, a, act.ID)
		require.Equal(t, 5, admitted, "a used token freed one slot, and only one")
	})
}

// queueStates reads the activity's places at the authority: how many are
// admitted, and how many places admitted or used form the first positions
// (-1 if they do not).
func queueStates(t *testing.T, inst *apptest.Instance, activityID string) (out, prefix int) {
	t.Helper()
	out, prefix, err := readQueueStates(t.Context(), inst, activityID)
	require.NoError(t, err)
	return out, prefix
}

// readQueueStates is queueStates with its error returned, for conditions
// that run outside the test's goroutine.
func readQueueStates(ctx context.Context, inst *apptest.Instance, activityID string) (out, prefix int, err error) {
	rows, err := inst.App.Pool.Query(ctx, `SELECT t.state, t.position FROM queue_ticket t JOIN activity a ON a.id = t.activity_id
		WHERE a.public_id = $1 ORDER BY t.position`, activityID)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	var taken []int64
	for rows.Next() {
		var state string
		var pos *int64
		if err := rows.Scan(&state, &pos); err != nil {
			return 0, 0, err
		}
		if state == "admitted" {
			out++
		}
		if (state == "admitted" || state == "used") && pos != nil {
			taken = append(taken, *pos)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	for i, p := range taken {
		if p != int64(i+1) {
			return out, -1, nil
		}
	}
	return out, len(taken), nil
}

// TestQueuePresence: a waiting place not asked about for absent_seconds
// lapses to expired, while one asked about stays; joining again gives a
// new place at the end.
func TestQueuePresence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}
	act := createOnSale(t, a, client.NewActivity{Title: "presence", Capacity: 10,
		Queue: &client.QueueSettings{AdmitPerSecond: 1, MaxAdmitted: 1, TokenSeconds: 3600, AbsentSeconds: 10}})
	// The first place takes the only token and keeps it: the others wait.
	_, err := a.API(t, "holder", false).JoinQueue(ctx, act.ID)
	require.NoError(t, err)
	holder := pollUntil(t, insts, act.ID, "holder", 10*time.Second, func(tk client.Ticket) bool { return tk.State == "admitted" })
	absent, err := a.API(t, "absent", false).JoinQueue(ctx, act.ID)
	require.NoError(t, err)
	present, err := b.API(t, "present", false).JoinQueue(ctx, act.ID)
	require.NoError(t, err)
	require.Equal(t, "waiting", absent.State)
	require.Less(t, *holder.Position, *absent.Position)

	// The present one asks every second, on either instance.
	lapsed := pollUntil(t, insts, act.ID, "present", 40*time.Second, func(client.Ticket) bool {
		var state string
		require.NoError(t, a.App.Pool.QueryRow(ctx, `SELECT t.state FROM queue_ticket t JOIN activity a ON a.id = t.activity_id
			WHERE a.public_id = $1 AND t.user_id = 'absent'`, act.ID).Scan(&state))
		time.Sleep(900 * time.Millisecond) // the pace of a present holder: proves asking about once a second keeps the place
		return state == "expired"
	})
	require.Equal(t, "waiting", lapsed.State, "the present place stays")
	tk, err := b.API(t, "absent", false).QueueTicket(ctx, act.ID)
	require.NoError(t, err)
	require.Equal(t, "expired", tk.State)
	again, err := a.API(t, "absent", false).JoinQueue(ctx, act.ID)
	require.NoError(t, err)
	require.Equal(t, "waiting", again.State)
	require.Greater(t, *again.Position, *present.Position, "a new place at the end")
	_, err = a.API(t, "nobody", false).QueueTicket(ctx, act.ID)
	require.Equal(t, client.CodeNotFound, apptest.Refusal(t, err).Code)
}

// TestQueueBadInput: queue settings out of range, a queue on an activity
// without one, and a poll of an activity never joined are clear 4xx.
func TestQueueBadInput(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	for _, body := range []map[string]any{
		{"title": "q", "capacity": 1, "queue": map[string]any{"admit_per_second": 0, "max_admitted": 1}},
		{"title": "q", "capacity": 1, "queue": map[string]any{"admit_per_second": 1, "max_admitted": 100001}},
		{"title": "q", "capacity": 1, "queue": map[string]any{"admit_per_second": 1, "max_admitted": 1, "token_seconds": 5}},
		{"title": "q", "capacity": 1, "queue": map[string]any{"admit_per_second": 1}},
		{"title": "q", "capacity": 1, "queue": map[string]any{"admit_per_second": 1, "max_admitted": 1, "extra": 1}},
		{"title": "q", "capacity": 1, "queue": "fast"},
		{"title": "q", "capacity": 1, "opens_at": "tomorrow"},
		{"title": "q", "capacity": 1, "opens_at": "2027-01-02T00:00:00Z", "closes_at": "2027-01-01T00:00:00Z"},
	} {
		r := inst.MustDo(t, http.MethodPost, "/v1/activities", admin, body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", body, r.Body)
		require.Equal(t, "invalid_request", r.ErrorCode())
	}
	plain := inst.CreateActivity(t, "no queue", 5)
	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+plain+"/queue", inst.Token(t, "u", false), nil)
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
	r = inst.MustDo(t, http.MethodGet, "/v1/activities/"+plain+"/queue/me", inst.Token(t, "u", false), nil)
	require.Equal(t, http.StatusNotFound, r.Status, string(r.Body))
	r = inst.MustDo(t, http.MethodPost, "/v1/activities/a_nope/queue", inst.Token(t, "u", false), nil)
	require.Equal(t, http.StatusNotFound, r.Status, string(r.Body))
	closed := time.Now().Add(-time.Second)
	act := createOnSale(t, inst, client.NewActivity{Title: "closed", Capacity: 1, ClosesAt: &closed,
		Queue: &client.QueueSettings{AdmitPerSecond: 1, MaxAdmitted: 1}})
	r = inst.MustDo(t, http.MethodPost, "/v1/activities/"+act.ID+"/queue", inst.Token(t, "u", false), nil)
	require.Equal(t, http.StatusConflict, r.Status, string(r.Body))
	require.Equal(t, "registration_closed", r.ErrorCode())
}

// TestQueuePollsCostNoStatementWhileNothingChanged: polls of a waiting
// place are answered from the instance's memory: after the first, which
// reads the place and its line, none reaches PostgreSQL. (The polling
// instance's background loops are idle here.)
func TestQueuePollsCostNoStatementWhileNothingChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	// Every background loop of the polling instance idle, so that every
	// statement it sends is a poll's.
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, App: app.Options{
		ExpiryInterval:    time.Hour,
		ReconcileInterval: time.Hour,
		OnSale:            onsale.Options{Tick: time.Hour},
		Webhooks:          webhook.DispatcherConfig{PollInterval: time.Hour, BacklogInterval: time.Hour},
	}})
	opens := time.Now().Add(time.Hour)
	act := createOnSale(t, a, client.NewActivity{Title: "polled", Capacity: 10, OpensAt: &opens,
		Queue: &client.QueueSettings{AdmitPerSecond: 10, MaxAdmitted: 10}})
	_, err := a.API(t, "poller", false).JoinQueue(ctx, act.ID)
	require.NoError(t, err)
	api := b.API(t, "poller", false)
	first, err := api.QueueTicket(ctx, act.ID)
	require.NoError(t, err)
	require.Equal(t, "waiting", first.State)
	require.Positive(t, first.PollAfterMS)
	before := b.Queries.Count()
	for range 200 {
		tk, err := api.QueueTicket(ctx, act.ID)
		require.NoError(t, err)
		require.Equal(t, "waiting", tk.State)
	}
	require.Zero(t, b.Queries.Count()-before, "200 polls, no statement")
}
