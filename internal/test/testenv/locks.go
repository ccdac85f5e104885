package testenv

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// LockNote holds the row lock of a note (which must exist) until release
// is called or t ends, so that upserts of it wait.
func LockNote(t T, pool *pgxpool.Pool, id string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("testenv: lock note %s: %v", id, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	tag, err := tx.Exec(ctx, `SELECT 1 FROM note_stats WHERE note_id = $1 FOR UPDATE`, id)
	if err != nil {
		t.Fatalf("testenv: lock note %s: %v", id, err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("testenv: lock note %s: no such note", id)
	}
	return release
}
