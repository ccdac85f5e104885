package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/testenv"
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

// TestOutboxIsWrittenWithTheEvents: the change transaction queues one
// delivery per matching enabled webhook and one message per event that a
// webhook receives; a transaction that fails leaves neither.
func TestOutboxIsWrittenWithTheEvents(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	acts := createActivities(t, b.s, 2, 10)
	all := b.webhook(t, []string{"*"}, nil)
	created := b.webhook(t, []string{"registration.created"}, nil)
	second := b.webhook(t, []string{"*"}, &acts[1])

	p := apply(t, b.s, acts[0], signupOf("u1"), signupOf("u2"))
	require.Len(t, p.Events, 2)
	reg := p.Events[0].RegistrationID
	apply(t, b.s, acts[0], registration.CancelCommand{RegistrationID: reg, Caller: registration.Caller{UserID: "u1"}})
	apply(t, b.s, acts[1], signupOf("u3"))

	perHook := func(w webhook.Webhook) int {
		return b.count(t, `SELECT count(*) FROM webhook_delivery d JOIN webhook w ON w.id = d.webhook_id WHERE w.public_id = $1`, w.ID)
	}
	require.Equal(t, 4, perHook(all), "every event")
	require.Equal(t, 3, perHook(created), "the created events")
	require.Equal(t, 1, perHook(second), "the second activity's event")
	require.Equal(t, 4, b.count(t, `SELECT count(*) FROM webhook_message`), "one message per event, whatever the webhooks")
	require.Equal(t, 8, b.count(t, `SELECT count(*) FROM webhook_delivery WHERE state = 'pending' AND attempts = 0`))

	// Metadata the database refuses fails the whole transaction: no
	// event, no delivery, no message.
	bad := signupOf("u4")
	bad.Metadata = []byte(`{"broken":`)
	_, err := b.s.Apply(context.Background(), []registration.CommandBatch{{ActivityID: acts[0], Commands: []registration.Command{signupOf("u5"), bad}}}, time.Now())
	require.Error(t, err)
	require.Equal(t, 4, b.count(t, `SELECT count(*) FROM webhook_message`))
	require.Equal(t, 8, b.count(t, `SELECT count(*) FROM webhook_delivery`))
}

// TestOutboxSeesAWebhookAnotherInstanceAdded: an instance that found no
// webhook skips the payloads, yet the first transaction after another
// instance adds one queues its deliveries.
func TestOutboxSeesAWebhookAnotherInstanceAdded(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	other := store.New(testenv.Pool(t, b.url, 2))
	acts := createActivities(t, b.s, 1, 10)
	apply(t, b.s, acts[0], signupOf("u1")) // no webhook: nothing queued
	require.Zero(t, b.count(t, `SELECT count(*) FROM webhook_delivery`))

	w, err := other.CreateWebhook(context.Background(), webhook.Webhook{ID: newID("wh"), URL: "http://127.0.0.1:9/",
		Events: []string{"*"}}, []byte("sealed"))
	require.NoError(t, err)
	apply(t, b.s, acts[0], signupOf("u2"))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_delivery`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_message`))

	require.NoError(t, other.DeleteWebhook(context.Background(), w.ID))
	apply(t, b.s, acts[0], signupOf("u3"))
	apply(t, b.s, acts[0], signupOf("u4"))
	require.Zero(t, b.count(t, `SELECT count(*) FROM webhook_delivery`))
}

// TestClaimsAreExclusiveLeasedAndFenced: concurrent claims from two stores
// take every due delivery once; an unrecorded claim is due again when its
// lease ends, as the next attempt; a late result of the earlier attempt
// changes nothing.
func TestClaimsAreExclusiveLeasedAndFenced(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	other := store.New(testenv.Pool(t, b.url, 8))
	acts := createActivities(t, b.s, 1, 1000)
	w := b.webhook(t, []string{"*"}, nil)
	for i := range 20 {
		cmds := make([]registration.Command, 10)
		for j := range cmds {
			cmds[j] = signupOf(newID("u") + string(rune('a'+i)))
		}
		apply(t, b.s, acts[0], cmds...)
	}

	ctx := context.Background()
	var mu sync.Mutex
	claimed := map[webhook.Ref]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		s := []*store.Store{b.s, other}[g%2]
		wg.Go(func() {
			for range 10 {
				jobs, err := s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 7})
				require.NoError(t, err)
				mu.Lock()
				for _, j := range jobs {
					claimed[j.Ref]++
					require.Equal(t, 1, j.Attempt)
					require.Equal(t, w.ID, j.WebhookID)
					require.NotEmpty(t, j.Body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, claimed, 200, "every delivery claimed")
	for ref, n := range claimed {
		require.Equal(t, 1, n, "%v claimed once", ref)
	}
	jobs, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 100})
	require.NoError(t, err)
	require.Empty(t, jobs, "leased deliveries are nobody else's")

	// Slots: with 2 of 3 busy, one more.
	_, err = b.pool.Exec(ctx, `UPDATE webhook_delivery SET leased_until = NULL, attempts = 0`)
	require.NoError(t, err)
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: 300 * time.Millisecond, Slots: 3, Busy: map[string]int{w.ID: 2}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	first := jobs[0]

	// The lease ends unrecorded: the delivery is due again, as attempt 2.
	var again webhook.Job
	require.Eventually(t, func() bool {
		jobs, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 300})
		require.NoError(t, err)
		for _, j := range jobs {
			if j.Ref == first.Ref {
				again = j
			}
		}
		return again.Attempt != 0
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, 2, again.Attempt)

	late := webhook.Attempt{Ref: first.Ref, Attempt: 1, At: time.Now(), StatusCode: 200, Outcome: webhook.OutcomeDelivered}
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{late}))
	require.Zero(t, b.count(t, `SELECT count(*) FROM webhook_attempt`), "a late result of a lost lease is not recorded")
	require.Zero(t, b.count(t, `SELECT count(*) FROM webhook_delivery WHERE state <> 'pending'`))
	now := webhook.Attempt{Ref: again.Ref, Attempt: 2, At: time.Now(), StatusCode: 200, Outcome: webhook.OutcomeDelivered}
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{now, now}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_attempt`), "recorded once")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_delivery WHERE state = 'delivered' AND delivered_at IS NOT NULL`))

	// A claim given back unsent is due again at once, its attempt not
	// counted.
	_, err = b.pool.Exec(ctx, `UPDATE webhook_delivery SET leased_until = NULL, attempts = 0 WHERE state = 'pending'`)
	require.NoError(t, err)
	jobs, err = b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 300})
	require.NoError(t, err)
	require.Len(t, jobs, 199)
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{{Ref: jobs[0].Ref, Attempt: jobs[0].Attempt, Outcome: webhook.OutcomeUnsent}}))
	again2, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 300})
	require.NoError(t, err)
	require.Len(t, again2, 1)
	require.Equal(t, jobs[0].Ref, again2[0].Ref)
	require.Equal(t, jobs[0].Attempt, again2[0].Attempt, "an unsent claim is not an attempt")

	backlog, err := b.s.Backlog(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 199, backlog.Pending)
	require.Equal(t, 1, backlog.Webhooks)
	require.False(t, backlog.Oldest.IsZero())
}

func TestPurgeDeletesOldRecordsOnly(t *testing.T) {
	t.Parallel()
	b := setupHooks(t)
	acts := createActivities(t, b.s, 1, 10)
	b.webhook(t, []string{"*"}, nil)
	apply(t, b.s, acts[0], signupOf("old"))
	ctx := context.Background()
	jobs, err := b.s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 10})
	require.NoError(t, err)
	require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{{Ref: jobs[0].Ref, Attempt: 1, At: time.Now(), StatusCode: 200, Outcome: webhook.OutcomeDelivered}}))
	_, err = b.pool.Exec(ctx, `UPDATE webhook_message SET created_at = now() - interval '31 days';
		UPDATE webhook_delivery SET created_at = now() - interval '31 days';
		UPDATE webhook_attempt SET at = now() - interval '31 days'`)
	require.NoError(t, err)
	apply(t, b.s, acts[0], signupOf("new"))

	n, err := b.s.PurgeDeliveries(ctx, time.Now().Add(-webhook.PurgeAfter))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_delivery`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM webhook_message`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM webhook_attempt`))
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
		// Every due delivery is claimed (and the others stay leased); the
		// target's result makes it due again at once.
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
		r.Ref = job.Ref
		require.NoError(t, b.s.RecordAttempts(ctx, []webhook.Attempt{r}))
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
	require.Empty(t, got, "a delivery claimed but with no result recorded has no attempt")
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
