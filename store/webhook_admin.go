package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/webhook"
)

// The admin's side of the webhooks' log: deleting a webhook, and reading
// its deliveries, their attempts and the backlog. The dispatcher's side
// (claims and results) is in webhook_dispatch.go.

// DeleteWebhook deletes a webhook, its cursors, retries and attempts, in
// one transaction of statements in that order: a result being recorded
// meanwhile either finds its cursor or retry gone (and records nothing) or
// committed first, and then its attempt rows are seen by the last
// statement.
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	var found bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var wid int64
		err := tx.QueryRow(ctx, `DELETE FROM webhook WHERE public_id = $1 RETURNING id`, id).Scan(&wid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM webhook_cursor WHERE webhook_id = $1`, wid)
		b.Queue(`DELETE FROM webhook_retry WHERE webhook_id = $1`, wid)
		b.Queue(`DELETE FROM webhook_attempt WHERE webhook_id = $1`, wid)
		return tx.SendBatch(ctx, b).Close()
	})
	if err == nil && !found {
		return webhook.NotFound(id)
	}
	return err
}

// deliveriesSQL reads a webhook's deliveries, newest first: those in the
// retry set as they stand; those delivered at their first attempt (an
// attempt with no retry); and, while the webhook is enabled, the events
// after its cursors, pending (those of a batch in flight show its first
// attempt under way, tried again when its lease ends).
const deliveriesSQL = `
	WITH w AS (SELECT id, events, activity_id, disabled_at FROM webhook WHERE public_id = $1),
	d AS (
		SELECT t.activity_id, t.seq, t.event_at AS at, t.attempts, t.last_status_code, t.last_error, t.delivered_at,
			CASE WHEN t.state = 'pending' THEN greatest(t.next_attempt_at, t.leased_until) END AS next_at, t.state
		FROM w JOIN webhook_retry t ON t.webhook_id = w.id
		UNION ALL
		SELECT t.activity_id, t.seq, t.at, 1, t.status_code, t.error, t.at + t.duration_ms * interval '1 millisecond', NULL, 'delivered'
		FROM w JOIN webhook_attempt t ON t.webhook_id = w.id AND t.attempt = 1
		WHERE NOT EXISTS (SELECT 1 FROM webhook_retry x WHERE x.webhook_id = t.webhook_id AND x.activity_id = t.activity_id AND x.seq = t.seq)
		UNION ALL
		SELECT e.activity_id, e.seq, e.at, CASE WHEN e.seq <= c.claimed_to THEN 1 ELSE 0 END, NULL, NULL, NULL,
			CASE WHEN e.seq <= c.claimed_to THEN greatest(now(), c.leased_until) ELSE now() END, 'pending'
		FROM w JOIN activity_state s ON w.activity_id IS NULL OR s.activity_id = w.activity_id
		LEFT JOIN webhook_cursor c ON c.webhook_id = w.id AND c.activity_id = s.activity_id
		JOIN registration_event e ON e.activity_id = s.activity_id AND e.seq > coalesce(c.seq, 0) AND e.seq <= s.last_seq
		WHERE w.disabled_at IS NULL AND ` + receives + `
	), top AS (SELECT * FROM d ORDER BY at DESC, activity_id, seq DESC LIMIT $2)
	SELECT a.public_id, top.seq, top.attempts, top.last_status_code, top.last_error, top.delivered_at, top.next_at, top.state
	FROM top JOIN activity a ON a.id = top.activity_id
	ORDER BY top.at DESC, top.activity_id, top.seq DESC`

// Deliveries returns up to limit of a webhook's deliveries, newest first
// (see deliveriesSQL).
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]webhook.Delivery, error) {
	rows, err := s.db.Query(ctx, deliveriesSQL, webhookID, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (webhook.Delivery, error) {
		var d webhook.Delivery
		var activityID string
		var seq int64
		err := row.Scan(&activityID, &seq, &d.Attempts, &d.LastStatusCode, &d.LastError, &d.DeliveredAt, &d.NextAttemptAt, &d.State)
		d.EventID = registration.EventID(activityID, seq)
		d.DeliveredAt, d.NextAttemptAt = utc(d.DeliveredAt), utc(d.NextAttemptAt)
		return d, err
	})
	return out, interpret(err)
}

// attemptsSQL reads the attempts of one event's delivery to one webhook:
// no row when there is no such delivery (the webhook does not receive the
// event, or the event came before the webhook), one row without an
// attempt when it has none yet.
const attemptsSQL = `
	SELECT t.attempt, t.at, t.status_code, t.error, t.duration_ms
	FROM webhook w
	JOIN activity a ON a.public_id = $2
	JOIN registration_event e ON e.activity_id = a.id AND e.seq = $3
	LEFT JOIN webhook_attempt t ON t.webhook_id = w.id AND t.activity_id = e.activity_id AND t.seq = e.seq
	WHERE w.public_id = $1 AND (w.activity_id IS NULL OR w.activity_id = a.id) AND ` + receives + `
		AND (t.attempt IS NOT NULL
			OR EXISTS (SELECT 1 FROM webhook_retry x WHERE x.webhook_id = w.id AND x.activity_id = e.activity_id AND x.seq = e.seq)
			OR (w.disabled_at IS NULL AND e.seq > coalesce((SELECT c.seq FROM webhook_cursor c
				WHERE c.webhook_id = w.id AND c.activity_id = e.activity_id), 0)))
	ORDER BY t.attempt`

// DeliveryAttempts returns the recorded attempts of the delivery of event
// eventID (activityID's event seq) to a webhook, in attempt order, or
// webhook.NoDelivery when there is no such delivery.
func (s *Store) DeliveryAttempts(ctx context.Context, webhookID, eventID, activityID string, seq int64) ([]webhook.DeliveryAttempt, error) {
	if registration.EventID(activityID, seq) != eventID {
		return nil, webhook.NoDelivery(webhookID, eventID)
	}
	rows, err := s.db.Query(ctx, attemptsSQL, webhookID, activityID, seq)
	if err != nil {
		return nil, interpret(err)
	}
	type row struct {
		attempt *int
		a       webhook.DeliveryAttempt
		ms      *float64
	}
	rs, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
		var r row
		var at *time.Time
		err := cr.Scan(&r.attempt, &at, &r.a.StatusCode, &r.a.Error, &r.ms)
		if r.attempt != nil {
			r.a.Attempt, r.a.At, r.a.DurationMS = *r.attempt, at.UTC(), *r.ms
		}
		return r, err
	})
	if err != nil {
		return nil, interpret(err)
	}
	if len(rs) == 0 {
		return nil, webhook.NoDelivery(webhookID, eventID)
	}
	out := make([]webhook.DeliveryAttempt, 0, len(rs))
	for _, r := range rs {
		if r.attempt != nil {
			out = append(out, r.a)
		}
	}
	return out, nil
}

// Backlog counts the enabled webhooks and their deliveries not yet made:
// the pending retries and the events after their cursors (every event of
// the activities they receive from, whatever its type).
func (s *Store) Backlog(ctx context.Context) (webhook.Backlog, error) {
	var b webhook.Backlog
	var oldest *time.Time
	err := s.db.QueryRow(ctx, `
		WITH w AS (SELECT id, activity_id FROM webhook WHERE disabled_at IS NULL),
		lag AS (
			SELECT s.activity_id, coalesce(c.seq, 0) AS seq, s.last_seq
			FROM w JOIN activity_state s ON w.activity_id IS NULL OR s.activity_id = w.activity_id
			LEFT JOIN webhook_cursor c ON c.webhook_id = w.id AND c.activity_id = s.activity_id
			WHERE s.last_seq > coalesce(c.seq, 0)
		), retry AS (
			SELECT count(*) AS n, min(t.event_at) AS oldest FROM w JOIN webhook_retry t ON t.webhook_id = w.id AND t.state = 'pending'
		)
		SELECT (SELECT count(*) FROM w),
			(SELECT n FROM retry) + (SELECT coalesce(sum(last_seq - seq), 0) FROM lag),
			least((SELECT oldest FROM retry), (SELECT min(e.at) FROM lag JOIN registration_event e
				ON e.activity_id = lag.activity_id AND e.seq = lag.seq + 1))`).Scan(&b.Webhooks, &b.Pending, &oldest)
	if oldest != nil {
		b.Oldest = oldest.UTC()
	}
	return b, interpret(err)
}
