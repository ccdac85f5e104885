package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// SeriesActivities returns up to limit activities of the series of public
// id seriesID created before the one of public id cursor ("": from the
// newest), newest first; none for a series that does not exist or has no
// activity.
func (s *Store) SeriesActivities(ctx context.Context, seriesID, cursor string, limit int) ([]registration.Activity, error) {
	before, err := s.activityAfter(ctx, cursor)
	if err != nil {
		return nil, err
	}
	if before == 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.Query(ctx, `SELECT `+activityColumns+` FROM activity a
		WHERE a.series_id = (SELECT x.id FROM series x WHERE x.public_id = $1) AND a.id < $2
		ORDER BY a.id DESC LIMIT $3`, seriesID, before, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Activity, error) { return scanActivity(row) })
	return out, interpret(err)
}
