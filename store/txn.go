package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// txn is a transaction sent in pipelined batches: its first batch begins
// it (and learns its id), its last commits it, so that neither BEGIN nor
// COMMIT costs a round trip of its own.
type txn struct {
	conn *pgx.Conn
	xid  int64
	// server names the PostgreSQL server the transaction runs on, and tli
	// its timeline (see currentXactSQL): a transaction id means nothing on
	// another server, and a log on the same timeline may hold a commit no
	// standby has.
	server, tli string
	// walAfterWrites is the write-ahead log's insert position once the
	// transaction's writes were made, before COMMIT.
	walAfterWrites string
	committing     bool
	// commitTimeout bounds the wait for COMMIT's answer (see commit).
	commitTimeout time.Duration
}

// begin queues BEGIN, the transaction's own timeouts (behind a pooler the
// session's may be missing) and the query of its id, first in b.
func (t *txn) begin(b *pgx.Batch, timeouts []string) {
	b.Queue("BEGIN")
	for _, q := range timeouts {
		b.Queue(q)
	}
	b.Queue(currentXactSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&t.xid, &t.server, &t.tli) })
}

// commit sends the writes of b, if any, with the query of the position
// they reached in the write-ahead log (walAfterWritesSQL) last, then
// COMMIT (see sendCommit): a round trip more than COMMIT at the end of b,
// so that the outcome of a COMMIT whose answer is lost can be learnt from
// a standby promoted meanwhile (see commitOutcome). With b empty (writes
// already answered), COMMIT alone: its outcome is then learnt from its own
// server only.
func (t *txn) commit(ctx context.Context, b *pgx.Batch) error {
	if b.Len() > 0 {
		b.Queue(walAfterWritesSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&t.walAfterWrites) })
		if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	t.committing = true
	return sendCommit(ctx, t.conn, t.commitTimeout)
}

// pipelined runs f on a pooled connection for one txn. If f fails
// with the transaction still open, it is rolled back; a connection left in
// an unknown state is closed rather than returned to the connection pool. If the
// connection failed while the COMMIT was on its way, the transaction's
// outcome is asked for on another connection (commitOutcome): a commit
// that happened is a success, so that an error always means that nothing
// was written (unless PostgreSQL cannot even be asked).
func (s *Store) pipelined(ctx context.Context, f func(t *txn) error) error {
	pc, err := s.connPool.Acquire(ctx)
	if err != nil {
		return interpret(err)
	}
	defer pc.Release()
	t := &txn{conn: pc.Conn(), commitTimeout: s.commitTimeout}
	pid := t.conn.PgConn().PID()
	err = f(t)
	if err == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if t.conn.PgConn().TxStatus() != 'I' {
		if _, rerr := t.conn.Exec(rctx, "ROLLBACK"); rerr != nil {
			_ = t.conn.Close(rctx)
		}
	}
	if t.committing && t.xid != 0 && inDoubt(err) {
		if committed, known := s.commitOutcome(ctx, t.xid, t.server, t.tli, t.walAfterWrites, pid); known && committed {
			return nil
		}
	}
	return interpret(err)
}

// genericPlans makes every prepared statement after it in its transaction
// (an explicit one, or the implicit one of a pipelined batch) run with its
// generic plan, planned once per connection. PostgreSQL's default plans a
// statement again at each execution until its generic plan looks no
// dearer, and a statement over a list of ids never does (its custom plan
// knows the list's length): planning cost more than running these. Only
// statements whose generic plan is tested (plan_test.go) run under it.
//
// It also turns JIT compilation off for them. A generic plan over a list
// of ids is costed for a list of unknown length; over a large registration
// table its estimate passes jit_above_cost, and PostgreSQL then compiles
// the statement at every execution: on the bench's million rows a pooled
// full check of 20 activities took 968 ms, 820 of them compiling, and
// takes 11 ms without. These statements read a few index ranges each;
// compiling them never pays.
//
// And it turns sequential scans off for them (enable_seqscan costs one
// without forbidding it where no index serves). A generic plan is planned
// once and kept for the connection's life, with the sizes of the tables
// at that moment: the check-in tables are empty when a door opens and hold
// thousands of rows a minute later, long before autovacuum analyzes them,
// and a plan made while they were small read them whole at every scan of
// the rush (a registration read whose checked_in became a hashed subplan
// over checkin_record: 11 to 15 ms a batch at 8,000 check-ins). Every
// statement here reads a few index ranges (plan_test.go).
const genericPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true),
	set_config('enable_seqscan', 'off', true)`

// readGeneric sends the reads queue adds in one round trip, with their
// generic plans (genericPlans), in the batch's implicit transaction.
func (s *Store) readGeneric(ctx context.Context, queue func(b *pgx.Batch)) error {
	b := &pgx.Batch{}
	b.Queue(genericPlans)
	queue(b)
	return interpret(s.db.SendBatch(ctx, b).Close())
}
