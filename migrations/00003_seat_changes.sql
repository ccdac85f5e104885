-- +goose Up

-- Every change of an activity's seats and registrations is made in one
-- transaction per batch under the activity's admission lock, and recorded
-- as an event of that transaction.

-- An activity may keep a waiting list; waitlisted registrations occupy no
-- seat and are promoted, oldest first, in the transaction that frees one.
ALTER TABLE activity ADD COLUMN waitlist boolean NOT NULL DEFAULT false;

ALTER TABLE registration DROP CONSTRAINT registration_status_check;
ALTER TABLE registration ADD CONSTRAINT registration_status_check CHECK (status IN
    ('pending', 'awaiting_payment', 'approved', 'waitlisted', 'cancelled', 'expired'));

-- The join order of the waiting list: the seq of the registration's
-- registration.waitlisted event, fixed under the activity's lock (ids are
-- made before the lock and can commit out of order).
ALTER TABLE registration ADD COLUMN waitlist_seq bigint;
ALTER TABLE registration ADD CONSTRAINT registration_waitlist_seq_check
    CHECK (status <> 'waitlisted' OR waitlist_seq IS NOT NULL);

-- One active (occupying or waitlisted) registration per user and activity.
CREATE UNIQUE INDEX registration_one_active_per_user_idx
    ON registration (activity_id, user_id)
    WHERE status IN ('pending', 'awaiting_payment', 'approved', 'waitlisted');
DROP INDEX registration_one_occupying_per_user_idx;

-- The authority: COUNT(*) of an activity's occupying rows, index-only, with
-- the status test part of the index (a generic plan of the prepared COUNT
-- must not turn it into a filter over every row of the activity).
CREATE INDEX registration_occupying_idx ON registration (activity_id)
    WHERE status IN ('pending', 'awaiting_payment', 'approved');

-- The waiting list in join order: the promotion's head and each
-- registration's position (an index-only count) read it.
CREATE INDEX registration_waitlist_idx ON registration (activity_id, waitlist_seq) WHERE status = 'waitlisted';

-- A user's own registrations over all activities, newest first.
CREATE INDEX registration_user_idx ON registration (user_id, id);

-- The per-activity row of the change path: the seq of the activity's last
-- event, bumped under the admission lock, so seqs are gapless and in
-- commit order. (It held the admission epoch before.)
ALTER TABLE activity_admission RENAME TO activity_state;
ALTER TABLE activity_state RENAME COLUMN epoch TO last_seq;
UPDATE activity_state SET last_seq = 0;

-- Every change of a registration, in the transaction that makes it.
-- Append-only; an event is named by (activity, seq).
CREATE TABLE registration_event (
    activity_id     bigint      NOT NULL REFERENCES activity (id),
    seq             bigint      NOT NULL CHECK (seq > 0),
    registration_id text        NOT NULL,
    user_id         text        NOT NULL,
    type            text        NOT NULL CHECK (type IN ('registration.created', 'registration.waitlisted',
        'registration.promoted', 'registration.status_changed', 'registration.cancelled',
        'registration.expired', 'registration.readmitted')),
    from_status     text,
    to_status       text        NOT NULL,
    actor           text        NOT NULL,
    request_id      text        NOT NULL DEFAULT '',
    at              timestamptz NOT NULL,
    PRIMARY KEY (activity_id, seq)
);

-- A registration's events.
CREATE INDEX registration_event_registration_idx ON registration_event (registration_id, seq);

-- +goose Down
DROP TABLE registration_event;
UPDATE activity_state SET last_seq = 0;
ALTER TABLE activity_state RENAME COLUMN last_seq TO epoch;
ALTER TABLE activity_state RENAME TO activity_admission;
DROP INDEX registration_user_idx;
DROP INDEX registration_waitlist_idx;
DROP INDEX registration_occupying_idx;
CREATE UNIQUE INDEX registration_one_occupying_per_user_idx
    ON registration (activity_id, user_id)
    WHERE status IN ('pending', 'awaiting_payment', 'approved');
DROP INDEX registration_one_active_per_user_idx;
ALTER TABLE registration DROP CONSTRAINT registration_waitlist_seq_check;
ALTER TABLE registration DROP COLUMN waitlist_seq;
ALTER TABLE registration DROP CONSTRAINT registration_status_check;
ALTER TABLE registration ADD CONSTRAINT registration_status_check CHECK (status IN
    ('pending', 'awaiting_payment', 'approved', 'cancelled', 'expired'));
ALTER TABLE activity DROP COLUMN waitlist;
