package store

import (
	"cmp"
	"context"
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
//
// This file is the dispatcher's claims; webhook_record.go records their
// results, webhook_admin.go serves the admin's reads.

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
	var d doorColumns
	dest := append(extra, &e.Seq, &e.ActivityID, &e.RegistrationID, &e.UserID, &e.Type, &e.From, &e.To,
		&e.Seats, &e.SeatsFrom, &e.Actor, &e.RequestID, &e.At, &e.BlockID)
	dest = append(dest, d.dest()...)
	var expires *time.Time
	if err := row.Scan(append(dest, &expires, &pos, &meta, &created)...); err != nil {
		return hookEvent{}, err
	}
	e.ID, e.At, e.Door, e.Reason = registration.EventID(e.ActivityID, e.Seq), e.At.UTC(), d.door(), d.reason
	r := registration.Registration{CheckedIn: e.Type == registration.EventCheckedIn, ID: e.RegistrationID, ActivityID: e.ActivityID, UserID: e.UserID, Status: e.To,
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

// utc returns t in UTC (nil: nil).
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
	batches, out, err := s.claim(ctx, c)
	if err != nil || len(batches) == 0 {
		return out, err
	}
	events, err := s.batchEvents(ctx, batches)
	if err != nil {
		return out, err
	}
	jobs, empty := batchJobs(batches, events)
	if len(empty) > 0 {
		if err := s.recordBatches(ctx, empty, nil); err != nil {
			return append(out, jobs...), err
		}
	}
	return append(out, jobs...), nil
}

// leasedBatch is a batch a claim leased, with its webhook's job template
// and what the webhook subscribes to.
type leasedBatch struct {
	batch  webhook.Batch
	job    webhook.Job
	events []string
}

// loggedEvent is an event of a leased batch, with its activity's internal
// id.
type loggedEvent struct {
	aid   int64
	event hookEvent
}

// claim leases, in one round trip, the due batches and (unless the claim
// is for some activities) the due retries, and returns the batches and the
// retries' jobs.
func (s *Store) claim(ctx context.Context, c webhook.Claim) ([]leasedBatch, []webhook.Job, error) {
	ids, busy := make([]string, 0, len(c.Busy)), make([]int32, 0, len(c.Busy))
	for id, n := range c.Busy {
		ids, busy = append(ids, id), append(busy, int32(n))
	}
	var batches []leasedBatch
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
		batches, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (leasedBatch, error) {
			var l leasedBatch
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
		return nil, nil, interpret(err)
	}
	return batches, out, nil
}

// batchEvents reads the events of the leased batches, their ranges merged
// per activity.
func (s *Store) batchEvents(ctx context.Context, batches []leasedBatch) ([]loggedEvent, error) {
	ranges := make([]seqRange, len(batches))
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
		return nil, interpret(err)
	}
	defer rows.Close()
	var events []loggedEvent
	for rows.Next() {
		var l loggedEvent
		if l.event, err = scanHookEvent(rows, &l.aid); err != nil {
			return nil, interpret(err)
		}
		events = append(events, l)
	}
	return events, interpret(rows.Err())
}

// batchJobs returns each batch's jobs (its events that its webhook
// subscribes to), each pointing at its batch, which counts them; and the
// batches without a job, to end at once.
func batchJobs(batches []leasedBatch, events []loggedEvent) (jobs []webhook.Job, empty []webhook.Batch) {
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
	k := 0
	for i := range batches {
		if batches[i].batch.Jobs == 0 {
			empty = append(empty, batches[i].batch)
		}
		for range batches[i].batch.Jobs {
			jobs[k].Batch = &batches[i].batch
			k++
		}
	}
	return jobs, empty
}
