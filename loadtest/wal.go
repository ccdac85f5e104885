package loadtest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// walPositionSQL reads the server's WAL insert position as a byte count:
// the WAL written between two readings is their difference, over every
// database of the server and its background work (autovacuum, checkpoint
// records) as well as the load's.
const walPositionSQL = `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`

// WALFunc returns PostgreSQL's WAL insert position, in bytes.
type WALFunc func(ctx context.Context) (int64, error)

// rowQuerier is what reads the WAL position: a connection or a pool.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// walPosition reads the WAL insert position on q.
func walPosition(ctx context.Context, q rowQuerier) (int64, error) {
	var pos int64
	if err := q.QueryRow(ctx, walPositionSQL).Scan(&pos); err != nil {
		return 0, fmt.Errorf("loadtest: read the WAL position: %w", err)
	}
	return pos, nil
}

// WALPosition returns the bench server's WAL insert position, in bytes.
func (m *Monitor) WALPosition(ctx context.Context) (int64, error) {
	return walPosition(ctx, m.conn)
}

// walSampleTimeout bounds one reading of the WAL position.
const walSampleTimeout = 5 * time.Second

// sampleWAL reads the WAL position with f, if any; ok is false when there
// is none or it could not be read (the load is then reported without it).
func sampleWAL(ctx context.Context, f WALFunc) (pos int64, ok bool) {
	if f == nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), walSampleTimeout)
	defer cancel()
	pos, err := f(ctx)
	return pos, err == nil
}

// walPerOp returns the WAL bytes per operation, or nil when the WAL was not
// measured or nothing succeeded.
func walPerOp(bytes *int64, ops int64) *float64 {
	if bytes == nil || ops <= 0 {
		return nil
	}
	return Num(round(float64(*bytes)/float64(ops), 0))
}
