-- +goose Up

-- A series is a set of activities of which one person may hold at most
-- max_per_user active (occupying or waitlisted) registrations. A change
-- transaction that may make a registration active in a series takes a
-- transaction-level advisory lock on each (series, user) pair of its
-- signups before it counts the user's registrations in the series, so the
-- check and the insert are one step per pair across instances.
CREATE TABLE series (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id    text        NOT NULL UNIQUE,
    title        text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    max_per_user integer     NOT NULL CHECK (max_per_user BETWEEN 1 AND 1000),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE activity ADD COLUMN series_id bigint REFERENCES series (id);
CREATE INDEX activity_series_idx ON activity (series_id) WHERE series_id IS NOT NULL;

-- +goose Down
ALTER TABLE activity DROP COLUMN series_id;
DROP TABLE series;
