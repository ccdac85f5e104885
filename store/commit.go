package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// currentXactSQL returns the id of the transaction it runs in, which it
// assigns: asked before COMMIT is sent, it lets the outcome of a commit
// whose reply was lost be learnt afterwards (see commitOutcome).
const currentXactSQL = `SELECT pg_current_xact_id()::text::bigint`

// commitWait bounds how long commitOutcome keeps asking about a
// transaction that is still committing.
const commitWait = 5 * time.Second

// inDoubt reports whether err, from a batch that ended with COMMIT, leaves
// the commit's outcome unknown: the connection failed (or the wait for its
// reply was given up), or the server ended the session (a shutdown can
// reach a backend right after its commit), rather than PostgreSQL refusing
// a statement, which aborts the transaction for sure.
func inDoubt(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err != nil
	}
	class := pgErr.Code[:2]
	return class == "08" || class == "57"
}

// commitOutcome asks PostgreSQL, on another connection, whether
// transaction xid committed: the connection that sent its COMMIT (to the
// server backend pid) failed before the reply came. A transaction still in
// progress is waiting for a COMMIT that never arrived (or is writing it):
// its backend is ended, so that it aborts unless the commit was already
// under way, and the answer is then final. known is false when PostgreSQL
// cannot tell within commitWait (it cannot be reached, or the backend was
// not found, as behind a pooler): the outcome stays unknown.
func (s *Store) commitOutcome(ctx context.Context, xid int64, pid uint32) (committed, known bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitWait)
	defer cancel()
	for ended := false; ; {
		status, err := s.ask(ctx, xid, pid, &ended)
		switch {
		case err == nil && status == "committed":
			return true, true
		case err == nil && status == "aborted":
			return false, true
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ask asks once for transaction xid's status; while it is in progress it
// ends the backend pid that holds it (once: ended records it). Each question
// gets a second of its own: a connection of the pool may be as broken as
// the one that sent the COMMIT.
func (s *Store) ask(ctx context.Context, xid int64, pid uint32, ended *bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var status *string
	if err := s.pool.QueryRow(ctx, `SELECT pg_xact_status($1::bigint::text::xid8)`, xid).Scan(&status); err != nil || status == nil {
		return "", err
	}
	if *status == "in progress" && !*ended {
		// The backend of that transaction, if it is still the one holding
		// it (its 32-bit xid matches), is ended.
		_, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE pid = $1 AND backend_xid::text = ($2::bigint % 4294967296)::text`, int32(pid), xid)
		*ended = err == nil
	}
	return *status, nil
}
