package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/checkin"
)

// checkinKeyLock is the advisory lock under which a first key is made, so
// that instances that start at once make one between them.
const checkinKeyLock = 0x434b4559 // "CKEY"

// CheckinKeys returns the check-in keys that are not retired, newest
// first. When there is none, it stores the one that first makes (an
// instance that starts beside another waits for its key and uses it).
func (s *Store) CheckinKeys(ctx context.Context, first func() (checkin.StoredKey, error)) ([]checkin.StoredKey, error) {
	var out []checkin.StoredKey
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if out, err = readKeys(ctx, tx); err != nil || len(out) > 0 || first == nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(checkinKeyLock)); err != nil {
			return err
		}
		if out, err = readKeys(ctx, tx); err != nil || len(out) > 0 {
			return err
		}
		k, err := first()
		if err != nil {
			return err
		}
		if err := insertKey(ctx, tx, k); err != nil {
			return err
		}
		out = []checkin.StoredKey{k}
		return nil
	})
	return out, err
}

// AddCheckinKey stores a new key, which signs from now on; the keys
// before it keep verifying until they are retired.
func (s *Store) AddCheckinKey(ctx context.Context, k checkin.StoredKey) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return insertKey(ctx, tx, k) })
}

// RetireCheckinKeys retires every key created before the given time but
// the newest: tickets signed with them no longer verify.
func (s *Store) RetireCheckinKeys(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, `UPDATE checkin_key SET retired_at = now()
		WHERE retired_at IS NULL AND created_at < $1
			AND id <> (SELECT max(id) FROM checkin_key WHERE retired_at IS NULL)`, before)
	return tag.RowsAffected(), interpret(err)
}

func insertKey(ctx context.Context, tx pgx.Tx, k checkin.StoredKey) error {
	_, err := tx.Exec(ctx, `INSERT INTO checkin_key (kid, seed, created_at) VALUES ($1, $2, $3)`, k.ID, k.Sealed, k.CreatedAt)
	return err
}

func readKeys(ctx context.Context, tx pgx.Tx) ([]checkin.StoredKey, error) {
	rows, err := tx.Query(ctx, `SELECT kid, seed, created_at FROM checkin_key WHERE retired_at IS NULL ORDER BY id DESC`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (checkin.StoredKey, error) {
		var k checkin.StoredKey
		err := row.Scan(&k.ID, &k.Sealed, &k.CreatedAt)
		return k, err
	})
}
