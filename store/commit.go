package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// currentXactSQL returns the id of the transaction it runs in, which it
// assigns, the identity of the server (serverIdentitySQL) and its
// timeline (timelineSQL): asked before COMMIT is sent, they let the
// outcome of a commit whose reply was lost be learnt afterwards (see
// commitOutcome).
const currentXactSQL = `SELECT pg_current_xact_id()::text::bigint, ` + serverIdentitySQL + `, ` + timelineSQL

// timelineSQL names the timeline of the server's write-ahead log (the
// first part of its current segment's name). A standby promoted in a
// failover starts a new one; a server restarted after a crash goes on
// with its own.
const timelineSQL = `substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8)`

// serverIdentitySQL names the running PostgreSQL server: its address, port
// and start time. A standby promoted in a failover, or the same server
// restarted after a crash, has another identity, and there a transaction
// id may be unknown or name another transaction: a commit that did not
// reach it may have left its id free for the next one.
const serverIdentitySQL = `concat_ws(' ', inet_server_addr(), inet_server_port(), pg_postmaster_start_time())`

// noCommitTimeout lifts the statement timeout for the COMMIT that follows
// it. A COMMIT cut by statement_timeout while it waits for the
// synchronous standby is not undone: PostgreSQL answers it as done
// (with a warning) though it is on one server only, and a failover then
// loses it. COMMIT's wait is bounded by the connection's deadline instead
// (sendCommit).
const noCommitTimeout = `SET LOCAL statement_timeout = 0`

// walAfterWritesSQL returns the write-ahead log's insert position: asked
// after a transaction's writes, every record of theirs lies before it.
const walAfterWritesSQL = `SELECT pg_current_wal_insert_lsn()::text`

// commitWait bounds how long commitOutcome keeps asking about a
// transaction that is still committing, or whose server was lost: long
// enough for the standby to be promoted in a failover (docs/deploy.md).
const commitWait = 15 * time.Second

// defaultCommitTimeout bounds COMMIT's answer when the connection pool sets no
// statement timeout.
const defaultCommitTimeout = 10 * time.Second

// commitTimeoutOf returns how long a COMMIT's answer is waited for: the
// pool's statement timeout (runtime parameter statement_timeout, in
// milliseconds).
func commitTimeoutOf(params map[string]string) time.Duration {
	if ms, err := strconv.ParseInt(params["statement_timeout"], 10, 64); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return defaultCommitTimeout
}

// sendCommit sends noCommitTimeout and COMMIT in one round trip on conn,
// waiting for the answer until ctx's deadline or timeout, whichever comes
// first (see withDeadline).
func sendCommit(ctx context.Context, conn *pgx.Conn, timeout time.Duration) error {
	b := &pgx.Batch{}
	b.Queue(noCommitTimeout)
	b.Queue("COMMIT")
	return withDeadline(ctx, conn, timeout, func(ctx context.Context) error { return conn.SendBatch(ctx, b).Close() })
}

// commitTx commits tx without a statement timeout (noCommitTimeout), as
// sendCommit does.
func commitTx(ctx context.Context, tx pgx.Tx, timeout time.Duration) error {
	if _, err := tx.Exec(ctx, noCommitTimeout); err != nil {
		return err
	}
	return withDeadline(ctx, tx.Conn(), timeout, tx.Commit)
}

// withDeadline runs send, which commits on conn, under a deadline of the
// connection itself (ctx's, at most timeout from now) and not under ctx:
// pgx cancels a query whose context ends by asking the server to cancel
// it, and a COMMIT waiting for the synchronous standby then completes on
// the primary alone (see noCommitTimeout). Past the deadline the
// connection fails, the server's wait goes on, and the outcome is in doubt
// (inDoubt). A context already ended sends nothing.
func withDeadline(ctx context.Context, conn *pgx.Conn, timeout time.Duration, send func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc := conn.PgConn().Conn()
	_ = nc.SetDeadline(deadline)
	err := send(context.WithoutCancel(ctx))
	_ = nc.SetDeadline(time.Time{})
	return err
}

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
// server backend pid of the server whose identity is server, see
// serverIdentitySQL) failed before the reply came.
//
// On the same server, a transaction still in progress is waiting for a
// COMMIT that never arrived (or is writing it): its backend is ended, so
// that it aborts unless the commit was already under way, and the answer
// is then final; one whose COMMIT waits for the synchronous standby is
// left to finish.
//
// On another server (a standby promoted since, see outcomeSQL) the
// transaction committed if the new server replayed its commit; it did not
// if the new server's replay stopped before the transaction's writes (wal,
// the log's position after them): what the old server alone had is
// discarded when it rejoins. The old server restarted after a crash (on
// its own timeline, tli) replayed its own log, where a commit may stand
// that never reached the synchronous standby: the server died while the
// commit waited for it. There a commit counts only if the server
// requires no synchronous standby (then its log is all there is); else
// the outcome is the promoted standby's, or unknown.
//
// known is false when PostgreSQL cannot tell within commitWait (no
// writable server can be reached, or the backend was not found, as behind
// a pooler): the outcome stays unknown.
func (s *Store) commitOutcome(ctx context.Context, xid int64, server, tli, wal string, pid uint32) (committed, known bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitWait)
	defer cancel()
	for ended := false; ; {
		status, err := s.ask(ctx, xid, server, tli, wal, pid, &ended)
		switch {
		case err == nil && status == "committed":
			return true, true
		case err == nil && status == "aborted":
			return false, true
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// outcomeSQL returns the identity of the server it runs on and the status
// of transaction $1 there, NULL when the server cannot tell. On the
// transaction's own server ($2) the id is its own. On another one, a
// promoted standby, pg_last_wal_replay_lsn() is where its replay of the
// old server's log ended: if that is past the transaction's writes ($3),
// they were replayed, so the id is one the new server knew before it took
// writes (it never gives it to another transaction) and its status is
// the transaction's; if it is before them, nothing of the transaction
// reached it. A server that never replayed a log (NULL) cannot tell, nor
// can one asked without the position ($3 ”; NULLIF keeps a plan that
// folds the cast from failing on it). The transaction's own server
// restarted after a crash is on the transaction's timeline ($4): what it
// replayed is its own log, whose commit is final only if it requires no
// synchronous standby; else it cannot tell.
const outcomeSQL = `SELECT id, CASE
		WHEN id = $2 THEN pg_xact_status($1::bigint::text::xid8)
		WHEN $3 = '' OR pg_last_wal_replay_lsn() IS NULL THEN NULL
		WHEN pg_last_wal_replay_lsn() < NULLIF($3, '')::pg_lsn THEN 'aborted'
		WHEN ` + timelineSQL + ` = $4 AND current_setting('synchronous_standby_names') <> ''
			AND pg_xact_status($1::bigint::text::xid8) = 'committed' THEN NULL
		ELSE pg_xact_status($1::bigint::text::xid8) END
	FROM (SELECT ` + serverIdentitySQL + ` AS id) AS server`

// ask asks once for transaction xid's status (see outcomeSQL); while it
// is in progress on its own server, and not waiting for the synchronous
// standby, it ends the backend pid that holds it (once: ended records it).
// Each question gets a second of its own: a pooled connection may be
// as broken as the one that sent the COMMIT.
func (s *Store) ask(ctx context.Context, xid int64, server, tli, wal string, pid uint32, ended *bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var reached string
	var status *string
	if err := s.connPool.QueryRow(ctx, outcomeSQL, xid, server, wal, tli).Scan(&reached, &status); err != nil || status == nil {
		return "", err
	}
	if reached != server {
		return *status, nil
	}
	if *status == "in progress" && !*ended {
		// The backend of that transaction, if it is still the one holding
		// it (its 32-bit xid matches) and not waiting for the standby, is
		// ended: a COMMIT waiting for the standby is already written here,
		// and ending its wait would make it a success on one server only.
		_, err := s.connPool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE pid = $1 AND backend_xid::text = ($2::bigint % 4294967296)::text
			AND wait_event IS DISTINCT FROM 'SyncRep'`, int32(pid), xid)
		*ended = err == nil
	}
	return *status, nil
}
