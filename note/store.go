package note

import "context"

// Store is what the note domain needs from the authority (PostgreSQL).
// Expected failures are *capacityd.Error values; a database that cannot be
// reached or does not answer in time gives unavailable.
type Store interface {
	// AddNoteStats adds views and waters to the counters of noteID in one
	// atomic statement, creating the note on its first increment, and
	// returns the counters right after that addition. When it fails,
	// nothing was added (short of a connection lost during the commit
	// itself, which no client can tell from a failure). ctx bounds the
	// wait for a connection only: once sent, the statement is ended by
	// the database's own timeout, never cancelled from the client side,
	// which could leave it committed but reported as failed.
	AddNoteStats(ctx context.Context, noteID string, views, waters int64) (Stats, error)
	// AddRegisteredNoteStats is AddNoteStats for a note that must have
	// been registered: for any other it writes nothing and returns a
	// not_found error (NotRegistered).
	AddRegisteredNoteStats(ctx context.Context, noteID string, views, waters int64) (Stats, error)
	// RegisterNote creates noteID with zero counters unless it exists, and
	// returns its counters; created tells which.
	RegisterNote(ctx context.Context, noteID string) (st Stats, created bool, err error)
	// NotesStats returns the counters of the notes among ids that were
	// ever counted, in one statement; a note never seen has no entry.
	NotesStats(ctx context.Context, ids []string) ([]Stats, error)
}
