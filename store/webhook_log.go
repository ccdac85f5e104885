package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/webhook"
)

// Webhooks deliver from the event log (registration_event): the change
// transaction writes nothing for them. Each webhook reads each activity's
// events through a cursor (webhook_cursor; a missing one is at 0). An
// activity's seqs are gapless and assigned under its admission lock, which
// is held until the transaction's commit is visible: whoever sees seq n
// has seen every seq below it, so a cursor never passes an event that
// commits later. The events of a batch that are not delivered at their
// first attempt join the retry set (webhook_retry); webhook_attempt keeps
// every attempt.

// receives is the test of whether webhook w receives event e: not a block
// event, of a type it subscribes to.
const receives = `e.type NOT LIKE 'block.%' AND (w.events = '{*}' OR e.type = ANY (w.events))`

// hookEventColumns are an event's columns with what its payload's
// registration needs, for a query over registration_event e joined with
// its activity a and its registration r.
const hookEventColumns = eventColumns + `, e.expires_at, e.waitlist_position, r.metadata, r.created_at`

// hookEventFrom joins an event e with its activity a and registration r.
const hookEventFrom = `registration_event e JOIN activity a ON a.id = e.activity_id JOIN registration r ON r.public_id = e.registration_id`

// scanHookEvent scans hookEventColumns after the extra columns given, and
// returns the event's id and payload: the event with the registration as
// its change left it, built from what the log keeps, so that every
// attempt sends the same bytes.
func scanHookEvent(row pgx.Row, extra ...any) (hookEvent, error) {
	var e registration.Event
	var pos *int32
	var meta []byte
	var created time.Time
	dest := append(extra, &e.Seq, &e.ActivityID, &e.RegistrationID, &e.UserID, &e.Type, &e.From, &e.To,
		&e.Seats, &e.SeatsFrom, &e.Actor, &e.RequestID, &e.At, &e.BlockID)
	var expires *time.Time
	if err := row.Scan(append(dest, &expires, &pos, &meta, &created)...); err != nil {
		return hookEvent{}, err
	}
	e.ID, e.At = registration.EventID(e.ActivityID, e.Seq), e.At.UTC()
	r := registration.Registration{ID: e.RegistrationID, ActivityID: e.ActivityID, UserID: e.UserID, Status: e.To,
		Seats: e.Seats, BlockID: e.BlockID, Metadata: meta, CreatedAt: created.UTC(), UpdatedAt: e.At, ExpiresAt: utc(expires)}
	if pos != nil {
		p := int(*pos)
		r.WaitlistPosition = &p
	}
	e.Registration = &r
	body, err := webhook.Payload(e)
	return hookEvent{id: e.ID, activity: e.ActivityID, seq: e.Seq, typ: e.Type, body: body, at: e.At}, err
}

// hookEvent is an event as a delivery sends it.
type hookEvent struct {
	id string
	// activity is the activity's public id.
	activity string
	seq      int64
	typ      registration.EventType
	body     []byte
	at       time.Time
}

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

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// slotsSQL is the enabled webhooks with the claim's free slots of each
// ($2 slots less $3/$4, the busy counts by public id).
const slotsSQL = `slots AS (
		SELECT w.id, w.public_id, w.url, w.secret, w.events, greatest(0, $2::int - coalesce(b.n, 0)) AS free
		FROM webhook w LEFT JOIN unnest($3::text[], $4::int[]) AS b(public_id, n) ON b.public_id = w.public_id
		WHERE w.disabled_at IS NULL
	)`

// cursorsSQL gives every enabled webhook a cursor, at 0, for each activity
// it receives from that has events and no cursor yet (an activity whose
// first event came after the webhook's creation).
const cursorsSQL = `
	INSERT INTO webhook_cursor (webhook_id, activity_id)
	SELECT w.id, s.activity_id FROM webhook w JOIN activity_state s ON w.activity_id IS NULL OR s.activity_id = w.activity_id
	WHERE w.disabled_at IS NULL AND s.last_seq > 0
		AND NOT EXISTS (SELECT 1 FROM webhook_cursor c WHERE c.webhook_id = w.id AND c.activity_id = s.activity_id)
	ON CONFLICT DO NOTHING`

// activityCursorsSQL is cursorsSQL for the activities of $1 (public ids)
// only, found by their indexes.
const activityCursorsSQL = `
	INSERT INTO webhook_cursor (webhook_id, activity_id)
	SELECT w.id, s.activity_id FROM activity a JOIN activity_state s ON s.activity_id = a.id
	JOIN webhook w ON w.activity_id IS NULL OR w.activity_id = a.id
	WHERE a.public_id = ANY ($1) AND w.disabled_at IS NULL AND s.last_seq > 0
		AND NOT EXISTS (SELECT 1 FROM webhook_cursor c WHERE c.webhook_id = w.id AND c.activity_id = s.activity_id)
	ON CONFLICT DO NOTHING`

// claimBatchesSQL leases, for each enabled webhook with free slots, the
// next batch of each activity's events after its cursor that no live
// lease holds: up to its free slots of seqs, and not past the activity's
// last seq. The lease ($1 milliseconds) is a column no index covers, so
// the claim can be a HOT update; fence counts the leases.
const claimBatchesSQL = `
	WITH ` + slotsSQL + `, due AS (
		SELECT c.webhook_id, c.activity_id, c.seq, least(s.last_seq, c.seq + sl.free) AS upto
		FROM slots sl JOIN webhook_cursor c ON c.webhook_id = sl.id
		JOIN activity_state s ON s.activity_id = c.activity_id
		WHERE sl.free > 0 AND s.last_seq > c.seq AND (c.leased_until IS NULL OR c.leased_until <= now())
		FOR UPDATE OF c SKIP LOCKED
	)` + leaseBatchesSQL

// claimActivityBatchesSQL is claimBatchesSQL for the activities of $5
// (public ids) only, found by their indexes: what a local commit woke the
// dispatcher for.
const claimActivityBatchesSQL = `
	WITH ` + slotsSQL + `, due AS (
		SELECT c.webhook_id, c.activity_id, c.seq, least(s.last_seq, c.seq + sl.free) AS upto
		FROM activity a JOIN activity_state s ON s.activity_id = a.id
		JOIN webhook_cursor c ON c.activity_id = a.id
		JOIN slots sl ON sl.id = c.webhook_id
		WHERE a.public_id = ANY ($5) AND sl.free > 0 AND s.last_seq > c.seq AND (c.leased_until IS NULL OR c.leased_until <= now())
		FOR UPDATE OF c SKIP LOCKED
	)` + leaseBatchesSQL

// leaseBatchesSQL leases the due batches of a claim.
const leaseBatchesSQL = `
	UPDATE webhook_cursor c SET claimed_to = due.upto, fence = c.fence + 1, leased_until = now() + $1 * interval '1 millisecond'
	FROM due, slots sl
	WHERE c.webhook_id = due.webhook_id AND c.activity_id = due.activity_id AND sl.id = c.webhook_id
	RETURNING c.webhook_id, c.activity_id, due.seq, c.claimed_to, c.fence, sl.public_id, sl.url, sl.secret, sl.events`

// batchEventsSQL reads the events of leased batches that webhooks may
// receive, in seq order: those in the ranges $1..$3 (activity, after, up
// to), which are disjoint (mergeRanges), so each event is read once
// whatever the number of batches that hold it. Each range is a LATERAL
// subquery with a LIMIT (its length: no more seqs fit in it), which the
// planner runs as it is written, one range scan of the primary key per
// range, and each registration is looked up by its key the same way:
// written as plain joins, a small or unanalyzed event table got plans
// that read every event of the activity for each event or range.
const batchEventsSQL = `
	SELECT e.activity_id, ` + hookEventColumns + `
	FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS b(activity_id, from_seq, to_seq)
	CROSS JOIN LATERAL (SELECT e.* FROM registration_event e
		WHERE e.activity_id = b.activity_id AND e.seq > b.from_seq AND e.seq <= b.to_seq
		ORDER BY e.seq LIMIT b.to_seq - b.from_seq) e
	JOIN activity a ON a.id = e.activity_id
	CROSS JOIN LATERAL (SELECT r.metadata, r.created_at FROM registration r WHERE r.public_id = e.registration_id LIMIT 1) r
	WHERE e.type NOT LIKE 'block.%'
	ORDER BY e.activity_id, e.seq`

// seqRange is the seqs of an activity's events after from, up to to.
type seqRange struct{ activity, from, to int64 }

// mergeRanges returns the union of rs as disjoint ranges, ordered by
// activity and seq: the batches of several webhooks on one activity
// overlap, and their events are read once.
func mergeRanges(rs []seqRange) []seqRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b seqRange) int {
		return cmp.Or(cmp.Compare(a.activity, b.activity), cmp.Compare(a.from, b.from))
	})
	var out []seqRange
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].activity == r.activity && r.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, r.to)
			continue
		}
		out = append(out, r)
	}
	return out
}

// claimRetriesSQL claims due retries: for each enabled webhook, up to its
// free slots of its pending retries that are due and not leased, oldest
// first, skipping rows another claim or record holds; it counts the
// attempt and leases them ($1 milliseconds).
const claimRetriesSQL = `
	WITH ` + slotsSQL + `, due AS (
		SELECT t.webhook_id, t.activity_id, t.seq, s.public_id, s.url, s.secret
		FROM slots s CROSS JOIN LATERAL (
			SELECT t.webhook_id, t.activity_id, t.seq FROM webhook_retry t
			WHERE t.webhook_id = s.id AND t.state = 'pending' AND t.next_attempt_at <= now()
				AND (t.leased_until IS NULL OR t.leased_until <= now())
			ORDER BY t.next_attempt_at LIMIT s.free
			FOR UPDATE SKIP LOCKED) t
		WHERE s.free > 0
	), claimed AS (
		UPDATE webhook_retry t SET attempts = t.attempts + 1, leased_until = now() + $1 * interval '1 millisecond'
		FROM due WHERE t.webhook_id = due.webhook_id AND t.activity_id = due.activity_id AND t.seq = due.seq
		RETURNING t.webhook_id, t.activity_id, t.seq, t.attempts, due.public_id, due.url, due.secret
	)
	SELECT c.webhook_id, c.activity_id, c.attempts, c.public_id, c.url, c.secret, ` + hookEventColumns + `
	FROM claimed c JOIN ` + hookEventFrom + ` ON e.activity_id = c.activity_id AND e.seq = c.seq`

// asyncCommit makes the rest of a batch's implicit transaction commit
// without waiting for its WAL to reach disk. Only the dispatcher's claims
// and results commit so: losing the last of them in a database crash
// means a batch or retry is claimed again when its lease ends, or an event
// sent again, which at least once delivery allows; the events themselves
// are written by the change transaction, which waits. It keeps the
// dispatcher's commits from queueing behind (and slowing) the change
// transactions' on a busy server.
const asyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// ClaimDeliveries claims batches and, when it looks at every activity,
// due retries (see claimBatchesSQL and claimRetriesSQL), reads the
// batches' events, and passes at once the batches with none that their
// webhooks receive.
func (s *Store) ClaimDeliveries(ctx context.Context, c webhook.Claim) ([]webhook.Job, error) {
	ids, busy := make([]string, 0, len(c.Busy)), make([]int32, 0, len(c.Busy))
	for id, n := range c.Busy {
		ids, busy = append(ids, id), append(busy, int32(n))
	}
	type leased struct {
		batch  webhook.Batch
		job    webhook.Job // the batch's webhook
		events []string    // what its webhook subscribes to
	}
	var batches []leased
	var out []webhook.Job
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	args := []any{c.Lease.Milliseconds(), c.Slots, ids, busy}
	if c.Activities == nil {
		b.Queue(cursorsSQL)
		b.Queue(claimBatchesSQL, args...)
	} else {
		b.Queue(activityCursorsSQL, c.Activities)
		b.Queue(claimActivityBatchesSQL, append(args, c.Activities)...)
	}
	b.QueuedQueries[len(b.QueuedQueries)-1].Query(func(rows pgx.Rows) error {
		var err error
		batches, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (leased, error) {
			var l leased
			err := row.Scan(&l.batch.WebhookID, &l.batch.ActivityID, &l.batch.From, &l.batch.To, &l.batch.Fence,
				&l.job.WebhookID, &l.job.URL, &l.job.SealedSecret, &l.events)
			return l, err
		})
		return err
	})
	if c.Activities == nil {
		b.Queue(claimRetriesSQL, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var j webhook.Job
				e, err := scanHookEvent(rows, &j.Ref.WebhookID, &j.Ref.ActivityID, &j.Attempt, &j.WebhookID, &j.URL, &j.SealedSecret)
				if err != nil {
					return err
				}
				j.Ref.Seq, j.EventID, j.Body, j.CreatedAt = e.seq, e.id, e.body, e.at
				out = append(out, j)
			}
			return rows.Err()
		})
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, interpret(err)
	}
	if len(batches) == 0 {
		return out, nil
	}
	n := len(batches)
	ranges := make([]seqRange, n)
	for i, l := range batches {
		ranges[i] = seqRange{l.batch.ActivityID, l.batch.From, l.batch.To}
	}
	ranges = mergeRanges(ranges)
	aids, froms, tos := make([]int64, len(ranges)), make([]int64, len(ranges)), make([]int64, len(ranges))
	for i, r := range ranges {
		aids[i], froms[i], tos[i] = r.activity, r.from, r.to
	}
	rows, err := s.db.Query(ctx, batchEventsSQL, aids, froms, tos)
	if err != nil {
		return out, interpret(err)
	}
	type logged struct {
		aid   int64
		event hookEvent
	}
	var events []logged
	for rows.Next() {
		var l logged
		if l.event, err = scanHookEvent(rows, &l.aid); err != nil {
			rows.Close()
			return out, interpret(err)
		}
		events = append(events, l)
	}
	if err := rows.Err(); err != nil {
		return out, interpret(err)
	}
	// Each batch's jobs: its events that its webhook subscribes to.
	var jobs []webhook.Job
	for i := range batches {
		l := &batches[i]
		for _, e := range events {
			if e.aid != l.batch.ActivityID || e.event.seq <= l.batch.From || e.event.seq > l.batch.To || !webhook.Subscribes(l.events, e.event.typ) {
				continue
			}
			j := l.job
			j.Ref = webhook.Ref{WebhookID: l.batch.WebhookID, ActivityID: l.batch.ActivityID, Seq: e.event.seq}
			j.Attempt, j.EventID, j.Body, j.CreatedAt = 1, e.event.id, e.event.body, e.event.at
			l.batch.Jobs++
			l.batch.Activity = e.event.activity
			jobs = append(jobs, j)
		}
	}
	// Each job points at its batch, now that the batch counts its jobs.
	ptrs := make([]*webhook.Batch, n)
	var empty []webhook.Batch
	for i := range batches {
		ptrs[i] = &batches[i].batch
		if batches[i].batch.Jobs == 0 {
			empty = append(empty, batches[i].batch)
		}
	}
	k := 0
	for i := range batches {
		for range batches[i].batch.Jobs {
			jobs[k].Batch = ptrs[i]
			k++
		}
	}
	if len(empty) > 0 {
		if err := s.recordBatches(ctx, empty, nil); err != nil {
			return append(out, jobs...), err
		}
	}
	return append(out, jobs...), nil
}

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
	queueAttempts(b, attempts)
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
	queueBatches(b, batches, &c)
	return interpret(s.db.SendBatch(ctx, b).Close())
}

// queueAttempts queues the statements that record attempts.
func queueAttempts(b *pgx.Batch, attempts []webhook.Attempt) {
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
		queueBatches(b, batches, &batched)
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

func queueBatches(b *pgx.Batch, batches []webhook.Batch, c *attemptColumns) {
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
