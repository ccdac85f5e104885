package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/note"
)

// addRegisteredNoteStatsSQL is addNoteStatsSQL for notes that must exist:
// it adds to a note's row and creates none.
const addRegisteredNoteStatsSQL = `
	UPDATE note_stats SET
		views = views + $2,
		waters = waters + $3,
		updated_at = now()
	WHERE note_id = $1
	RETURNING views, waters`

// AddRegisteredNoteStats is AddNoteStats for a note that must already have
// its row: a note without one gets not_found, and nothing is written.
func (s *Store) AddRegisteredNoteStats(ctx context.Context, noteID string, views, waters int64) (note.Stats, error) {
	st, found, err := s.addNoteStats(ctx, addRegisteredNoteStatsSQL, noteID, views, waters)
	if err != nil {
		return note.Stats{}, err
	}
	if !found {
		return note.Stats{}, note.NotRegistered(noteID)
	}
	return st, nil
}

// RegisterNote creates the row of a note with zero counters, unless it has
// one, and returns its counters; created tells which.
func (s *Store) RegisterNote(ctx context.Context, noteID string) (st note.Stats, created bool, err error) {
	st = note.Stats{NoteID: noteID}
	err = s.db.QueryRow(ctx, `
		INSERT INTO note_stats (note_id) VALUES ($1)
		ON CONFLICT (note_id) DO NOTHING
		RETURNING views, waters`, noteID).Scan(&st.Views, &st.Waters)
	if err == nil {
		return st, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return note.Stats{}, false, interpret(err)
	}
	// The row existed (or another registration's insert committed while
	// this one waited): read it in a statement of its own, which sees it.
	err = s.db.QueryRow(ctx, `SELECT views, waters FROM note_stats WHERE note_id = $1`, noteID).Scan(&st.Views, &st.Waters)
	if errors.Is(err, pgx.ErrNoRows) {
		return note.Stats{}, false, capacityd.Unavailable(err, "the note's row could not be read back")
	}
	if err != nil {
		return note.Stats{}, false, interpret(err)
	}
	return st, false, nil
}
