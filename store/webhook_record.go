package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/webhook"
)

// The dispatcher's results: what its attempts record (batches ended,
// retries scheduled or ended, receivers gone), and the log's retention.

// recordBatchesSQL ends leased batches ($1..$4: webhook, activity, fence,
// last seq): each cursor advances past its batch only while the batch is
// still leased with that fence, and only then are the batch's results
// ($5..$15) kept: an attempt row for each attempt made, and a retry for
// each event not delivered (due after its delay, or at once if it was not
// sent; failed for good after a 410 or the end of the retry window).
const recordBatchesSQL = `
	WITH adv AS (
		UPDATE webhook_cursor c SET seq = b.to_seq, claimed_to = NULL, leased_until = NULL
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS b(webhook_id, activity_id, fence, to_seq)
		WHERE c.webhook_id = b.webhook_id AND c.activity_id = b.activity_id AND c.fence = b.fence AND c.leased_until IS NOT NULL
		RETURNING c.webhook_id, c.activity_id
	), r AS (
		SELECT r.* FROM unnest($5::bigint[], $6::bigint[], $7::bigint[], $8::text[], $9::bigint[], $10::int[], $11::text[],
			$12::timestamptz[], $13::float8[], $14::timestamptz[], $15::boolean[])
			AS r(webhook_id, activity_id, seq, state, retry_ms, status_code, error, at, duration_ms, event_at, sent)
		JOIN adv ON adv.webhook_id = r.webhook_id AND adv.activity_id = r.activity_id
	), t AS (
		INSERT INTO webhook_attempt (webhook_id, activity_id, seq, attempt, at, status_code, error, duration_ms)
		SELECT webhook_id, activity_id, seq, 1, at, status_code, error, duration_ms FROM r WHERE sent
		ON CONFLICT DO NOTHING
	)
	INSERT INTO webhook_retry (webhook_id, activity_id, seq, state, attempts, next_attempt_at, last_status_code, last_error, event_at)
	SELECT webhook_id, activity_id, seq, state, CASE WHEN sent THEN 1 ELSE 0 END,
		CASE WHEN state = 'pending' THEN now() + retry_ms * interval '1 millisecond' END, status_code, error, event_at
	FROM r WHERE state <> 'delivered'
	ON CONFLICT DO NOTHING`

// recordRetriesSQL records retries' attempts: each result updates its
// retry only while the retry is still claimed (leased) for that attempt,
// and only those that did are kept as attempt rows.
const recordRetriesSQL = `
	WITH r AS (
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::int[], $5::text[], $6::bigint[],
			$7::int[], $8::text[], $9::timestamptz[], $10::float8[])
			AS r(webhook_id, activity_id, seq, attempt, state, retry_ms, status_code, error, at, duration_ms)
	), u AS (
		UPDATE webhook_retry d SET state = r.state, leased_until = NULL,
			next_attempt_at = CASE WHEN r.state = 'pending' THEN now() + r.retry_ms * interval '1 millisecond' END,
			delivered_at = CASE WHEN r.state = 'delivered' THEN now() END,
			last_status_code = r.status_code, last_error = r.error
		FROM r
		WHERE d.webhook_id = r.webhook_id AND d.activity_id = r.activity_id AND d.seq = r.seq
			AND d.attempts = r.attempt AND d.leased_until IS NOT NULL
		RETURNING r.*
	)
	INSERT INTO webhook_attempt (webhook_id, activity_id, seq, attempt, at, status_code, error, duration_ms)
	SELECT webhook_id, activity_id, seq, attempt, at, status_code, error, duration_ms FROM u
	ON CONFLICT DO NOTHING`

// unsentSQL gives retries' claims back: their leases end and their
// attempts are not counted.
const unsentSQL = `
	UPDATE webhook_retry d SET attempts = d.attempts - 1, leased_until = NULL
	FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::int[]) AS r(webhook_id, activity_id, seq, attempt)
	WHERE d.webhook_id = r.webhook_id AND d.activity_id = r.activity_id AND d.seq = r.seq
		AND d.attempts = r.attempt AND d.leased_until IS NOT NULL`

// goneSQL disables the webhooks whose receivers answered 410 Gone and
// fails their pending retries.
const goneSQL = `
	WITH w AS (UPDATE webhook SET disabled_at = now() WHERE id = ANY($1) AND disabled_at IS NULL RETURNING id)
	UPDATE webhook_retry d SET state = 'failed', next_attempt_at = NULL, leased_until = NULL,
		last_error = coalesce(d.last_error, 'not sent: the webhook was disabled (its receiver answered 410 Gone)')
	FROM w WHERE d.webhook_id = w.id AND d.state = 'pending'`

// RecordAttempts records attempts' results in one round trip and one
// transaction (committed as asyncCommit says).
func (s *Store) RecordAttempts(ctx context.Context, attempts []webhook.Attempt) error {
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	batchAttempts(b, attempts)
	return interpret(s.db.SendBatch(ctx, b).Close())
}

// recordBatches ends batches with the given results of their jobs.
func (s *Store) recordBatches(ctx context.Context, batches []webhook.Batch, attempts []webhook.Attempt) error {
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	var c attemptColumns
	for _, a := range attempts {
		c.add(a)
	}
	batchBatchEnds(b, batches, &c)
	return interpret(s.db.SendBatch(ctx, b).Close())
}

// batchAttempts adds to b the statements that record attempts.
func batchAttempts(b *pgx.Batch, attempts []webhook.Attempt) {
	var batched, retried attemptColumns
	var unsent attemptColumns
	var batches []webhook.Batch
	seen := map[*webhook.Batch]bool{}
	var gone []int64
	for _, a := range attempts {
		if a.Outcome == webhook.OutcomeGone {
			gone = append(gone, a.Ref.WebhookID)
		}
		switch {
		case a.Batch != nil:
			if !seen[a.Batch] {
				seen[a.Batch] = true
				batches = append(batches, *a.Batch)
			}
			batched.add(a)
		case a.Outcome == webhook.OutcomeUnsent:
			unsent.add(a)
		default:
			retried.add(a)
		}
	}
	if len(batches) > 0 {
		batchBatchEnds(b, batches, &batched)
	}
	if len(retried.wids) > 0 {
		b.Queue(recordRetriesSQL, retried.wids, retried.aids, retried.seqs, retried.attempts, retried.states, retried.retryMS,
			retried.status, retried.errs, retried.at, retried.durationMS)
	}
	if len(unsent.wids) > 0 {
		b.Queue(unsentSQL, unsent.wids, unsent.aids, unsent.seqs, unsent.attempts)
	}
	if len(gone) > 0 {
		b.Queue(goneSQL, gone)
	}
}

// batchBatchEnds adds to b the statement that ends leased batches with
// the results c of their jobs.
func batchBatchEnds(b *pgx.Batch, batches []webhook.Batch, c *attemptColumns) {
	n := len(batches)
	wids, aids, fences, tos := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, x := range batches {
		wids[i], aids[i], fences[i], tos[i] = x.WebhookID, x.ActivityID, x.Fence, x.To
	}
	b.Queue(recordBatchesSQL, wids, aids, fences, tos, c.wids, c.aids, c.seqs, c.states, c.retryMS, c.status, c.errs,
		c.at, c.durationMS, c.eventAt, c.sent)
}

// attemptColumns collects attempt results as columns.
type attemptColumns struct {
	wids, aids, seqs, retryMS []int64
	attempts                  []int32
	states                    []string
	status                    []*int32
	errs                      []*string
	at, eventAt               []time.Time
	durationMS                []float64
	sent                      []bool
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
	c.wids, c.aids, c.seqs = append(c.wids, a.Ref.WebhookID), append(c.aids, a.Ref.ActivityID), append(c.seqs, a.Ref.Seq)
	c.attempts, c.states, c.retryMS = append(c.attempts, int32(a.Attempt)), append(c.states, string(state)), append(c.retryMS, a.RetryIn.Milliseconds())
	c.status, c.errs = append(c.status, status), append(c.errs, e)
	c.at, c.durationMS = append(c.at, a.At), append(c.durationMS, float64(a.Duration.Microseconds())/1000)
	c.eventAt, c.sent = append(c.eventAt, a.EventAt), append(c.sent, a.Outcome != webhook.OutcomeUnsent)
}

// purgeBatch is how many rows of a table one purge statement deletes.
const purgeBatch = 5000

// PurgeDeliveries deletes, in batches, the attempts and the ended retries
// recorded before t. A retry is pending for at most a day, so nothing this
// old is still to be sent.
func (s *Store) PurgeDeliveries(ctx context.Context, before time.Time) (int64, error) {
	var deleted [2]int64
	for i, q := range []string{
		`DELETE FROM webhook_retry WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM webhook_retry WHERE created_at < $1 AND state <> 'pending' LIMIT $2))`,
		`DELETE FROM webhook_attempt WHERE ctid = ANY (ARRAY(SELECT ctid FROM webhook_attempt WHERE at < $1 LIMIT $2))`,
	} {
		for {
			tag, err := s.db.Exec(ctx, q, before, purgeBatch)
			if err != nil {
				return deleted[0], interpret(err)
			}
			deleted[i] += tag.RowsAffected()
			if tag.RowsAffected() < purgeBatch {
				break
			}
		}
	}
	return deleted[0], nil
}
