package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/webhook"
)

// outboxSQL is the webhook outbox's part of a change transaction: one
// pending delivery per enabled webhook that matches an event (its type, and
// its activity when the webhook names one), due at once, and the payload
// of each event that some webhook receives, once. It answers whether any
// webhook is enabled.
const outboxSQL = `
	WITH ev AS (
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bytea[])
			AS e(activity_id, seq, type, event_id, body)
	), d AS (
		INSERT INTO webhook_delivery (activity_id, seq, webhook_id, next_attempt_at)
		SELECT ev.activity_id, ev.seq, w.id, now()
		FROM ev JOIN webhook w ON w.disabled_at IS NULL
			AND (w.activity_id IS NULL OR w.activity_id = ev.activity_id)
			AND (w.events = '{*}' OR ev.type = ANY (w.events))
		RETURNING activity_id, seq
	), m AS (
		INSERT INTO webhook_message (activity_id, seq, event_id, body)
		SELECT ev.activity_id, ev.seq, ev.event_id, ev.body FROM ev
		WHERE EXISTS (SELECT 1 FROM d WHERE d.activity_id = ev.activity_id AND d.seq = ev.seq)
	)
	SELECT EXISTS (SELECT 1 FROM webhook WHERE disabled_at IS NULL)`

// sendWithOutbox sends the change transaction's writes b together with the
// webhook outbox of its events, in the same round trip.
//
// While the last outbox statement found no enabled webhook, the payloads
// are not built: the round trip asks instead whether one is enabled now
// (another instance may have added it), and only then a second round trip,
// still before the commit, writes the outbox. So a transaction pays for
// webhooks only when there are some, and never misses one.
func (s *Store) sendWithOutbox(ctx context.Context, tx pgx.Tx, b *pgx.Batch, work []*activityWork) error {
	events := 0
	for _, w := range work {
		events += len(w.plan.Events)
	}
	if events > 0 && s.noWebhooks.Load() {
		var enabled bool
		b.Queue(`SELECT EXISTS (SELECT 1 FROM webhook WHERE disabled_at IS NULL)`).QueryRow(func(row pgx.Row) error {
			return row.Scan(&enabled)
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil || !enabled {
			return err
		}
		b = &pgx.Batch{}
	}
	if events > 0 {
		if err := s.queueOutbox(b, work); err != nil {
			return err
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// queueOutbox adds outboxSQL for the events of work to b, building each
// event's payload.
func (s *Store) queueOutbox(b *pgx.Batch, work []*activityWork) error {
	var aids, seqs []int64
	var types, ids []string
	var bodies [][]byte
	for _, w := range work {
		for _, e := range w.plan.Events {
			body, err := webhook.Payload(e)
			if err != nil {
				return fmt.Errorf("webhook payload of %s: %w", e.ID, err)
			}
			aids, seqs = append(aids, w.aid), append(seqs, e.Seq)
			types, ids, bodies = append(types, string(e.Type)), append(ids, e.ID), append(bodies, body)
		}
	}
	b.Queue(outboxSQL, aids, seqs, types, ids, bodies).QueryRow(func(row pgx.Row) error {
		var enabled bool
		err := row.Scan(&enabled)
		s.noWebhooks.Store(!enabled)
		return err
	})
	return nil
}
