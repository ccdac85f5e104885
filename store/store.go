// Package store is the authority: it implements the domain's storage
// interfaces on PostgreSQL with pgx v5, and it is the only package that sees
// pgx and pgconn. Every error leaves it translated into a *capacityd.Error
// (see interpret).
package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// DBTX is what the queries need: a connection pool, a connection or a
// transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Store implements registration.Store, note.Store and webhook.Store.
type Store struct {
	db DBTX
	// connPool is set when db is the connection pool; transactions start
	// from it.
	connPool *pgxpool.Pool

	idMu sync.RWMutex
	ids  map[string]int64 // activity and pool public id → internal id (immutable)

	cacheMu   sync.Mutex
	cache     map[int64]seatCache // activity internal id → counts at a seq
	poolCache map[int64]poolCache // pool internal id → taken at a seq

	// members guesses the pools of activities and the activities of
	// pools, to choose a change transaction's locks.
	members *membership

	// timeouts set the session timeouts of the connection pool's
	// configuration for one transaction (SET LOCAL ...); begin starts
	// every transaction with them, in the same round trip.
	timeouts []string
	begin    pgx.TxOptions
	// commitTimeout bounds the wait for a COMMIT's answer (see
	// sendCommit).
	commitTimeout time.Duration
}

// New returns a Store on a connection pool.
func New(connPool *pgxpool.Pool) *Store {
	timeouts := localTimeouts(connPool.Config().ConnConfig.RuntimeParams)
	return &Store{
		db: connPool, connPool: connPool, ids: make(map[string]int64), cache: make(map[int64]seatCache),
		poolCache: make(map[int64]poolCache), members: newMembership(),
		timeouts: timeouts, begin: pgx.TxOptions{BeginQuery: strings.Join(append([]string{"BEGIN"}, timeouts...), "; ")},
		commitTimeout: commitTimeoutOf(connPool.Config().ConnConfig.RuntimeParams),
	}
}

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error {
	return interpret(s.connPool.Ping(ctx))
}

// admissionLockNamespace is the first key of every admission advisory lock:
// "CAPA" in ASCII.
const admissionLockNamespace = 0x43415041

// LockActivity takes, in tx, the lock under which every change of an
// activity's registrations is made (see Apply), by the activity's internal
// id. A transaction that writes an activity's rows directly (a repair, a
// benchmark's reset) takes it first, so that it waits for the change
// transactions in flight and they wait for it, instead of racing them. It
// is held until tx ends.
func LockActivity(ctx context.Context, tx pgx.Tx, activityID int64) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, int32(admissionLockNamespace), int32(activityID))
	return err
}

// admissionLockTimeout bounds the wait for an activity's admission lock.
const admissionLockTimeout = "3s"

// inTx runs f in a transaction and commits it, rolling back on any error.
// The transaction sets its own timeouts: through a transaction pooler the
// session's may be missing.
func (s *Store) inTx(ctx context.Context, f func(tx pgx.Tx) error) error {
	tx, err := s.connPool.BeginTx(ctx, s.begin)
	if err != nil {
		return interpret(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(tx); err != nil {
		return interpret(err)
	}
	return interpret(commitTx(ctx, tx, s.commitTimeout))
}

// interpret translates a pgx error into a *capacityd.Error, once, at the
// store edge. Errors that already are domain errors pass through.
func interpret(err error) error {
	if err == nil {
		return nil
	}
	var ce *capacityd.Error
	if errors.As(err, &ce) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "55P03": // lock_not_available
			return capacityd.Unavailable(err, "the activity's admission lock was not had within %s", admissionLockTimeout)
		case pgErr.Code == "57014": // query_canceled: statement timeout
			return capacityd.Unavailable(err, "the database did not answer in time")
		case pgErr.Code == "23514", pgErr.Code == "22001", pgErr.Code == "22P02", pgErr.Code == "22003",
			pgErr.Code == "22021", pgErr.Code == "22P05": // NUL or untranslatable characters in text
			return &capacityd.Error{Code: capacityd.EInvalid, Message: "a value is out of range", Err: err}
		case pgErr.Code == "25006": // read_only_sql_transaction: a standby, or a primary being demoted
			return capacityd.Unavailable(err, "the database has no writable primary")
		case pgErr.Code == "40001", pgErr.Code == "40P01",
			pgErr.Code[:2] == "08", pgErr.Code[:2] == "53", pgErr.Code[:2] == "57":
			return capacityd.Unavailable(err, "the database is unavailable")
		}
		return &capacityd.Error{Code: capacityd.EInternal, Message: "database error", Err: err}
	}
	// Anything else from the driver (dial failures, broken connections,
	// context deadlines) means the database could not be reached.
	return capacityd.Unavailable(err, "the database is unavailable")
}

// activityID returns the internal id of an activity, from memory after the
// first lookup: ids never change and activities are never deleted.
func (s *Store) activityID(ctx context.Context, publicID string) (int64, error) {
	ids, err := s.activityIDs(ctx, []string{publicID})
	if err != nil {
		return 0, err
	}
	id, ok := ids[publicID]
	if !ok {
		return 0, registration.ActivityNotFound(publicID)
	}
	return id, nil
}

// activityIDs returns the internal ids of the activities that exist among
// publicIDs, from memory after the first lookup (ids never change and
// activities are never deleted), looking up the others in one query.
func (s *Store) activityIDs(ctx context.Context, publicIDs []string) (map[string]int64, error) {
	return s.internalIDs(ctx, `SELECT public_id, id FROM activity WHERE public_id = ANY($1)`, publicIDs)
}

// poolIDs returns the internal ids of the pools that exist among
// publicIDs, as activityIDs does for activities.
func (s *Store) poolIDs(ctx context.Context, publicIDs []string) (map[string]int64, error) {
	return s.internalIDs(ctx, `SELECT public_id, id FROM pool WHERE public_id = ANY($1)`, publicIDs)
}

// internalIDs returns the internal ids of publicIDs, from memory after the
// first lookup, looking up the others with q (which selects public_id, id
// for the public ids $1). Activity, pool and series public ids never
// collide (their prefixes differ), so they share the memory.
func (s *Store) internalIDs(ctx context.Context, q string, publicIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(publicIDs))
	var missing []string
	s.idMu.RLock()
	for _, p := range publicIDs {
		if id, ok := s.ids[p]; ok {
			out[p] = id
		} else {
			missing = append(missing, p)
		}
	}
	s.idMu.RUnlock()
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, q, missing)
	if err != nil {
		return nil, interpret(err)
	}
	var p string
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&p, &id}, func() error {
		out[p] = id
		return nil
	})
	if err != nil {
		return nil, interpret(err)
	}
	s.idMu.Lock()
	for _, p := range missing {
		if id, ok := out[p]; ok {
			s.ids[p] = id
		}
	}
	s.idMu.Unlock()
	return out, nil
}
