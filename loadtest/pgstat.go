package loadtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// statsFlushWait is how long to wait for other backends' statistics to
// reach the shared counters: PostgreSQL 15 flushes them at most once a
// second while a backend is busy.
const statsFlushWait = 1500 * time.Millisecond

// idleStatsFlushWait is how long an idle backend may keep unflushed
// statistics (PGSTAT_IDLE_INTERVAL is 10 s).
const idleStatsFlushWait = 11 * time.Second

// Monitor reads statistics about the bench database from a connection to
// another database of the same server, so its own queries are not counted.
type Monitor struct {
	conn *pgx.Conn
	db   string
}

// OpenMonitor connects to the postgres database of dbURL's server to
// watch dbURL's database.
func OpenMonitor(ctx context.Context, dbURL string) (*Monitor, error) {
	name, err := databaseName(dbURL)
	if err != nil {
		return nil, err
	}
	admin, err := withDatabase(dbURL, "postgres")
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("loadtest: monitor connection: %w", err)
	}
	return &Monitor{conn: conn, db: name}, nil
}

// Close closes the monitor's connection.
func (m *Monitor) Close(ctx context.Context) { _ = m.conn.Close(ctx) }

// Transactions returns the transactions committed and rolled back in the
// bench database so far, as the statistics system knows them.
func (m *Monitor) Transactions(ctx context.Context) (int64, error) {
	if _, err := m.conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, fmt.Errorf("loadtest: clear stats snapshot: %w", err)
	}
	var n int64
	err := m.conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`, m.db).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("loadtest: read pg_stat_database: %w", err)
	}
	return n, nil
}

// DeadTuples returns n_dead_tup of a table of the bench database. It must
// be asked on a connection to that database (pg_stat_user_tables is per
// database).
func DeadTuples(ctx context.Context, conn *pgx.Conn, table string) (int64, error) {
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, fmt.Errorf("loadtest: clear stats snapshot: %w", err)
	}
	var n int64
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = $1), 0)`, table).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("loadtest: read n_dead_tup of %s: %w", table, err)
	}
	return n, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
