-- +goose Up

-- Tickets are signed with Ed25519 keys that every instance shares: the
-- newest key that is not retired signs, every key not retired is
-- published (GET /v1/checkin/keys), so that tickets signed before a
-- rotation still verify. The private key is the 32-byte seed, sealed like
-- webhook secrets (AES-256-GCM with WEBHOOK_SECRET_KEY, the key id as
-- additional data), or kept in clear by a server without a sealing key.
CREATE TABLE checkin_key (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kid        text        NOT NULL UNIQUE,
    seed       bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    retired_at timestamptz
);

-- A check-in list is a door: the activities whose tickets it admits, its
-- entry rule, the room's limit and the counts kept under its row lock.
-- last_seq numbers its check-ins 1, 2, 3, … in commit order (every
-- check-in of a list is written under the list's row lock).
CREATE TABLE checkin_list (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id  text        NOT NULL UNIQUE,
    name       text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    -- The activities' public ids as the admin gave them (checkin_list_activity
    -- indexes them).
    activity_ids text[]    NOT NULL,
    entry      text        NOT NULL CHECK (entry IN ('once', 'reentry', 'multiple')),
    max_inside integer     CHECK (max_inside BETWEEN 1 AND 1000000),
    opens_at   timestamptz,
    closes_at  timestamptz,
    door_roles text[]      NOT NULL DEFAULT '{}',
    checked_in integer     NOT NULL DEFAULT 0,
    inside     integer     NOT NULL DEFAULT 0,
    conflicts  integer     NOT NULL DEFAULT 0,
    last_seq   bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz
);

CREATE TABLE checkin_list_activity (
    list_id     bigint NOT NULL REFERENCES checkin_list (id),
    activity_id bigint NOT NULL REFERENCES activity (id),
    PRIMARY KEY (list_id, activity_id)
);

-- The lists of an activity (attendance, GET /v1/checkin-lists?activity_id=).
CREATE INDEX checkin_list_activity_activity_idx ON checkin_list_activity (activity_id, list_id);

-- A registration's state on one list: whether it is inside, how often it
-- entered and left, and its first accepted entry (what a refused duplicate
-- names). Written only under the list's row lock.
CREATE TABLE checkin_record (
    list_id         bigint      NOT NULL REFERENCES checkin_list (id),
    registration_id bigint      NOT NULL REFERENCES registration (id),
    inside          boolean     NOT NULL DEFAULT false,
    inside_seats    integer     NOT NULL DEFAULT 0,
    entries         integer     NOT NULL DEFAULT 0,
    exits           integer     NOT NULL DEFAULT 0,
    first_at        timestamptz,
    first_device    text,
    PRIMARY KEY (list_id, registration_id)
);

-- Every accepted or forced check-in of a list, in the list's commit order.
CREATE TABLE checkin (
    list_id         bigint      NOT NULL REFERENCES checkin_list (id),
    seq             bigint      NOT NULL,
    registration_id bigint      NOT NULL REFERENCES registration (id),
    activity_id     bigint      NOT NULL REFERENCES activity (id),
    type            text        NOT NULL CHECK (type IN ('entry', 'exit')),
    at              timestamptz NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    device          text        NOT NULL,
    forced          boolean     NOT NULL DEFAULT false,
    conflict        text,
    seats           integer     NOT NULL,
    actor           text        NOT NULL,
    idempotency_key text,
    request_hash    bytea,
    PRIMARY KEY (list_id, seq)
);

-- A retried scan (the same Idempotency-Key on the same list) finds its
-- first answer; a key is recorded at most once per list.
CREATE UNIQUE INDEX checkin_idempotency_idx ON checkin (list_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- A registration's records over every list: its checked_in (an entry on
-- any list) is read from them, so that a check-in writes no registration
-- row (an update of one that cannot stay on its page writes every index
-- of the registration table).
CREATE INDEX checkin_record_registration_idx ON checkin_record (registration_id, entries);

-- Check-in events carry their door.
ALTER TABLE registration_event ADD COLUMN list_id text, ADD COLUMN device text, ADD COLUMN forced boolean,
    ADD COLUMN conflict text;
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted', 'registration.seats_changed',
    'registration.checked_in', 'registration.checked_out',
    'block.created', 'block.deleted', 'block.expired'));

-- +goose Down
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
DELETE FROM registration_event WHERE type IN ('registration.checked_in', 'registration.checked_out');
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted', 'registration.seats_changed',
    'block.created', 'block.deleted', 'block.expired'));
ALTER TABLE registration_event DROP COLUMN list_id, DROP COLUMN device, DROP COLUMN forced, DROP COLUMN conflict;
DROP INDEX checkin_record_registration_idx;
DROP TABLE checkin;
DROP TABLE checkin_record;
DROP TABLE checkin_list_activity;
DROP TABLE checkin_list;
DROP TABLE checkin_key;
