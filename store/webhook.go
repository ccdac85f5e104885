package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/webhook"
)

// webhookColumns are a webhook's columns, for a query over webhook w left
// joined with its activity a.
const webhookColumns = `w.public_id, w.url, w.events, a.public_id, w.created_at, w.disabled_at`

func scanWebhook(row pgx.CollectableRow) (webhook.Webhook, error) {
	var w webhook.Webhook
	err := row.Scan(&w.ID, &w.URL, &w.Events, &w.ActivityID, &w.CreatedAt, &w.DisabledAt)
	w.CreatedAt = w.CreatedAt.UTC()
	if w.DisabledAt != nil {
		t := w.DisabledAt.UTC()
		w.DisabledAt = &t
	}
	return w, err
}

// CreateWebhook stores a webhook with its sealed secret.
func (s *Store) CreateWebhook(ctx context.Context, w webhook.Webhook, sealedSecret []byte) (webhook.Webhook, error) {
	var aid *int64
	if w.ActivityID != nil {
		id, err := s.activityID(ctx, *w.ActivityID)
		if err != nil {
			return webhook.Webhook{}, err
		}
		aid = &id
	}
	err := s.db.QueryRow(ctx, `INSERT INTO webhook (public_id, url, events, activity_id, secret)
		VALUES ($1, $2, $3, $4, $5) RETURNING created_at`, w.ID, w.URL, w.Events, aid, sealedSecret).Scan(&w.CreatedAt)
	w.CreatedAt = w.CreatedAt.UTC()
	return w, interpret(err)
}

// StoredSecrets returns every webhook's secret as it is stored.
func (s *Store) StoredSecrets(ctx context.Context) ([]webhook.StoredSecret, error) {
	rows, err := s.db.Query(ctx, `SELECT public_id, secret FROM webhook ORDER BY id`)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (webhook.StoredSecret, error) {
		var c webhook.StoredSecret
		return c, row.Scan(&c.WebhookID, &c.Stored)
	})
	return out, interpret(err)
}

// ReplaceSecret stores a webhook's secret in another form if it is still
// stored as old.
func (s *Store) ReplaceSecret(ctx context.Context, webhookID string, old, replacement []byte) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE webhook SET secret = $3 WHERE public_id = $1 AND secret = $2`, webhookID, old, replacement)
	return tag.RowsAffected() == 1, interpret(err)
}

// Webhooks returns every webhook, oldest first.
func (s *Store) Webhooks(ctx context.Context) ([]webhook.Webhook, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookColumns+`
		FROM webhook w LEFT JOIN activity a ON a.id = w.activity_id ORDER BY w.id`)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, scanWebhook)
	return out, interpret(err)
}

// Webhook returns one webhook.
func (s *Store) Webhook(ctx context.Context, id string) (webhook.Webhook, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookColumns+`
		FROM webhook w LEFT JOIN activity a ON a.id = w.activity_id WHERE w.public_id = $1`, id)
	if err != nil {
		return webhook.Webhook{}, interpret(err)
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, webhook.NotFound(id)
	}
	return w, interpret(err)
}

// DeleteWebhook deletes a webhook, its deliveries and their attempts, in
// one transaction of three statements in that order: a result being
// recorded meanwhile either finds its delivery gone (and records nothing)
// or committed first, and then its attempt row is seen by the last
// statement. The messages of its events stay until the purge.
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
		b.Queue(`DELETE FROM webhook_delivery WHERE webhook_id = $1`, wid)
		b.Queue(`DELETE FROM webhook_attempt WHERE webhook_id = $1`, wid)
		return tx.SendBatch(ctx, b).Close()
	})
	if err == nil && !found {
		return webhook.NotFound(id)
	}
	return err
}

// Deliveries returns up to limit of a webhook's deliveries, newest first.
// A pending delivery in flight shows when its lease ends: when it is tried
// again if this attempt's result is lost.
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]webhook.Delivery, error) {
	rows, err := s.db.Query(ctx, `
		SELECT m.event_id, d.attempts, d.last_status_code, d.last_error, d.delivered_at,
			CASE WHEN d.state = 'pending' THEN greatest(d.next_attempt_at, d.leased_until) END, d.state
		FROM webhook w JOIN webhook_delivery d ON d.webhook_id = w.id
		JOIN webhook_message m ON m.activity_id = d.activity_id AND m.seq = d.seq
		WHERE w.public_id = $1
		ORDER BY d.id DESC LIMIT $2`, webhookID, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (webhook.Delivery, error) {
		var d webhook.Delivery
		err := row.Scan(&d.EventID, &d.Attempts, &d.LastStatusCode, &d.LastError, &d.DeliveredAt, &d.NextAttemptAt, &d.State)
		d.DeliveredAt, d.NextAttemptAt = utc(d.DeliveredAt), utc(d.NextAttemptAt)
		return d, err
	})
	return out, interpret(err)
}

// attemptsSQL reads the attempts of one event's delivery to one webhook:
// no row when there is no such delivery, one row without an attempt when
// it has none yet. The event's message and its deliveries are inserted by
// one statement of the change transaction (outboxSQL), so they share
// created_at: the delivery is found by it through the BRIN index on
// created_at, instead of among every delivery of the webhook (no index
// serves the event of a delivery, and the change transaction should not
// keep one up to date for this rare read).
const attemptsSQL = `
	SELECT t.attempt, t.at, t.status_code, t.error, t.duration_ms
	FROM webhook w
	JOIN activity a ON a.public_id = $2
	JOIN webhook_message m ON m.activity_id = a.id AND m.seq = $3 AND m.event_id = $4
	JOIN webhook_delivery d ON d.webhook_id = w.id AND d.created_at = m.created_at
		AND d.activity_id = m.activity_id AND d.seq = m.seq
	LEFT JOIN webhook_attempt t ON t.webhook_id = d.webhook_id AND t.delivery_id = d.id
	WHERE w.public_id = $1
	ORDER BY d.id, t.attempt`

// DeliveryAttempts returns the recorded attempts of the delivery of event
// eventID (activityID's event seq) to a webhook, in attempt order, or
// webhook.NoDelivery when there is no such delivery.
func (s *Store) DeliveryAttempts(ctx context.Context, webhookID, eventID, activityID string, seq int64) ([]webhook.DeliveryAttempt, error) {
	rows, err := s.db.Query(ctx, attemptsSQL, webhookID, activityID, seq, eventID)
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

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// claimSQL claims due deliveries: for each enabled webhook, up to its free
// slots of its pending deliveries that are due and not leased, oldest
// first, skipping rows another claim or record holds; it counts the
// attempt and leases them ($1 milliseconds). The lease is a column no
// index covers, so the claim can be a HOT update.
const claimSQL = `
	WITH slots AS (
		SELECT w.id, w.public_id, w.url, w.secret, greatest(0, $2::int - coalesce(b.n, 0)) AS free
		FROM webhook w LEFT JOIN unnest($3::text[], $4::int[]) AS b(public_id, n) ON b.public_id = w.public_id
		WHERE w.disabled_at IS NULL
	), due AS (
		SELECT d.webhook_id, d.id, s.public_id, s.url, s.secret
		FROM slots s CROSS JOIN LATERAL (
			SELECT d.webhook_id, d.id FROM webhook_delivery d
			WHERE d.webhook_id = s.id AND d.state = 'pending' AND d.next_attempt_at <= now()
				AND (d.leased_until IS NULL OR d.leased_until <= now())
			ORDER BY d.next_attempt_at LIMIT s.free
			FOR UPDATE SKIP LOCKED) d
		WHERE s.free > 0
	)
	UPDATE webhook_delivery d SET attempts = d.attempts + 1, leased_until = now() + $1 * interval '1 millisecond'
	FROM due, webhook_message m
	WHERE d.webhook_id = due.webhook_id AND d.id = due.id AND m.activity_id = d.activity_id AND m.seq = d.seq
	RETURNING d.webhook_id, d.id, d.attempts, d.created_at, due.public_id, due.url, due.secret, m.event_id, m.body`

// asyncCommit makes the rest of a batch's implicit transaction commit
// without waiting for its WAL to reach disk. Only claims and results of
// deliveries commit so: losing the last of them in a database crash means
// a delivery is claimed again when its lease ends, or sent again, which at
// least once delivery allows; the outbox itself is written by the change
// transaction, which waits. It keeps the dispatcher's commits from
// queueing behind (and slowing) the change transactions' on a busy server.
const asyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// ClaimDeliveries claims due deliveries (see claimSQL).
func (s *Store) ClaimDeliveries(ctx context.Context, c webhook.Claim) ([]webhook.Job, error) {
	ids, busy := make([]string, 0, len(c.Busy)), make([]int32, 0, len(c.Busy))
	for id, n := range c.Busy {
		ids, busy = append(ids, id), append(busy, int32(n))
	}
	var out []webhook.Job
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	b.Queue(claimSQL, c.Lease.Milliseconds(), c.Slots, ids, busy).Query(func(rows pgx.Rows) error {
		var err error
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (webhook.Job, error) {
			var j webhook.Job
			err := row.Scan(&j.Ref.WebhookID, &j.Ref.DeliveryID, &j.Attempt, &j.CreatedAt,
				&j.WebhookID, &j.URL, &j.SealedSecret, &j.EventID, &j.Body)
			return j, err
		})
		return err
	})
	return out, interpret(s.db.SendBatch(ctx, b).Close())
}

// recordSQL records attempts: each result updates its delivery only while
// the delivery is still claimed (leased) for that attempt, and only those
// that did are kept as attempt rows. (A leased delivery is pending; the
// test is on the lease so that the delivery is found by its key.)
const recordSQL = `
	WITH r AS (
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::bigint[],
			$6::int[], $7::text[], $8::timestamptz[], $9::float8[])
			AS r(webhook_id, delivery_id, attempt, state, retry_ms, status_code, error, at, duration_ms)
	), u AS (
		UPDATE webhook_delivery d SET state = r.state, leased_until = NULL,
			next_attempt_at = CASE WHEN r.state = 'pending' THEN now() + r.retry_ms * interval '1 millisecond' END,
			delivered_at = CASE WHEN r.state = 'delivered' THEN now() END,
			last_status_code = r.status_code, last_error = r.error
		FROM r
		WHERE d.webhook_id = r.webhook_id AND d.id = r.delivery_id AND d.attempts = r.attempt AND d.leased_until IS NOT NULL
		RETURNING r.*
	)
	INSERT INTO webhook_attempt (webhook_id, delivery_id, attempt, at, status_code, error, duration_ms)
	SELECT webhook_id, delivery_id, attempt, at, status_code, error, duration_ms FROM u`

// goneSQL disables the webhooks whose receivers answered 410 Gone and
// fails their pending deliveries.
const goneSQL = `
	WITH w AS (UPDATE webhook SET disabled_at = now() WHERE id = ANY($1) AND disabled_at IS NULL RETURNING id)
	UPDATE webhook_delivery d SET state = 'failed', next_attempt_at = NULL, leased_until = NULL,
		last_error = coalesce(d.last_error, 'not sent: the webhook was disabled (its receiver answered 410 Gone)')
	FROM w WHERE d.webhook_id = w.id AND d.state = 'pending'`

// unsentSQL gives claims back: their leases end and their attempts are
// not counted.
const unsentSQL = `
	UPDATE webhook_delivery d SET attempts = d.attempts - 1, leased_until = NULL
	FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS r(webhook_id, delivery_id, attempt)
	WHERE d.webhook_id = r.webhook_id AND d.id = r.delivery_id AND d.attempts = r.attempt AND d.leased_until IS NOT NULL`

// RecordAttempts records attempts' results in one round trip and one
// transaction (committed as asyncCommit says).
func (s *Store) RecordAttempts(ctx context.Context, attempts []webhook.Attempt) error {
	var c attemptColumns
	var gone, unsentW, unsentD []int64
	var unsentA []int32
	for _, a := range attempts {
		switch a.Outcome {
		case webhook.OutcomeUnsent:
			unsentW, unsentD, unsentA = append(unsentW, a.Ref.WebhookID), append(unsentD, a.Ref.DeliveryID), append(unsentA, int32(a.Attempt))
			continue
		case webhook.OutcomeGone:
			gone = append(gone, a.Ref.WebhookID)
		}
		c.add(a)
	}
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	if len(c.wids) > 0 {
		b.Queue(recordSQL, c.wids, c.dids, c.attempts, c.states, c.retryMS, c.status, c.errs, c.at, c.durationMS)
	}
	if len(unsentW) > 0 {
		b.Queue(unsentSQL, unsentW, unsentD, unsentA)
	}
	if len(gone) > 0 {
		b.Queue(goneSQL, gone)
	}
	return interpret(s.db.SendBatch(ctx, b).Close())
}

// attemptColumns collects attempt results as columns.
type attemptColumns struct {
	wids, dids, retryMS []int64
	attempts            []int32
	states              []string
	status              []*int32
	errs                []*string
	at                  []time.Time
	durationMS          []float64
}

func (c *attemptColumns) add(a webhook.Attempt) {
	state := webhook.Pending
	switch a.Outcome {
	case webhook.OutcomeDelivered:
		state = webhook.Delivered
	case webhook.OutcomeFailed, webhook.OutcomeGone:
		state = webhook.Failed
	}
	var status *int32
	if a.StatusCode != 0 {
		v := int32(a.StatusCode)
		status = &v
	}
	var e *string
	if a.Error != "" {
		e = &a.Error
	}
	c.wids, c.dids = append(c.wids, a.Ref.WebhookID), append(c.dids, a.Ref.DeliveryID)
	c.attempts, c.states, c.retryMS = append(c.attempts, int32(a.Attempt)), append(c.states, string(state)), append(c.retryMS, a.RetryIn.Milliseconds())
	c.status, c.errs = append(c.status, status), append(c.errs, e)
	c.at, c.durationMS = append(c.at, a.At), append(c.durationMS, float64(a.Duration.Microseconds())/1000)
}

// Backlog counts the enabled webhooks and their pending deliveries.
func (s *Store) Backlog(ctx context.Context) (webhook.Backlog, error) {
	var b webhook.Backlog
	var oldest *time.Time
	err := s.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook WHERE disabled_at IS NULL), count(*), min(d.created_at)
		FROM webhook w JOIN webhook_delivery d ON d.webhook_id = w.id AND d.state = 'pending'
		WHERE w.disabled_at IS NULL`).Scan(&b.Webhooks, &b.Pending, &oldest)
	if oldest != nil {
		b.Oldest = oldest.UTC()
	}
	return b, interpret(err)
}

// purgeBatch is how many rows of a table one purge statement deletes.
const purgeBatch = 5000

// PurgeDeliveries deletes, in batches, the messages, deliveries and
// attempts recorded before t. A delivery is pending for at most a day, so
// nothing this old is still to be sent.
func (s *Store) PurgeDeliveries(ctx context.Context, before time.Time) (int64, error) {
	var deliveries int64
	for _, table := range []string{"webhook_delivery", "webhook_attempt", "webhook_message"} {
		column := "created_at"
		if table == "webhook_attempt" {
			column = "at"
		}
		for {
			tag, err := s.db.Exec(ctx, `DELETE FROM `+table+` WHERE ctid = ANY (ARRAY(
				SELECT ctid FROM `+table+` WHERE `+column+` < $1 LIMIT $2))`, before, purgeBatch)
			if err != nil {
				return deliveries, interpret(err)
			}
			if table == "webhook_delivery" {
				deliveries += tag.RowsAffected()
			}
			if tag.RowsAffected() < purgeBatch {
				break
			}
		}
	}
	return deliveries, nil
}
