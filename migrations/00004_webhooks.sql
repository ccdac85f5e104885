-- +goose Up

-- Webhooks deliver registration events to URLs that admins register, from a
-- transactional outbox: the change transaction that records an event also
-- inserts one delivery per matching webhook, so a crash after the commit
-- delays a delivery and never drops it.
--
-- The outbox tables carry no foreign keys: they are written by the change
-- transaction of every seat change, under the activity's admission lock,
-- where a per-row constraint check would slow every signup down. The code
-- keeps them consistent: deleting a webhook deletes its deliveries and
-- attempts, and the purge deletes the messages, deliveries and attempts
-- older than 30 days.

-- A webhook: where to send which events. secret is the signing secret
-- sealed with AES-256-GCM under WEBHOOK_SECRET_KEY (never stored in clear).
-- events holds event types, or the single element '*' for all of them.
CREATE TABLE webhook (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id   text        NOT NULL UNIQUE,
    url         text        NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
    events      text[]      NOT NULL CHECK (cardinality(events) > 0),
    activity_id bigint      REFERENCES activity (id),
    secret      bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz
);

-- The body delivered for an event, built once when the event is recorded
-- (the registration as that change left it) and stored once, whatever the
-- number of webhooks that receive it. Only events that some webhook
-- receives have one.
CREATE TABLE webhook_message (
    activity_id bigint      NOT NULL,
    seq         bigint      NOT NULL,
    event_id    text        NOT NULL,
    body        bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (activity_id, seq)
);

-- The purge of old messages; rows arrive in time order, so a BRIN index is
-- enough and costs next to nothing to keep.
CREATE INDEX webhook_message_created_at_idx ON webhook_message USING brin (created_at);

-- One event to one webhook, numbered by id in the order deliveries are
-- queued: the primary key (webhook_id, id) serves a webhook's recent
-- deliveries. A pending delivery is due at next_attempt_at; a worker
-- claims it by setting leased_until (an unindexed column, so the claim can
-- be a HOT update) and counting the attempt; a claim whose lease ran out
-- (its instance died) is claimed again. attempts also fences late results:
-- a result is recorded only while the delivery is still leased and
-- attempts still equals the attempt it reports.
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

-- What is due, per webhook (a claim takes at most a webhook's free sending
-- slots).
CREATE INDEX webhook_delivery_due_idx ON webhook_delivery (webhook_id, next_attempt_at) WHERE state = 'pending';

-- The purge of old deliveries.
CREATE INDEX webhook_delivery_created_at_idx ON webhook_delivery USING brin (created_at);

-- Every row is updated about twice soon after its insert: vacuum often.
ALTER TABLE webhook_delivery SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);

-- Each attempt of a delivery: its answer (status_code) or why there was
-- none (error), and how long it took. One row per attempt, whatever the
-- number of instances delivering.
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

-- +goose Down
DROP TABLE webhook_attempt;
DROP TABLE webhook_delivery;
DROP TABLE webhook_message;
DROP TABLE webhook;
