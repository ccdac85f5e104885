-- +goose Up

-- Every transaction that makes registrations of an activity occupying (an
-- admission batch, a re-admission) bumps the activity's epoch under the
-- admission lock. An instance that last counted the activity at the current
-- epoch knows an upper bound of its occupying rows (its last COUNT plus what
-- it admitted since: cancellations and expiries only lower the truth), so it
-- can admit without counting again; it counts before refusing anyone.
CREATE TABLE activity_admission (
    activity_id bigint PRIMARY KEY REFERENCES activity (id),
    epoch       bigint NOT NULL
) WITH (fillfactor = 50);

-- +goose Down
DROP TABLE activity_admission;
