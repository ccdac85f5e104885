-- +goose Up

-- When an activity takes place, what attendance earns credit, and the
-- rules that give the seats of people who will not come back: a
-- confirmation deadline, and a release at the door N minutes after the
-- start. The *_done_at columns record that the due-work loop ran each
-- moment's work once (the release at confirm_by, the release at the door,
-- the end-of-activity events); due_leased_until is the lease of the
-- instance that claimed the activity's due work (a claim that outlives its
-- instance is taken again when it runs out).
ALTER TABLE activity
    ADD COLUMN starts_at timestamptz,
    ADD COLUMN ends_at timestamptz,
    ADD COLUMN attendance_percent integer CHECK (attendance_percent BETWEEN 1 AND 100),
    ADD COLUMN confirm_by timestamptz,
    ADD COLUMN release_no_shows_after_minutes integer CHECK (release_no_shows_after_minutes BETWEEN 0 AND 240),
    ADD COLUMN confirm_done_at timestamptz,
    ADD COLUMN no_show_done_at timestamptz,
    ADD COLUMN ended_done_at timestamptz,
    ADD COLUMN due_leased_until timestamptz,
    ADD CONSTRAINT activity_ends_after_start CHECK (ends_at IS NULL OR starts_at IS NULL OR ends_at > starts_at);

-- The due-work loop's claims: activities whose moment has come and whose
-- work is not done.
CREATE INDEX activity_confirm_due_idx ON activity (confirm_by) WHERE confirm_by IS NOT NULL AND confirm_done_at IS NULL;
CREATE INDEX activity_no_show_due_idx ON activity (starts_at)
    WHERE release_no_shows_after_minutes IS NOT NULL AND starts_at IS NOT NULL AND no_show_done_at IS NULL;
CREATE INDEX activity_ended_due_idx ON activity (ends_at) WHERE ends_at IS NOT NULL AND ended_done_at IS NULL;

-- A registration's confirmation, and why it was cancelled.
ALTER TABLE registration
    ADD COLUMN confirmed_at timestamptz,
    ADD COLUMN cancel_reason text CHECK (cancel_reason IN ('user', 'admin', 'unconfirmed', 'no_show'));

-- An activity's check-ins over every list, by registration and time: the
-- attendance read never scans other activities' check-ins.
CREATE INDEX checkin_activity_idx ON checkin (activity_id, registration_id, at);

-- The reason of a release event.
ALTER TABLE registration_event ADD COLUMN reason text;
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted', 'registration.seats_changed',
    'registration.checked_in', 'registration.checked_out', 'registration.confirmed', 'registration.released',
    'registration.attended', 'registration.no_show',
    'block.created', 'block.deleted', 'block.expired'));

-- +goose Down
ALTER TABLE registration_event DROP CONSTRAINT registration_event_type_check;
DELETE FROM registration_event WHERE type IN ('registration.confirmed', 'registration.released', 'registration.attended',
    'registration.no_show');
ALTER TABLE registration_event ADD CONSTRAINT registration_event_type_check CHECK (type IN (
    'registration.created', 'registration.waitlisted', 'registration.promoted', 'registration.status_changed',
    'registration.cancelled', 'registration.expired', 'registration.readmitted', 'registration.seats_changed',
    'registration.checked_in', 'registration.checked_out',
    'block.created', 'block.deleted', 'block.expired'));
ALTER TABLE registration_event DROP COLUMN reason;
ALTER TABLE registration DROP COLUMN confirmed_at, DROP COLUMN cancel_reason;
DROP INDEX checkin_activity_idx;
DROP INDEX activity_confirm_due_idx;
DROP INDEX activity_no_show_due_idx;
DROP INDEX activity_ended_due_idx;
ALTER TABLE activity DROP CONSTRAINT activity_ends_after_start, DROP COLUMN starts_at, DROP COLUMN ends_at,
    DROP COLUMN attendance_percent, DROP COLUMN confirm_by, DROP COLUMN release_no_shows_after_minutes,
    DROP COLUMN confirm_done_at, DROP COLUMN no_show_done_at, DROP COLUMN ended_done_at, DROP COLUMN due_leased_until;
