-- +goose Up

-- Webhooks deliver from the event log: the change transaction writes
-- nothing per webhook. Each webhook reads registration_event through one
-- cursor per activity (an activity's seqs are gapless and assigned under
-- its admission lock, so they commit in order: a reader that sees seq n
-- has seen every seq below it). Only what must be remembered is written:
-- a cursor's advance per batch, each attempt, and the deliveries that
-- failed their first attempt (the retry set).

-- What the payload's registration needs beyond the event and the
-- registration's fixed columns: its deadline and its place in the waiting
-- list as the change left them.
ALTER TABLE registration_event ADD COLUMN expires_at timestamptz, ADD COLUMN waitlist_position integer;

-- A webhook's place in one activity's events: every event up to seq is
-- done (delivered, or handed to the retry set). A worker leases the next
-- batch, (seq, claimed_to], by setting leased_until and counting fence; it
-- advances seq to claimed_to only while its lease is still the one it
-- took (fence unchanged). A lease that ran out (its instance died) is
-- taken again from seq. A missing row is a cursor at 0 (an activity with no
-- event when the webhook was created).
CREATE TABLE webhook_cursor (
    webhook_id   bigint      NOT NULL,
    activity_id  bigint      NOT NULL,
    seq          bigint      NOT NULL DEFAULT 0,
    claimed_to   bigint,
    fence        bigint      NOT NULL DEFAULT 0,
    leased_until timestamptz,
    PRIMARY KEY (webhook_id, activity_id)
) WITH (fillfactor = 50);

-- The retry set: one event's delivery to one webhook after its first
-- attempt failed (or could not be made in its batch's lease), kept until
-- the purge with its final state. Claimed like the cursor's batches, one
-- row at a time: leased_until, and attempts fences late results.
CREATE TABLE webhook_retry (
    webhook_id       bigint      NOT NULL,
    activity_id      bigint      NOT NULL,
    seq              bigint      NOT NULL,
    state            text        NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    leased_until     timestamptz,
    last_status_code integer,
    last_error       text,
    delivered_at     timestamptz,
    event_at         timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (webhook_id, activity_id, seq),
    CHECK (state <> 'pending' OR next_attempt_at IS NOT NULL)
) WITH (fillfactor = 70);

CREATE INDEX webhook_retry_due_idx ON webhook_retry (webhook_id, next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_retry_created_at_idx ON webhook_retry USING brin (created_at);

-- Each attempt of an event's delivery to a webhook.
CREATE TABLE webhook_log_attempt (
    webhook_id  bigint           NOT NULL,
    activity_id bigint           NOT NULL,
    seq         bigint           NOT NULL,
    attempt     integer          NOT NULL CHECK (attempt > 0),
    at          timestamptz      NOT NULL,
    status_code integer,
    error       text,
    duration_ms double precision NOT NULL,
    PRIMARY KEY (webhook_id, activity_id, seq, attempt)
);

CREATE INDEX webhook_log_attempt_at_idx ON webhook_log_attempt USING brin (at);

-- The outbox's deliveries carry over: a pending one joins the retry set as
-- it stood (its attempts, when it is due, its last answer), and so does
-- one that ended, with its final state, so that the deliveries API keeps
-- showing it; every recorded attempt carries over too. A lease in flight
-- ends: the delivery is due when its lease would have ended.
INSERT INTO webhook_retry (webhook_id, activity_id, seq, state, attempts, next_attempt_at, last_status_code,
        last_error, delivered_at, event_at, created_at)
SELECT d.webhook_id, d.activity_id, d.seq, d.state, d.attempts,
    CASE WHEN d.state = 'pending' THEN greatest(d.next_attempt_at, d.leased_until) END,
    d.last_status_code, d.last_error, d.delivered_at, d.created_at, d.created_at
FROM webhook_delivery d JOIN webhook w ON w.id = d.webhook_id
ON CONFLICT DO NOTHING;

INSERT INTO webhook_log_attempt (webhook_id, activity_id, seq, attempt, at, status_code, error, duration_ms)
SELECT t.webhook_id, d.activity_id, d.seq, t.attempt, t.at, t.status_code, t.error, t.duration_ms
FROM webhook_attempt t JOIN webhook_delivery d ON d.webhook_id = t.webhook_id AND d.id = t.delivery_id
ON CONFLICT DO NOTHING;

-- Every event recorded so far had its deliveries queued in the outbox:
-- each webhook's cursors start after them.
INSERT INTO webhook_cursor (webhook_id, activity_id, seq)
SELECT w.id, s.activity_id, s.last_seq
FROM webhook w JOIN activity_state s ON w.activity_id IS NULL OR w.activity_id = s.activity_id
WHERE s.last_seq > 0;

DROP TABLE webhook_attempt;
DROP TABLE webhook_delivery;
DROP TABLE webhook_message;
ALTER TABLE webhook_log_attempt RENAME TO webhook_attempt;
ALTER INDEX webhook_log_attempt_at_idx RENAME TO webhook_attempt_at_idx;

-- +goose Down
DROP TABLE webhook_attempt;
CREATE TABLE webhook_message (
    activity_id bigint      NOT NULL,
    seq         bigint      NOT NULL,
    event_id    text        NOT NULL,
    body        bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (activity_id, seq)
);
CREATE INDEX webhook_message_created_at_idx ON webhook_message USING brin (created_at);
CREATE TABLE webhook_delivery (
    webhook_id       bigint      NOT NULL,
    id               bigint      GENERATED ALWAYS AS IDENTITY,
    activity_id      bigint      NOT NULL,
    seq              bigint      NOT NULL,
    state            text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    leased_until     timestamptz,
    last_status_code integer,
    last_error       text,
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (webhook_id, id),
    CHECK (state <> 'pending' OR next_attempt_at IS NOT NULL)
) WITH (fillfactor = 70);
CREATE INDEX webhook_delivery_due_idx ON webhook_delivery (webhook_id, next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_delivery_created_at_idx ON webhook_delivery USING brin (created_at);
CREATE TABLE webhook_attempt (
    webhook_id  bigint           NOT NULL,
    delivery_id bigint           NOT NULL,
    attempt     integer          NOT NULL CHECK (attempt > 0),
    at          timestamptz      NOT NULL,
    status_code integer,
    error       text,
    duration_ms double precision NOT NULL,
    PRIMARY KEY (webhook_id, delivery_id, attempt)
);
CREATE INDEX webhook_attempt_at_idx ON webhook_attempt USING brin (at);
DROP TABLE webhook_retry;
DROP TABLE webhook_cursor;
ALTER TABLE registration_event DROP COLUMN waitlist_position, DROP COLUMN expires_at;
