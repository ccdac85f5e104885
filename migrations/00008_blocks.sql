-- +goose Up

-- A block holds seats of an activity for an audience: the signups that
-- carry its code, or whose token holds its role (exactly one of the two).
-- Its unused seats (seats - used) are reserved: free to that audience
-- only, in the activity and in every pool of the activity. used is the
-- seats of the registrations made from it that still occupy them; it is
-- written by the change transaction, under the activity's lock, with the
-- registrations themselves. A block ends (deleted or expired) once:
-- ended_at is set and its unused seats return to the public.
CREATE TABLE block (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id   text        NOT NULL UNIQUE,
    activity_id bigint      NOT NULL REFERENCES activity (id),
    seats       integer     NOT NULL CHECK (seats BETWEEN 1 AND 1000000),
    used        integer     NOT NULL DEFAULT 0 CHECK (used BETWEEN 0 AND seats),
    code        text        CHECK (char_length(code) BETWEEN 1 AND 64),
    role        text        CHECK (char_length(role) BETWEEN 1 AND 64),
    expires_at  timestamptz,
    created_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    end_reason  text        CHECK (end_reason IN ('deleted', 'expired')),
    CHECK ((code IS NULL) <> (role IS NULL)),
    CHECK ((ended_at IS NULL) = (end_reason IS NULL))
);

-- The live blocks of an activity, read by every change transaction.
CREATE INDEX block_live_idx ON block (activity_id, id) WHERE ended_at IS NULL;
-- The live blocks that expire, claimed for expiry in deadline order.
CREATE INDEX block_due_idx ON block (expires_at) WHERE ended_at IS NULL AND expires_at IS NOT NULL;

-- The block (public id) whose seats a registration took, and the block of
-- an event (a block's own event, or one of such a registration).
ALTER TABLE registration ADD COLUMN block_id text;
ALTER TABLE registration_event ADD COLUMN block_id text;
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted', 'registration.seats_changed',
    'block.created', 'block.deleted', 'block.expired'));

-- +goose Down
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
DELETE FROM registration_event WHERE type LIKE 'block.%';
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted', 'registration.seats_changed'));
ALTER TABLE registration_event DROP COLUMN block_id;
ALTER TABLE registration DROP COLUMN block_id;
DROP TABLE block;
