package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/console"
)

// CreateSession stores a console session under the hash of its secret.
// Sessions that ended a day ago or more are deleted on the way, so that
// the table holds the live ones and a day of ended ones.
func (s *Store) CreateSession(ctx context.Context, secretHash []byte, g console.Grant) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_session WHERE expires_at < now() - interval '1 day'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_session (secret_hash, sub, roles, expires_at) VALUES ($1, $2, $3, $4)`,
			secretHash, g.Sub, nonNil(g.Roles), g.ExpiresAt)
		return err
	})
}

// Session returns the grant of the live session whose secret hashes to
// secretHash, or console.ErrNoSession when there is none, it expired or it
// was revoked.
func (s *Store) Session(ctx context.Context, secretHash []byte) (console.Grant, error) {
	var g console.Grant
	err := s.db.QueryRow(ctx, `SELECT sub, roles, expires_at FROM console_session
		WHERE secret_hash = $1 AND revoked_at IS NULL AND expires_at > now()`, secretHash).Scan(&g.Sub, &g.Roles, &g.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return console.Grant{}, console.ErrNoSession
	}
	return g, interpret(err)
}

// RevokeSession ends the session whose secret hashes to secretHash, on
// every instance at once.
func (s *Store) RevokeSession(ctx context.Context, secretHash []byte) error {
	_, err := s.db.Exec(ctx, `UPDATE console_session SET revoked_at = now() WHERE secret_hash = $1 AND revoked_at IS NULL`, secretHash)
	return interpret(err)
}

// CreateLink stores a one-time sign-in link under the hash of its token.
func (s *Store) CreateLink(ctx context.Context, secretHash []byte, g console.Grant) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_link WHERE expires_at < now() - interval '1 day'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_link (secret_hash, sub, roles, expires_at) VALUES ($1, $2, $3, $4)`,
			secretHash, g.Sub, nonNil(g.Roles), g.ExpiresAt)
		return err
	})
}

// UseLink marks the link whose token hashes to secretHash used and returns
// its grant, once: a second use, on any instance, or a use after it
// expired gets console.ErrNoSession.
func (s *Store) UseLink(ctx context.Context, secretHash []byte) (console.Grant, error) {
	var g console.Grant
	err := s.db.QueryRow(ctx, `UPDATE console_link SET used_at = now()
		WHERE secret_hash = $1 AND used_at IS NULL AND expires_at > now()
		RETURNING sub, roles`, secretHash).Scan(&g.Sub, &g.Roles)
	if errors.Is(err, pgx.ErrNoRows) {
		return console.Grant{}, console.ErrNoSession
	}
	return g, interpret(err)
}

// nonNil is roles, or an empty list for none (the column is NOT NULL).
func nonNil(roles []string) []string {
	if roles == nil {
		return []string{}
	}
	return roles
}
