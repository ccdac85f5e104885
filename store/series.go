package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// seriesUserLockSQL takes, after the activity and pool locks, a
// transaction-level advisory lock on each (series, user) pair of the
// signups (and re-admissions) on activities in a series: $1 and $2 are
// the activities and users of the signups, $3 the registrations
// re-admitted. The locks are taken in key order (one global order, after
// every pool and activity lock), keyed by a 64-bit hash of the pair; a
// collision of two pairs only makes them wait for each other. The one-key
// form of pg_advisory_xact_lock never meets the two-key form of the
// activity and pool locks.
const seriesUserLockSQL = `SELECT count(pg_advisory_xact_lock(k.key)) FROM (
		SELECT DISTINCT hashtextextended(a.series_id || ':' || p.uid, 0) AS key
		FROM (SELECT * FROM unnest($1::bigint[], $2::text[])
			UNION SELECT activity_id, user_id FROM registration WHERE public_id = ANY($3)) AS p(aid, uid)
		JOIN activity a ON a.id = p.aid
		WHERE a.series_id IS NOT NULL
		ORDER BY 1) AS k`

// seriesHeldSQL reads, under the (series, user) locks, the limits of the
// series of the signups' activities (and of the series activity commands
// name, $4) and each such user's active registrations in the series.
const seriesHeldSQL = `WITH p AS (
		SELECT DISTINCT a.series_id, p.uid
		FROM (SELECT * FROM unnest($1::bigint[], $2::text[])
			UNION SELECT activity_id, user_id FROM registration WHERE public_id = ANY($3)) AS p(aid, uid)
		JOIN activity a ON a.id = p.aid
		WHERE a.series_id IS NOT NULL)
	SELECT s.public_id, s.max_per_user, coalesce(h.uid, ''), coalesce(h.ids, '{}')
	FROM series s
	LEFT JOIN LATERAL (
		SELECT p.uid, array_agg(r.public_id ORDER BY r.public_id) AS ids
		FROM p JOIN activity a ON a.series_id = p.series_id
		JOIN registration r ON r.activity_id = a.id AND r.user_id = p.uid AND r.status IN ` + active + `
		WHERE p.series_id = s.id
		GROUP BY p.uid) h ON true
	WHERE s.id IN (SELECT series_id FROM p) OR s.public_id = ANY($4)`

const seriesColumns = `x.id, x.public_id, x.title, x.max_per_user, x.created_at, x.updated_at`

func scanSeries(row pgx.Row) (registration.Series, error) {
	var x registration.Series
	err := row.Scan(&x.Seq, &x.ID, &x.Title, &x.MaxPerUser, &x.CreatedAt, &x.UpdatedAt)
	x.CreatedAt, x.UpdatedAt = x.CreatedAt.UTC(), x.UpdatedAt.UTC()
	return x, err
}

// CreateSeries inserts a series with public id id.
func (s *Store) CreateSeries(ctx context.Context, id string, in registration.NewSeries) (registration.Series, error) {
	x, err := scanSeries(s.db.QueryRow(ctx, `INSERT INTO series AS x (public_id, title, max_per_user) VALUES ($1, $2, $3)
		RETURNING `+seriesColumns, id, in.Title, in.MaxPerUser))
	return x, interpret(err)
}

// GetSeries returns a series.
func (s *Store) GetSeries(ctx context.Context, id string) (registration.Series, error) {
	x, err := scanSeries(s.db.QueryRow(ctx, `SELECT `+seriesColumns+` FROM series x WHERE x.public_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return x, registration.SeriesNotFound(id)
	}
	return x, interpret(err)
}

// ListSeries returns up to limit series created before the one of public
// id cursor ("": from the newest), newest first.
func (s *Store) ListSeries(ctx context.Context, cursor string, limit int) ([]registration.Series, error) {
	before, err := s.cursorRow(ctx, cursor, `SELECT id FROM series WHERE public_id = $1`)
	if err != nil {
		return nil, err
	}
	if before == 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.Query(ctx, `SELECT `+seriesColumns+` FROM series x WHERE x.id < $1 ORDER BY x.id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Series, error) { return scanSeries(row) })
	return out, interpret(err)
}

// UpdateSeries changes a series: a lower limit removes nobody (it refuses
// the signups that follow), so no change transaction is needed.
func (s *Store) UpdateSeries(ctx context.Context, id string, p registration.SeriesPatch) (registration.Series, error) {
	x, err := scanSeries(s.db.QueryRow(ctx, `UPDATE series x SET title = coalesce($2, x.title),
			max_per_user = coalesce($3, x.max_per_user), updated_at = now()
		WHERE x.public_id = $1 RETURNING `+seriesColumns, id, p.Title, p.MaxPerUser))
	if errors.Is(err, pgx.ErrNoRows) {
		return x, registration.SeriesNotFound(id)
	}
	return x, interpret(err)
}

// batchSeries adds to b the read of the series the transaction needs
// (seriesHeldSQL), into rd.series.
func batchSeries(b *pgx.Batch, aids []int64, users, readmitted, named []string, rd *txnRead) {
	b.Queue(seriesHeldSQL, aids, users, readmitted, named).Query(func(rows pgx.Rows) error {
		byID := map[string]int{}
		var id, user string
		var max int
		var ids []string
		_, err := pgx.ForEachRow(rows, []any{&id, &max, &user, &ids}, func() error {
			k, ok := byID[id]
			if !ok {
				k = len(rd.series)
				byID[id] = k
				rd.series = append(rd.series, registration.SeriesState{ID: id, MaxPerUser: max, Held: map[string][]string{}})
			}
			if user != "" {
				rd.series[k].Held[user] = ids
			}
			ids = nil
			return nil
		})
		return err
	})
}
