package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// searchActivitiesSQL reads a page of the activities whose title matches
// the ILIKE pattern $2, before the row $1, newest first: a backward walk
// of the primary key that filters titles and stops at the page's end
// ($3 rows), the same keyset as ListActivities. The seat columns are read
// only for the rows of the page.
var searchActivitiesSQL = `SELECT ` + activityColumns + ` FROM activity a
	WHERE a.id < $1 AND a.title ILIKE $2 ESCAPE '\' ORDER BY a.id DESC LIMIT $3`

// SearchActivities returns up to limit activities whose title contains
// query, ignoring case, created before the one of public id cursor ("":
// from the newest), newest first. The characters of LIKE patterns (%, _
// and \) in query are matched as themselves.
func (s *Store) SearchActivities(ctx context.Context, query, cursor string, limit int) ([]registration.Activity, error) {
	before, err := s.activityAfter(ctx, cursor)
	if err != nil {
		return nil, err
	}
	if before == 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.Query(ctx, searchActivitiesSQL, before, "%"+likeEscaper.Replace(query)+"%", limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Activity, error) { return scanActivity(row) })
	return out, interpret(err)
}

// likeEscaper escapes the characters that LIKE reads as a pattern's.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
