package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/migrations"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
	"github.com/physiciansnet/capacityd/webhook"
)

// TestMigrationCarriesPendingDeliveriesOver: a database with the outbox
// (migrations up to 00008) holds three deliveries of one webhook: one
// delivered, one pending after two failed attempts, one never tried.
// Migrated, the deliveries API shows them as they stood, their attempts
// are kept, the two pending ones are claimed from the retry set (the
// failed one as its third attempt, with the event's payload), and the
// webhook's cursor starts after them: a new event arrives in a batch.
func TestMigrationCarriesPendingDeliveriesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Pool(t, testenv.EmptyDatabase(t), 4)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 8)
	require.NoError(t, err)

	_, err = pool.Exec(ctx, `
		INSERT INTO activity (public_id, title, capacity) VALUES ('a_mig', 'migrated', 10);
		INSERT INTO registration (public_id, activity_id, user_id, status, metadata)
			SELECT 'r_' || n, 1, 'u' || n, 'pending', ('{"n":' || n || '}')::json FROM generate_series(1, 3) n;
		INSERT INTO registration_event (activity_id, seq, registration_id, user_id, type, to_status, actor, at)
			SELECT 1, n, 'r_' || n, 'u' || n, 'registration.created', 'pending', 'u' || n, now() - interval '1 minute'
			FROM generate_series(1, 3) n;
		INSERT INTO activity_state (activity_id, last_seq) VALUES (1, 3);
		INSERT INTO webhook (public_id, url, events, secret) VALUES ('wh_mig', 'http://127.0.0.1:9/', '{*}', '\x00');
		INSERT INTO webhook_message (activity_id, seq, event_id, body)
			SELECT 1, n, 'ev_mig_' || n, '{}' FROM generate_series(1, 3) n;
		INSERT INTO webhook_delivery (webhook_id, activity_id, seq, state, attempts, next_attempt_at, last_status_code, delivered_at) VALUES
			(1, 1, 1, 'delivered', 1, NULL, 200, now()),
			(1, 1, 2, 'pending', 2, now(), 500, NULL),
			(1, 1, 3, 'pending', 0, now(), NULL, NULL);
		INSERT INTO webhook_attempt (webhook_id, delivery_id, attempt, at, status_code, duration_ms) VALUES
			(1, 1, 1, now(), 200, 1.5), (1, 2, 1, now(), 500, 2), (1, 2, 2, now(), 500, 3);`)
	require.NoError(t, err)

	applied, err := store.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []int64{9, 10, 11, 12, 13, 14}, applied, "on-sale's, the webhook log's, the queue ticket index, the doors', attendance's, the console's")
	s := store.New(pool)

	ds, err := s.Deliveries(ctx, "wh_mig", 10)
	require.NoError(t, err)
	byEvent := map[string]webhook.Delivery{}
	for _, d := range ds {
		byEvent[d.EventID] = d
	}
	require.Len(t, byEvent, 3)
	require.Equal(t, webhook.Delivered, byEvent["ev_mig_1"].State)
	require.Equal(t, 1, byEvent["ev_mig_1"].Attempts)
	require.Equal(t, webhook.Pending, byEvent["ev_mig_2"].State)
	require.Equal(t, 2, byEvent["ev_mig_2"].Attempts)
	require.Equal(t, 500, *byEvent["ev_mig_2"].LastStatusCode)
	require.Equal(t, webhook.Pending, byEvent["ev_mig_3"].State)
	require.Zero(t, byEvent["ev_mig_3"].Attempts)
	attempts, err := s.DeliveryAttempts(ctx, "wh_mig", "ev_mig_2", "a_mig", 2)
	require.NoError(t, err)
	require.Len(t, attempts, 2)

	jobs, err := s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 2, "the pending deliveries, and no batch of the events they cover")
	got := map[string]int{}
	for _, j := range jobs {
		require.Nil(t, j.Batch)
		got[j.EventID] = j.Attempt
		var body struct {
			Data struct {
				ID           string
				Registration struct {
					ID       string
					Metadata json.RawMessage
				}
			}
		}
		require.NoError(t, json.Unmarshal(j.Body, &body))
		require.Equal(t, j.EventID, body.Data.ID)
		require.Equal(t, "r_"+j.EventID[len(j.EventID)-1:], body.Data.Registration.ID)
		require.JSONEq(t, `{"n":`+j.EventID[len(j.EventID)-1:]+`}`, string(body.Data.Registration.Metadata))
	}
	require.Equal(t, map[string]int{"ev_mig_2": 3, "ev_mig_3": 1}, got)

	out, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: "a_mig", Commands: []registration.Command{signupOf("u4")}}}, time.Now())
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	jobs, err = s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.NotNil(t, jobs[0].Batch)
	require.Equal(t, "ev_mig_4", jobs[0].EventID)
}
