-- +goose Up

-- A pool is a number of seats shared by activities: a signup must fit its
-- activity and every pool the activity belongs to. A pool's taken is the
-- seats of the occupying registrations of its activities, summed over
-- registration_occupying_idx. last_seq moves forward with every change
-- transaction that changes the seats of one of its activities, its
-- capacity or its activities (all made under the pool's lock): an
-- instance that knows the pool's taken at a last_seq knows it while
-- last_seq stays.
CREATE TABLE pool (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id  text        NOT NULL UNIQUE,
    title      text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    capacity   integer     NOT NULL CHECK (capacity BETWEEN 0 AND 1000000),
    last_seq   bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The activities of each pool (at most 4 pools per activity, checked by
-- the service). Both directions are read under the locks: an activity's
-- pools, and a pool's activities.
CREATE TABLE activity_pool (
    activity_id bigint NOT NULL REFERENCES activity (id),
    pool_id     bigint NOT NULL REFERENCES pool (id),
    PRIMARY KEY (activity_id, pool_id)
);
CREATE INDEX activity_pool_pool_idx ON activity_pool (pool_id, activity_id);

-- The order in which registrations joined waiting lists, across
-- activities: a release in a pool promotes the oldest waiting first over
-- all its activities. A change transaction that may waitlist takes one
-- value of registration_join_seq after its locks (so transactions that
-- share a pool's lock take them in their order) and numbers its
-- waitlistings after it: joined = value * 1,000,000 + k.
CREATE SEQUENCE registration_join_seq;
ALTER TABLE registration ADD COLUMN joined bigint;
UPDATE registration r SET joined = o.n
FROM (SELECT id, row_number() OVER (ORDER BY updated_at, id) AS n FROM registration WHERE status = 'waitlisted') o
WHERE r.id = o.id;
SELECT setval('registration_join_seq', 1 + (SELECT count(*) FROM registration WHERE status = 'waitlisted') / 1000000);

-- +goose Down
ALTER TABLE registration DROP COLUMN joined;
DROP SEQUENCE registration_join_seq;
DROP TABLE activity_pool;
DROP TABLE pool;
