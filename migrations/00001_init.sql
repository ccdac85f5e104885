-- +goose Up

-- An activity is an event with a fixed number of seats. The internal bigint
-- id keys the registrations and the admission lock; public_id is what the API
-- shows.
CREATE TABLE activity (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id    text        NOT NULL UNIQUE,
    title        text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    capacity     integer     NOT NULL CHECK (capacity BETWEEN 0 AND 1000000),
    hold_seconds integer     NOT NULL DEFAULT 900 CHECK (hold_seconds BETWEEN 60 AND 86400),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Registrations are append-only: cancel and expiry change status, nothing is
-- ever deleted. COUNT(*) of the occupying rows of an activity is the authority
-- on how many seats are taken.
CREATE TABLE registration (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id   text        NOT NULL UNIQUE,
    activity_id bigint      NOT NULL REFERENCES activity (id),
    user_id     text        NOT NULL CHECK (char_length(user_id) BETWEEN 1 AND 128),
    status      text        NOT NULL CHECK (status IN ('pending', 'awaiting_payment', 'approved', 'cancelled', 'expired')),
    metadata    json        NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    CHECK (status <> 'awaiting_payment' OR expires_at IS NOT NULL)
);

-- Serves the authority COUNT (index-only) and status-filtered keyset pages.
CREATE INDEX registration_activity_status_idx ON registration (activity_id, status, id);

-- One occupying registration per user and activity.
CREATE UNIQUE INDEX registration_one_occupying_per_user_idx
    ON registration (activity_id, user_id)
    WHERE status IN ('pending', 'awaiting_payment', 'approved');

-- Holds to expire.
CREATE INDEX registration_hold_expiry_idx ON registration (expires_at) WHERE status = 'awaiting_payment';

-- Insert-heavy: vacuum often enough that the visibility map stays set and the
-- COUNT stays index-only.
ALTER TABLE registration SET (
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);

-- Per-note counters, incremented in place by INSERT ... ON CONFLICT DO UPDATE.
CREATE TABLE note_stats (
    note_id    text        PRIMARY KEY CHECK (note_id ~ '^[A-Za-z0-9_-]{1,128}$'),
    views      bigint      NOT NULL DEFAULT 0 CHECK (views >= 0),
    waters     bigint      NOT NULL DEFAULT 0 CHECK (waters >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The first outcome of each Idempotency-Key, replayed byte for byte. Written
-- in the admission transaction that produced the outcome.
CREATE TABLE idempotency_key (
    activity_id     bigint      NOT NULL REFERENCES activity (id),
    user_id         text        NOT NULL,
    key             text        NOT NULL CHECK (char_length(key) BETWEEN 1 AND 255),
    request_hash    bytea       NOT NULL,
    outcome         text        NOT NULL,
    registration_id text,
    body            bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (activity_id, user_id, key)
);

CREATE INDEX idempotency_key_created_at_idx ON idempotency_key (created_at);

-- +goose Down
DROP TABLE idempotency_key;
DROP TABLE note_stats;
DROP TABLE registration;
DROP TABLE activity;
