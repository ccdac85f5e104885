-- +goose Up

-- A user's places in one line, newest first: a poll that the cached view
-- of the line cannot answer reads the user's newest place, and without
-- this index that read filtered every ticket of the line by user (the
-- partial unique index leaves out expired places, which the read must
-- see).
CREATE INDEX queue_ticket_place_idx ON queue_ticket (activity_id, user_id, id);

-- +goose Down
DROP INDEX queue_ticket_place_idx;
