-- +goose Up

-- The organisers' console: its sessions and its one-time sign-in links.
-- Only a SHA-256 of each secret is kept (the cookie's value, the link's
-- token), so that a read of the table signs nobody in. A session ends when
-- it expires or is revoked (sign-out); a link is used once.
CREATE TABLE console_session (
    secret_hash bytea PRIMARY KEY,
    sub text NOT NULL,
    roles text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX console_session_expires_idx ON console_session (expires_at);

CREATE TABLE console_link (
    secret_hash bytea PRIMARY KEY,
    sub text NOT NULL,
    roles text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX console_link_expires_idx ON console_link (expires_at);

-- +goose Down
DROP TABLE console_link;
DROP TABLE console_session;
