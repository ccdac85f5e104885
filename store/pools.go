package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// Capacity pools: a pool's taken is the seats of the occupying
// registrations of its activities, summed over each activity's part of
// registration_occupying_idx (index-only).

// poolTakenSQL is the authority's taken of the pool of internal id
// poolExpr.
func poolTakenSQL(poolExpr string) string {
	// A scalar subquery per activity of the pool: always a lookup of that
	// activity's part of registration_occupying_idx, which the planner
	// cannot turn into a join over the whole table.
	return `(SELECT coalesce(sum((SELECT coalesce(sum(r.seats), 0) FROM registration r
			WHERE r.activity_id = m.activity_id AND r.status IN ` + occupying + `)), 0)
		FROM activity_pool m WHERE m.pool_id = ` + poolExpr + `)`
}

const poolColumns = `p.id, p.public_id, p.title, p.capacity, p.created_at, p.updated_at,
	coalesce((SELECT array_agg(a.public_id ORDER BY a.public_id) FROM activity_pool m JOIN activity a ON a.id = m.activity_id
		WHERE m.pool_id = p.id), '{}')`

// poolSelect selects pools with their authoritative taken.
var poolSelect = `SELECT ` + poolColumns + `, ` + poolTakenSQL("p.id") + `, ` + poolReservedSQL("p.id") + ` FROM pool p`

func scanPool(row pgx.Row) (registration.Pool, error) {
	var p registration.Pool
	var taken, reserved int64
	err := row.Scan(&p.Seq, &p.ID, &p.Title, &p.Capacity, &p.CreatedAt, &p.UpdatedAt, &p.Activities, &taken, &reserved)
	p.Taken, p.Reserved = int(taken), int(reserved)
	p.Remaining = p.SeatRoom().Remaining()
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, err
}

// CreatePool inserts a pool with public id id.
func (s *Store) CreatePool(ctx context.Context, id string, in registration.NewPool) (registration.Pool, error) {
	row := s.db.QueryRow(ctx, `INSERT INTO pool AS p (public_id, title, capacity) VALUES ($1, $2, $3)
		RETURNING `+poolColumns+`, 0, 0`, id, in.Title, in.Capacity)
	p, err := scanPool(row)
	return p, interpret(err)
}

// GetPool returns a pool with its authoritative taken.
func (s *Store) GetPool(ctx context.Context, id string) (registration.Pool, error) {
	p, err := scanPool(s.db.QueryRow(ctx, poolSelect+` WHERE p.public_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return p, registration.PoolNotFound(id)
	}
	return p, interpret(err)
}

// ListPools returns up to limit pools created before the one of public id
// cursor ("": from the newest), newest first.
func (s *Store) ListPools(ctx context.Context, cursor string, limit int) ([]registration.Pool, error) {
	before, err := s.cursorRow(ctx, cursor, `SELECT id FROM pool WHERE public_id = $1`)
	if err != nil {
		return nil, err
	}
	if before == 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.Query(ctx, poolSelect+` WHERE p.id < $1 ORDER BY p.id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Pool, error) { return scanPool(row) })
	return out, interpret(err)
}

// poolStateColumns are a pool's seat state, of the pool p (all NULL, taken
// 0 and activities empty when p is the NULL side of an outer join): scan
// them with nullablePoolState.
var poolStateColumns = `p.public_id, p.capacity, p.last_seq, p.updated_at,
	coalesce((SELECT array_agg(a.public_id ORDER BY a.public_id) FROM activity_pool m JOIN activity a ON a.id = m.activity_id
		WHERE m.pool_id = p.id), '{}'), ` + poolTakenSQL("p.id") + `, ` + poolReservedSQL("p.id")

// nullablePoolState scans poolStateColumns.
type nullablePoolState struct {
	id         *string
	capacity   *int
	lastSeq    *int64
	updatedAt  *time.Time
	activities []string
	taken      int64
	reserved   int64
}

func (n *nullablePoolState) targets() []any {
	return []any{&n.id, &n.capacity, &n.lastSeq, &n.updatedAt, &n.activities, &n.taken, &n.reserved}
}

// state returns the scanned state; ok is false for the NULL side of an
// outer join.
func (n *nullablePoolState) state() (registration.PoolSeatState, bool) {
	if n.id == nil || n.capacity == nil || n.lastSeq == nil || n.updatedAt == nil {
		return registration.PoolSeatState{}, false
	}
	return registration.PoolSeatState{PoolID: *n.id, Capacity: *n.capacity, Taken: int(n.taken), Reserved: int(n.reserved), LastSeq: *n.lastSeq,
		UpdatedAt: n.updatedAt.UTC(), Activities: n.activities}, true
}

// PoolSeatState returns a pool's seat state, read in one snapshot: its
// capacity and updated_at, its taken (the seats of the occupying
// registrations of its activities), its last seq and its activities; or a
// not_found error.
func (s *Store) PoolSeatState(ctx context.Context, poolID string) (registration.PoolSeatState, error) {
	var n nullablePoolState
	err := s.db.QueryRow(ctx, `SELECT `+poolStateColumns+` FROM pool p WHERE p.public_id = $1`, poolID).Scan(n.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return registration.PoolSeatState{}, registration.PoolNotFound(poolID)
	}
	if err != nil {
		return registration.PoolSeatState{}, interpret(err)
	}
	st, _ := n.state()
	return st, nil
}
