package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/physiciansnet/capacityd/migrations"
)

// ErrSessionNotKept is returned by Migrate when the connection reaches
// PostgreSQL through a pooler that does not keep one server session per
// client, such as PgBouncer with pool_mode = transaction: the migrations'
// lock lasts a session, and such a pooler would take it on one server
// connection and release it on another, or leave it with a server
// connection another client then gets.
var ErrSessionNotKept = errors.New("the pooler does not keep a server session per client (a transaction pooler, such as PgBouncer with pool_mode = transaction), and the migrations' lock lasts a session")

// ErrSessionUnknown is returned by Migrate when the connection reaches
// PostgreSQL through a pooler and the probe could not see whether it keeps
// one server session per client (see keepsSession).
var ErrSessionUnknown = errors.New("whether the pooler keeps a server session per client could not be told, and the migrations' lock lasts a session")

// Migrate applies the pending migrations, each in its own transaction. A
// PostgreSQL session lock makes concurrent migrators (several instances
// starting at once) wait for each other instead of racing. It returns the
// versions applied. It applies none, and returns an error wrapping
// ErrSessionNotKept or ErrSessionUnknown, through a pooler that does not
// keep a session for its client (see keepsSession).
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	cc := pool.Config().ConnConfig
	if err := keepsSession(ctx, cc.Config.Copy()); errors.Is(err, ErrSessionNotKept) || errors.Is(err, ErrSessionUnknown) {
		return nil, fmt.Errorf("migrate: DATABASE_URL (%s) reaches PostgreSQL through a pooler: %w", net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), err)
	} else if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// sessionProbeRounds and sessionProbeTimeout bound keepsSession's
// behavioural probe.
const (
	sessionProbeRounds  = 3
	sessionProbeTimeout = 10 * time.Second
)

// keepsSession returns nil when a connection made with cfg is one
// PostgreSQL session from connect to close, as the migrations' session
// lock needs, and ErrSessionNotKept or ErrSessionUnknown otherwise.
//
// It first compares the process ID of the cancel key the connection was
// given at startup (BackendKeyData) with pg_backend_pid(). PostgreSQL
// gives its own backend's ID, and a TCP proxy (HAProxy, a port forward, a
// tunnel) passes it through unchanged: equal IDs mean the client speaks
// to its own backend, and nothing more is asked. A pooler that hands
// server connections to several clients cannot pass a backend's key on (a
// cancel request must reach the pooler, which finds the server connection
// running the client's query), so it makes up its own: PgBouncer does in
// every pool mode, and so do other poolers and some cloud proxies that
// keep sessions. Neither comparing ports (a port forward changes them)
// nor asking the pooler (PgBouncer's SHOW commands answer only on its
// admin console) tells the pooling mode, so the probe then watches it:
//
//	A: SELECT pg_backend_pid()  (outside a transaction) → a
//	B: SELECT pg_backend_pid()  → b, a second client
//	A: SELECT pg_backend_pid()  → a again?
//
// repeated sessionProbeRounds times. A pooler that keeps a server
// connection per client (session mode) answers a on A every time and
// never a on B. A transaction pooler gives A's server connection back to
// the pool when each statement ends: B then gets it (PgBouncer reuses the
// connection released last), or A later gets another. Either is
// ErrSessionNotKept. A probe that cannot finish (a session pooler with a
// single server connection makes B wait for A to leave) is
// ErrSessionUnknown: migrations go ahead only when the session was seen
// kept.
func keepsSession(ctx context.Context, cfg *pgconn.Config) error {
	ctx, cancel := context.WithTimeout(ctx, sessionProbeTimeout)
	defer cancel()
	// PgBouncer refuses the session timeouts as startup parameters; the
	// probe's statements are bounded by ctx.
	for _, name := range sessionTimeouts {
		delete(cfg.RuntimeParams, name)
	}
	a, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close(context.WithoutCancel(ctx))
	first, err := backendPID(ctx, a)
	if err != nil {
		return err
	}
	if first == a.PID() {
		return nil
	}
	b, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close(context.WithoutCancel(ctx))
	for range sessionProbeRounds {
		other, err := backendPID(ctx, b)
		if err != nil {
			return probeFailed(ctx, err)
		}
		again, err := backendPID(ctx, a)
		if err != nil {
			return probeFailed(ctx, err)
		}
		if other == first || again != first {
			return ErrSessionNotKept
		}
	}
	return nil
}

// probeFailed is the error of a session probe query that failed: it
// wraps ErrSessionUnknown when the probe ran out of time.
func probeFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (a second connection got no answer within %s)", ErrSessionUnknown, sessionProbeTimeout)
	}
	return err
}

// backendPID returns the process ID of the PostgreSQL backend that runs
// a statement of conn, asked outside a transaction with the simple query
// protocol (no prepared statement).
func backendPID(ctx context.Context, conn *pgconn.PgConn) (uint32, error) {
	results, err := conn.Exec(ctx, `SELECT pg_backend_pid()`).ReadAll()
	if err != nil {
		return 0, err
	}
	if len(results) != 1 || len(results[0].Rows) != 1 {
		return 0, errors.New("SELECT pg_backend_pid(): no row")
	}
	pid, err := strconv.ParseUint(string(results[0].Rows[0][0]), 10, 32)
	return uint32(pid), err
}
