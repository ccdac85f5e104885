package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// InsertNoteThenCommit runs one pipelined transaction that inserts a
// note_stats row for id, calls between once the insert was answered, then
// sends COMMIT, waiting for its answer at most commitWithin: what
// pipelined answers, for tests that break the link around the COMMIT.
func (s *Store) InsertNoteThenCommit(ctx context.Context, id string, between func(), commitWithin time.Duration) error {
	return s.pipelined(ctx, func(tx *txn) error {
		b := &pgx.Batch{}
		tx.begin(b, s.timeouts)
		b.Queue(`INSERT INTO note_stats (note_id, views) VALUES ($1, 1) ON CONFLICT (note_id) DO UPDATE SET views = note_stats.views + 1`, id)
		if err := tx.conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		between()
		cctx, cancel := context.WithTimeout(ctx, commitWithin)
		defer cancel()
		return tx.commit(cctx, &pgx.Batch{})
	})
}

// InsertNoteWithCommit runs one pipelined transaction that inserts a note
// in the batch that commits it, as a change transaction sends its writes:
// the log's position after them is known when COMMIT is sent.
func (s *Store) InsertNoteWithCommit(ctx context.Context, id string, commitWithin time.Duration) error {
	return s.pipelined(ctx, func(tx *txn) error {
		b := &pgx.Batch{}
		tx.begin(b, s.timeouts)
		if err := tx.conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		w := &pgx.Batch{}
		w.Queue(`INSERT INTO note_stats (note_id, views) VALUES ($1, 1)`, id)
		cctx, cancel := context.WithTimeout(ctx, commitWithin)
		defer cancel()
		return tx.commit(cctx, w)
	})
}

// GenericPlans is the statement after which a transaction's statements run
// with their generic plans.
const GenericPlans = genericPlans

// GetRegistrationsPlannedEachTime is GetRegistrations as PostgreSQL's
// default runs it: its statement planned again at every execution.
func (s *Store) GetRegistrationsPlannedEachTime(ctx context.Context, ids []string) ([]registration.Registration, error) {
	return s.collect(ctx, getRegistrationsSQL, ids)
}

// SyncSQL is the ticket sync's statements that read the list's records.
var SyncSQL = []string{syncFullSQL, syncChangedSQL}
