-- +goose Up

-- An activity's signup window and admission queue. Signups are taken from
-- opens_at (inclusive) until closes_at (exclusive), each checked against
-- the database's clock in the change transaction. queue holds the queue's
-- settings (admit_per_second, max_admitted, token_seconds,
-- absent_seconds), or NULL for none.
ALTER TABLE activity
    ADD COLUMN opens_at  timestamptz,
    ADD COLUMN closes_at timestamptz,
    ADD COLUMN queue     jsonb,
    ADD CONSTRAINT activity_window_check CHECK (closes_at IS NULL OR opens_at IS NULL OR closes_at > opens_at);

-- One row per activity that ever had a queue: the state its admission
-- controller advances, under this row's lock (any instance, FOR UPDATE
-- SKIP LOCKED). next_position is the last position given; shuffled is
-- set once the places taken before opens_at got their random order;
-- credit is the admission rate's unspent allowance as of credited_at.
-- head, waiting and admitted_through describe the line after the last
-- advance, for the instances' cached view of it.
CREATE TABLE admission_queue (
    activity_id      bigint           PRIMARY KEY REFERENCES activity (id),
    next_position    bigint           NOT NULL DEFAULT 0,
    shuffled         boolean          NOT NULL DEFAULT false,
    credit           double precision NOT NULL DEFAULT 0,
    credited_at      timestamptz      NOT NULL DEFAULT now(),
    head             bigint,
    waiting          bigint           NOT NULL DEFAULT 0,
    admitted_through bigint           NOT NULL DEFAULT 0,
    sold_out         boolean          NOT NULL DEFAULT false,
    advanced_at      timestamptz      NOT NULL DEFAULT now()
);

-- A user's place in an activity's admission queue. position is NULL for a
-- place taken before opens_at until the shuffle gives it one. state moves
-- waiting → admitted (token, token_expires_at) → used, or to expired
-- (absent for absent_seconds, or an admission token not used in time), or
-- waiting → sold_out. A user holds at most one place that is not expired.
CREATE TABLE queue_ticket (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    activity_id      bigint      NOT NULL REFERENCES activity (id),
    user_id          text        NOT NULL,
    joined_at        timestamptz NOT NULL,
    position         bigint,
    state            text        NOT NULL DEFAULT 'waiting'
                     CHECK (state IN ('waiting', 'admitted', 'used', 'expired', 'sold_out')),
    token            text        UNIQUE,
    token_expires_at timestamptz,
    admitted_at      timestamptz,
    last_seen_at     timestamptz NOT NULL,
    CHECK ((state IN ('admitted', 'used')) = (token IS NOT NULL) OR state = 'expired')
);
CREATE UNIQUE INDEX queue_ticket_user_idx ON queue_ticket (activity_id, user_id) WHERE state <> 'expired';
-- The line: waiting places in position order, and the places still to be
-- given one.
CREATE INDEX queue_ticket_line_idx ON queue_ticket (activity_id, state, position);

-- +goose Down
DROP TABLE queue_ticket;
DROP TABLE admission_queue;
ALTER TABLE activity DROP CONSTRAINT activity_window_check,
    DROP COLUMN queue, DROP COLUMN closes_at, DROP COLUMN opens_at;
