package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/note"
)

// addNoteStatsSQL adds to a note's counters inside the database, under the
// row lock, and returns the new numbers in the same round trip: never
// load–mutate–save. The first increment of a note creates its row.
const addNoteStatsSQL = `
	INSERT INTO note_stats (note_id, views, waters) VALUES ($1, $2, $3)
	ON CONFLICT (note_id) DO UPDATE SET
		views = note_stats.views + EXCLUDED.views,
		waters = note_stats.waters + EXCLUDED.waters,
		updated_at = now()
	RETURNING views, waters`

// AddNoteStats adds views and waters to a note in one statement and returns
// its counters right after.
func (s *Store) AddNoteStats(ctx context.Context, noteID string, views, waters int64) (note.Stats, error) {
	st := note.Stats{NoteID: noteID}
	err := s.db.QueryRow(ctx, addNoteStatsSQL, noteID, views, waters).Scan(&st.Views, &st.Waters)
	if err != nil {
		return note.Stats{}, interpret(err)
	}
	return st, nil
}

// NoteStats returns a note's counters, zero for a note never seen.
func (s *Store) NoteStats(ctx context.Context, noteID string) (note.Stats, error) {
	st := note.Stats{NoteID: noteID}
	err := s.db.QueryRow(ctx, `SELECT views, waters FROM note_stats WHERE note_id = $1`, noteID).Scan(&st.Views, &st.Waters)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return note.Stats{}, interpret(err)
	}
	return st, nil
}
