package store

import (
	"context"
	"errors"
	"time"

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

// noteUpsertBackstop bounds an upsert on the client side only in case the
// connection hangs; it is far longer than the session's statement_timeout,
// which is what normally ends a slow upsert.
const noteUpsertBackstop = time.Minute

// AddNoteStats adds views and waters to a note in one statement and returns
// its counters right after: the statement (with BEGIN) in one round trip,
// COMMIT in a second, so that the transaction's id is known before the
// commit is sent and a commit whose reply was lost is not taken for a
// failure (see pipelined).
//
// ctx bounds the wait for a connection, when nothing has been sent yet.
// The statement itself is ended by PostgreSQL's statement_timeout, never by
// ctx: a statement cancelled from the client side may still commit after
// the client gave up on it, and an increment reported as failed must have
// counted nothing.
func (s *Store) AddNoteStats(ctx context.Context, noteID string, views, waters int64) (note.Stats, error) {
	st, _, err := s.addNoteStats(ctx, addNoteStatsSQL, noteID, views, waters)
	return st, err
}

// addNoteStats runs query, an increment of a note's counters returning
// views and waters, as AddNoteStats describes; found is false when it
// returned no row.
func (s *Store) addNoteStats(ctx context.Context, query, noteID string, views, waters int64) (st note.Stats, found bool, err error) {
	st = note.Stats{NoteID: noteID}
	err = s.pipelined(ctx, func(t *txn) error {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noteUpsertBackstop)
		defer cancel()
		b := &pgx.Batch{}
		t.begin(b, s.timeouts)
		b.Queue(query, noteID, views, waters).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&st.Views, &st.Waters)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
		if err := t.conn.SendBatch(qctx, b).Close(); err != nil {
			return err
		}
		return t.commit(qctx, &pgx.Batch{})
	})
	if err != nil {
		return note.Stats{}, false, err
	}
	return st, found, nil
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
