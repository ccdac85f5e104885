package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
	"github.com/physiciansnet/capacityd/webhook"
)

type hookBundle struct {
	pool *pgxpool.Pool
	url  string
	s    *store.Store
}

func setupHooks(t *testing.T) hookBundle {
	t.Helper()
	url := testenv.NewDatabase(t)
	pool := testenv.Pool(t, url, 8)
	return hookBundle{pool: pool, url: url, s: store.New(pool)}
}

func (b hookBundle) webhook(t *testing.T, events []string, activityID *string) webhook.Webhook {
	t.Helper()
	w, err := b.s.CreateWebhook(context.Background(), webhook.Webhook{ID: newID("wh"), URL: "http://127.0.0.1:9/",
		Events: events, ActivityID: activityID}, []byte("sealed"))
	require.NoError(t, err)
	return w
}

func (b hookBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func apply(t *testing.T, s *store.Store, activityID string, cmds ...registration.Command) registration.Plan {
	t.Helper()
	out, err := s.Apply(context.Background(), []registration.CommandBatch{{ActivityID: activityID, Commands: cmds}}, time.Now())
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	return out[0].Plan
}

// deliveries reads a webhook's deliveries by state.
func (b hookBundle) deliveries(t *testing.T, w webhook.Webhook) map[webhook.State]int {
	t.Helper()
	ds, err := b.s.Deliveries(context.Background(), w.ID, webhook.MaxDeliveryList)
	require.NoError(t, err)
	out := map[webhook.State]int{}
	for _, d := range ds {
		out[d.State]++
	}
	return out
}

// TestChangesWriteNothingPerWebhook: the change transaction writes no row
// for webhooks; each webhook's deliveries are read from the event log,
// filtered by its types and activity; a transaction that fails leaves
// none.
func TestChangesWriteNothingPerWebhook(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	acts := createActivities(t, b.s, 2, 10)
	all := b.webhook(t, []string{"*"}, nil)
	created := b.webhook(t, []string{"registration.created"}, nil)
	second := b.webhook(t, []string{"*"}, &acts[1])
	written := func() int {
		return b.count(t, `SELECT (SELECT count(*) FROM webhook_cursor) + (SELECT count(*) FROM webhook_retry) + (SELECT count(*) FROM webhook_attempt)`)
	}
	before := written()

	p := apply(t, b.s, acts[0], signupOf("u1"), signupOf("u2"))
	require.Len(t, p.Events, 2)
	reg := p.Events[0].RegistrationID
	apply(t, b.s, acts[0], registration.CancelCommand{RegistrationID: reg, Caller: registration.Caller{UserID: "u1"}})
	apply(t, b.s, acts[1], signupOf("u3"))
	require.Equal(t, before, written(), "nothing written per webhook")

	require.Equal(t, map[webhook.State]int{webhook.Pending: 4}, b.deliveries(t, all), "every event")
	require.Equal(t, map[webhook.State]int{webhook.Pending: 3}, b.deliveries(t, created), "the created events")
	require.Equal(t, map[webhook.State]int{webhook.Pending: 1}, b.deliveries(t, second), "the second activity's event")

	// Metadata the database refuses fails the whole transaction: no
	// event, no delivery.
	bad := signupOf("u4")
	bad.Metadata = []byte(`{"broken":`)
	_, err := b.s.Apply(context.Background(), []registration.CommandBatch{{ActivityID: acts[0], Commands: []registration.Command{signupOf("u5"), bad}}}, time.Now())
	require.Error(t, err)
	require.Equal(t, map[webhook.State]int{webhook.Pending: 4}, b.deliveries(t, all))
}

// TestAWebhookReceivesTheEventsAfterItsCreation: a webhook that another
// instance adds receives the events recorded after its creation, not
// those before, and nothing once deleted.
func TestAWebhookReceivesTheEventsAfterItsCreation(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	other := store.New(testenv.Pool(t, b.url, 2))
	acts := createActivities(t, b.s, 1, 10)
	apply(t, b.s, acts[0], signupOf("u1")) // before the webhook

	w, err := other.CreateWebhook(context.Background(), webhook.Webhook{ID: newID("wh"), URL: "http://127.0.0.1:9/",
		Events: []string{"*"}}, []byte("sealed"))
	require.NoError(t, err)
	second := apply(t, b.s, acts[0], signupOf("u2")).Events[0]
	jobs, err := b.s.ClaimDeliveries(context.Background(), webhook.Claim{Lease: time.Minute, Slots: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, second.ID, jobs[0].EventID)

	require.NoError(t, other.DeleteWebhook(context.Background(), w.ID))
	apply(t, b.s, acts[0], signupOf("u3"))
	jobs, err = b.s.ClaimDeliveries(context.Background(), webhook.Claim{Lease: time.Minute, Slots: 10})
	require.NoError(t, err)
	require.Empty(t, jobs)
	require.Zero(t, b.count(t, `SELECT count(*) FROM webhook_cursor`))
}

// TestClaimsAreExclusiveLeasedAndFenced: concurrent claims from two stores
// take every event once, in leased batches; a batch not recorded is
// claimed again when its lease ends, and a late result of the earlier
// lease changes nothing. An event whose attempt fails joins the retry set
// while the cursor goes on past it; retries are claimed, fenced and given
// back like batches.
func TestClaimsAreExclusiveLeasedAndFenced(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	other := store.New(testenv.Pool(t, b.url, 8))
	acts := createActivities(t, b.s, 3, 1000)
	w := b.webhook(t, []string{"*"}, nil)
	for i := range 20 {
		cmds := make([]registration.Command, 10)
		for j := range cmds {
			cmds[j] = signupOf(newID("u") + string(rune('a'+i)))
		}
		apply(t, b.s, acts[i%3], cmds...)
	}

	ctx := context.Background()
	var mu sync.Mutex
	claimed := map[webhook.Ref]int{}
	var wg sync.WaitGroup
	var total atomic.Int64
	for g := range 8 {
		s := []*store.Store{b.s, other}[g%2]
		wg.Go(func() {
			for i := 0; total.Load() < 200 && i < 1000; i++ {
				jobs, err := s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 7})
				require.NoError(t, err)
				mu.Lock()
				var results []webhook.Attempt
				for _, j := range jobs {
					claimed[j.Ref]++
					require.Equal(t, 1, j.Attempt)
					require.Equal(t, w.ID, j.WebhookID)
					require.NotEmpty(t, j.Body)
					require.NotNil(t, j.Batch)
					results = append(results, webhook.Attempt{Ref: j.Ref, Batch: j.Batch, Attempt: 1, At: time.Now(),
						StatusCode: 200, Outcome: webhook.OutcomeDelivered})
				}
				mu.Unlock()
				total.Add(int64(len(jobs)))
				require.NoError(t, s.RecordAttempts(ctx, results))
			}
		})
	}
	wg.Wait()
	require.Len(t, claimed, 200, "every event claimed")
	for ref, n := range claimed {
		require.Equal(t, 1, n, "%v claimed once", ref)
	}
	require.Equal(t, 200, b.count(t, `SELECT count(*) FROM webhook_attempt`))
	jobs, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 100})
	require.NoError(t, err)
	require.Empty(t, jobs, "nothing left")

	// A leased batch is nobody else's.
	_, err = b.pool.Exec(ctx, `DELETE FROM webhook_attempt; UPDATE webhook_cursor SET seq = 0`)
	require.NoError(t, err)
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 100})
	require.NoError(t, err)
	require.Len(t, jobs, 200)
	jobs, err = other.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 100})
	require.NoError(t, err)
	require.Empty(t, jobs, "leased batches are nobody else's")

	// Slots: with 2 of 3 busy, one more.
	_, err = b.pool.Exec(ctx, `UPDATE webhook_cursor SET leased_until = NULL, claimed_to = NULL, seq = 0
		WHERE activity_id = (SELECT id FROM activity WHERE public_id = $1)`, acts[0])
	require.NoError(t, err)
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: 300 * time.Millisecond, Slots: 3, Busy: map[string]int{w.ID: 2},
		Activities: []string{acts[0]}})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one activity's batch of one")
	first := jobs[0]
	require.EqualValues(t, 1, first.Ref.Seq)

	// The lease ends unrecorded: the batch is claimed again.
	var again webhook.Job
	require.Eventually(t, func() bool {
		jobs, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 1, Activities: []string{acts[0]}})
		require.NoError(t, err)
		for _, j := range jobs {
			if j.Ref == first.Ref {
				again = j
			}
		}
		return again.Batch != nil
	}, 5*time.Second, 50*time.Millisecond)
	require.Greater(t, again.Batch.Fence, first.Batch.Fence)

	ok := func(j webhook.Job) webhook.Attempt {
		return webhook.Attempt{Ref: j.Ref, Batch: j.Batch, Attempt: j.Attempt, At: time.Now(), StatusCode: 200, Outcome: webhook.OutcomeDelivered, EventAt: j.CreatedAt}
	}
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{ok(first)}))
	require.Zero(t, b.count(t, `SELECT count(*) FROM webhook_attempt`), "a late result of a lost lease is not recorded")
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{ok(again)}))
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{ok(again)}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_attempt`), "recorded once")

	// Of a batch of two, the first fails: it joins the retry set, and the
	// cursor goes on past both.
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 2, Activities: []string{acts[0]}})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	failing := jobs[0]
	fail := webhook.Attempt{Ref: failing.Ref, Batch: failing.Batch, Attempt: 1, At: time.Now(), StatusCode: 500, Outcome: webhook.OutcomeRetry, EventAt: failing.CreatedAt}
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{fail, ok(jobs[1])}))
	require.Equal(t, 3, b.count(t, `SELECT seq FROM webhook_cursor c JOIN activity a ON a.id = c.activity_id WHERE a.public_id = $1`, acts[0]))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_retry WHERE state = 'pending' AND attempts = 1`))

	// The retry is due at once (no delay): claimed as attempt 2, with the
	// same body; a result for attempt 1 changes nothing.
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 1})
	require.NoError(t, err)
	retries := retriesOf(jobs)
	require.Len(t, retries, 1, "with the next batch")
	retry := retries[0]
	require.Nil(t, retry.Batch)
	require.Equal(t, failing.Ref, retry.Ref)
	require.Equal(t, 2, retry.Attempt)
	require.Equal(t, failing.Body, retry.Body)
	require.Equal(t, failing.EventID, retry.EventID)
	stale := fail
	stale.Batch = nil
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{stale}))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM webhook_attempt`))

	// Given back unsent, it is due again at once, its attempt not counted.
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{{Ref: retry.Ref, Attempt: retry.Attempt, Outcome: webhook.OutcomeUnsent}}))
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the next batch is still leased")
	require.Nil(t, jobs[0].Batch)
	require.Equal(t, 2, jobs[0].Attempt, "an unsent claim is not an attempt")
	done := ok(jobs[0])
	done.Batch = nil
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{done}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_retry WHERE state = 'delivered' AND attempts = 2 AND delivered_at IS NOT NULL`))
	require.Equal(t, map[webhook.State]int{webhook.Delivered: 3, webhook.Pending: 197}, b.deliveries(t, w))

	backlog, err := b.s.Backlog(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 197, backlog.Pending)
	require.Equal(t, 1, backlog.Webhooks)
	require.False(t, backlog.Oldest.IsZero())
}

// retriesOf returns the retries among jobs.
func retriesOf(jobs []webhook.Job) []webhook.Job {
	var out []webhook.Job
	for _, j := range jobs {
		if j.Batch == nil {
			out = append(out, j)
		}
	}
	return out
}

func TestPurgeDeletesOldRecordsOnly(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	acts := createActivities(t, b.s, 1, 10)
	b.webhook(t, []string{"*"}, nil)
	apply(t, b.s, acts[0], signupOf("old"), signupOf("older"))
	ctx := context.Background()
	jobs, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{
		{Ref: jobs[0].Ref, Batch: jobs[0].Batch, Attempt: 1, At: time.Now(), StatusCode: 200, Outcome: webhook.OutcomeDelivered},
		{Ref: jobs[1].Ref, Batch: jobs[1].Batch, Attempt: 1, At: time.Now(), StatusCode: 500, Outcome: webhook.OutcomeFailed, EventAt: jobs[1].CreatedAt},
	}))
	_, err = b.pool.Exec(ctx, `UPDATE webhook_retry SET created_at = now() - interval '31 days';
		UPDATE webhook_attempt SET at = now() - interval '31 days'`)
	require.NoError(t, err)
	apply(t, b.s, acts[0], signupOf("new"))
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{
		{Ref: jobs[0].Ref, Batch: jobs[0].Batch, Attempt: 1, At: time.Now(), StatusCode: 500, Outcome: webhook.OutcomeRetry, RetryIn: time.Hour, EventAt: jobs[0].CreatedAt},
	}))

	n, err := b.s.PurgeDeliveries(ctx, time.Now().Add(-webhook.PurgeAfter))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_retry`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_attempt`))
}

// TestWebhookDeliveryAttemptsAreReadByEvent: the attempts of one event's
// delivery to one webhook are read in attempt order with what was
// recorded (status or error, start, duration), none for a delivery not
// yet tried; an event that a webhook does not receive, or that does not
// exist, has no delivery.
func TestWebhookDeliveryAttemptsAreReadByEvent(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	ctx := context.Background()
	acts := createActivities(t, b.s, 2, 10)
	all := b.webhook(t, []string{"*"}, nil)
	only0 := b.webhook(t, []string{"*"}, &acts[0])
	target := apply(t, b.s, acts[0], signupOf("u1"), signupOf("u2")).Events[1]
	untried := apply(t, b.s, acts[0], signupOf("u3")).Events[0]
	elsewhere := apply(t, b.s, acts[1], signupOf("u4")).Events[0]

	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	results := []webhook.Attempt{
		{Attempt: 1, At: start, Duration: 12345 * time.Microsecond, StatusCode: 500, Outcome: webhook.OutcomeRetry},
		{Attempt: 2, At: start.Add(5 * time.Second), Duration: 10 * time.Second, Error: "timeout: no answer within 10s", Outcome: webhook.OutcomeRetry},
		{Attempt: 3, At: start.Add(15 * time.Second), Duration: 0, StatusCode: 204, Outcome: webhook.OutcomeDelivered},
	}
	for _, r := range results {
		// Every due delivery is claimed (and the others stay leased): the
		// first attempt in a batch, whose other events are given back (to
		// the retry set, where they stay leased afterwards); the target's
		// result makes it due again at once.
		jobs, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 100})
		require.NoError(t, err)
		var job *webhook.Job
		for i, j := range jobs {
			if j.WebhookID == all.ID && j.EventID == target.ID {
				job = &jobs[i]
			}
		}
		require.NotNil(t, job, "attempt %d claimed", r.Attempt)
		require.Equal(t, r.Attempt, job.Attempt)
		r.Ref, r.Batch, r.EventAt = job.Ref, job.Batch, job.CreatedAt
		recorded := []webhook.Attempt{r}
		for _, j := range jobs {
			if j.Batch != nil && j.Batch == job.Batch && j.Ref != job.Ref {
				recorded = append(recorded, webhook.Attempt{Ref: j.Ref, Batch: j.Batch, Attempt: 1, Outcome: webhook.OutcomeUnsent, EventAt: j.CreatedAt})
			}
		}
		require.NoError(t, b.s.RecordAttempts(ctx, recorded))
	}

	got, err := b.s.DeliveryAttempts(ctx, all.ID, target.ID, acts[0], target.Seq)
	require.NoError(t, err)
	ptr := func(n int) *int { return &n }
	timeout := "timeout: no answer within 10s"
	require.Equal(t, []webhook.DeliveryAttempt{
		{Attempt: 1, At: start, StatusCode: ptr(500), DurationMS: 12.345},
		{Attempt: 2, At: start.Add(5 * time.Second), Error: &timeout, DurationMS: 10000},
		{Attempt: 3, At: start.Add(15 * time.Second), StatusCode: ptr(204), DurationMS: 0},
	}, got)

	got, err = b.s.DeliveryAttempts(ctx, all.ID, untried.ID, acts[0], untried.Seq)
	require.NoError(t, err)
	require.Empty(t, got, "a delivery given back, then claimed with no result recorded, has no attempt")
	got, err = b.s.DeliveryAttempts(ctx, only0.ID, target.ID, acts[0], target.Seq)
	require.NoError(t, err)
	require.Empty(t, got, "another webhook's delivery of the same event: its own attempts")

	for _, c := range []struct {
		webhookID, eventID, activityID string
		seq                            int64
	}{
		{only0.ID, elsewhere.ID, acts[1], elsewhere.Seq},      // not received by that webhook
		{all.ID, target.ID, acts[0], 99},                      // no such event
		{all.ID, target.ID, acts[1], target.Seq},              // the id names another event
		{all.ID, target.ID, newID("a"), target.Seq},           // no such activity
		{newID("wh"), target.ID, acts[0], target.Seq},         // no such webhook
		{all.ID, "ev_" + acts[0] + "_1", acts[0], target.Seq}, // not the event's id
	} {
		_, err := b.s.DeliveryAttempts(ctx, c.webhookID, c.eventID, c.activityID, c.seq)
		require.Error(t, err, "%+v", c)
		require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err), "%+v", c)
	}
}
