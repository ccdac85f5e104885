-- +goose Up

-- Groups: a registration holds one or more seats, all or nothing, and an
-- activity's waiting list serves parties by its policy.
ALTER TABLE activity ADD COLUMN max_seats_per_registration integer NOT NULL DEFAULT 1
    CHECK (max_seats_per_registration BETWEEN 1 AND 100);
ALTER TABLE activity ADD COLUMN waitlist_policy text NOT NULL DEFAULT 'strict'
    CHECK (waitlist_policy IN ('strict', 'fill'));

ALTER TABLE registration ADD COLUMN seats integer NOT NULL DEFAULT 1 CHECK (seats BETWEEN 1 AND 100);

-- The authority: the seats of an activity's occupying rows, summed by an
-- index-only scan (the seats are in the index).
DROP INDEX registration_occupying_idx;
CREATE INDEX registration_occupying_idx ON registration (activity_id) INCLUDE (seats)
    WHERE status IN ('pending', 'awaiting_payment', 'approved');

-- The waiting list by party size, in join order: under the fill policy a
-- release reads, for each size that can fit, the first parties of that
-- size.
CREATE INDEX registration_waitlist_seats_idx ON registration (activity_id, seats, waitlist_seq)
    WHERE status = 'waitlisted';

-- Events carry the registration's seats after the change, and a reduction
-- its seats before.
ALTER TABLE registration_event ADD COLUMN seats integer NOT NULL DEFAULT 1;
ALTER TABLE registration_event ADD COLUMN seats_from integer;
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted', 'registration.seats_changed'));

-- +goose Down
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
DELETE FROM registration_event WHERE type = 'registration.seats_changed';
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted'));
ALTER TABLE registration_event DROP COLUMN seats_from;
ALTER TABLE registration_event DROP COLUMN seats;
DROP INDEX registration_waitlist_seats_idx;
DROP INDEX registration_occupying_idx;
CREATE INDEX registration_occupying_idx ON registration (activity_id)
    WHERE status IN ('pending', 'awaiting_payment', 'approved');
ALTER TABLE registration DROP COLUMN seats;
ALTER TABLE activity DROP COLUMN waitlist_policy;
ALTER TABLE activity DROP COLUMN max_seats_per_registration;
