package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// Cursors carry the public id of a page's last item (see
// registration.EncodeCursor); these find its row, through the unique index
// on public_id, within the listing the cursor is used with, for the keyset
// on the internal id that reads the next page. A cursor of another listing
// (another activity's registration, another user's) is UnknownCursor, as
// is one that names nothing.

// activityAfter returns the internal id of the activity of public id
// cursor, or 0 for no cursor.
func (s *Store) activityAfter(ctx context.Context, cursor string) (int64, error) {
	return s.cursorRow(ctx, cursor, `SELECT id FROM activity WHERE public_id = $1`)
}

// registrationAfterInActivity returns the internal id of the registration
// of public id cursor when it belongs to the activity of internal id aid,
// or 0 for no cursor.
func (s *Store) registrationAfterInActivity(ctx context.Context, cursor string, aid int64) (int64, error) {
	return s.cursorRow(ctx, cursor, `SELECT id FROM registration WHERE public_id = $1 AND activity_id = $2`, aid)
}

// registrationAfterOfUser returns the internal id of the registration of
// public id cursor when it belongs to userID, or 0 for no cursor.
func (s *Store) registrationAfterOfUser(ctx context.Context, cursor, userID string) (int64, error) {
	return s.cursorRow(ctx, cursor, `SELECT id FROM registration WHERE public_id = $1 AND user_id = $2`, userID)
}

// cursorRow runs q, which selects one internal id by the public id $1
// (and args), or returns 0 for no cursor.
func (s *Store) cursorRow(ctx context.Context, cursor, q string, args ...any) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	var id int64
	err := s.db.QueryRow(ctx, q, append([]any{cursor}, args...)...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, registration.UnknownCursor()
	}
	return id, interpret(err)
}
