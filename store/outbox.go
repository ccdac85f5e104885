package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/webhook"
)

// anyWebhookSQL asks whether any webhook is enabled: the change
// transaction writes the outbox only then.
const anyWebhookSQL = `SELECT EXISTS (SELECT 1 FROM webhook WHERE disabled_at IS NULL)`

// outboxSQL is the webhook outbox's part of a change transaction: one
// pending delivery per enabled webhook that matches an event (its type, and
// its activity when the webhook names one), due at once, and the payload
// of each event that some webhook receives, once.
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
	SELECT count(*) FROM d`

// queueOutbox adds outboxSQL for the events of work to b, building each
// event's payload.
func queueOutbox(b *pgx.Batch, work []*activityWork) error {
	var aids, seqs []int64
	var types, ids []string
	var bodies [][]byte
	for _, w := range work {
		for _, e := range w.plan.Events {
			if e.Type.IsBlockEvent() {
				continue // webhooks carry registration events only
			}
			body, err := webhook.Payload(e)
			if err != nil {
				return fmt.Errorf("webhook payload of %s: %w", e.ID, err)
			}
			aids, seqs = append(aids, w.aid), append(seqs, e.Seq)
			types, ids, bodies = append(types, string(e.Type)), append(ids, e.ID), append(bodies, body)
		}
	}
	if len(aids) > 0 {
		b.Queue(outboxSQL, aids, seqs, types, ids, bodies)
	}
	return nil
}
