package store_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/migrations"
	"github.com/physiciansnet/capacityd/store"
)

// versions returns the versions of the embedded migrations, in order.
func versions(t *testing.T) []int64 {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	out := make([]int64, len(names))
	for i := range names {
		out[i] = int64(i + 1)
		require.True(t, strings.HasPrefix(names[i], fmt.Sprintf("%05d_", i+1)), "migration %s is numbered in sequence", names[i])
	}
	return out
}

func TestMigrateFromEmptyTwice(t *testing.T) {
	t.Parallel()
	pool := testenv.Pool(t, testenv.EmptyDatabase(t), 4)
	applied, err := store.Migrate(context.Background(), pool)
	require.NoError(t, err)
	require.Equal(t, versions(t), applied)
	applied, err = store.Migrate(context.Background(), pool)
	require.NoError(t, err)
	require.Empty(t, applied, "nothing pending the second time")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM registration`).Scan(&n))
}

func TestConcurrentMigratorsApplyOnce(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyDatabase(t)
	var wg sync.WaitGroup
	results := make([][]int64, 4)
	errs := make([]error, 4)
	for i := range results {
		pool := testenv.Pool(t, url, 2)
		wg.Go(func() { results[i], errs[i] = store.Migrate(context.Background(), pool) })
	}
	wg.Wait()
	total := 0
	for i := range results {
		require.NoError(t, errs[i])
		total += len(results[i])
	}
	require.Equal(t, len(versions(t)), total, "each version applied exactly once: %v", results)
}

// migrated reports whether the database at url has the migrations' table.
func migrated(t *testing.T, url string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, testenv.Pool(t, url, 1).QueryRow(context.Background(),
		`SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&ok))
	return ok
}

// TestMigrateRefusesATransactionPooler migrates through PgBouncer in
// transaction mode, with the URL a user writes for it: Migrate refuses,
// naming the pooler's address, and applies nothing.
func TestMigrateRefusesATransactionPooler(t *testing.T) {
	t.Parallel()
	direct := testenv.EmptyDatabase(t)
	for _, size := range []int{1, 4} {
		bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), size)
		applied, err := store.Migrate(context.Background(), testenv.Pool(t, bouncer.URL(direct), 4))
		require.ErrorIs(t, err, store.ErrSessionNotKept, "%d server connections", size)
		require.ErrorContains(t, err, "DATABASE_URL ("+bouncer.Addr+") reaches PostgreSQL through a pooler")
		require.Empty(t, applied)
	}
	require.False(t, migrated(t, direct), "nothing applied")
}

// TestMigrateThroughASessionPooler migrates through PgBouncer in session
// mode, which keeps a server session per client: the probe sees the
// session kept and the migrations are applied. With a single server
// connection the probe's second client can only wait: Migrate refuses,
// saying it could not tell.
func TestMigrateThroughASessionPooler(t *testing.T) {
	t.Parallel()
	t.Run("kept", func(t *testing.T) {
		t.Parallel()
		direct := testenv.EmptyDatabase(t)
		bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 4, "pool_mode = session")
		applied, err := store.Migrate(context.Background(), testenv.Pool(t, bouncer.URL(direct), 2))
		require.NoError(t, err)
		require.Equal(t, versions(t), applied)
	})
	t.Run("one server connection", func(t *testing.T) {
		t.Parallel()
		direct := testenv.EmptyDatabase(t)
		bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 1, "pool_mode = session")
		_, err := store.Migrate(context.Background(), testenv.Pool(t, bouncer.URL(direct), 2))
		require.ErrorIs(t, err, store.ErrSessionUnknown)
		require.False(t, migrated(t, direct), "nothing applied")
	})
}

// TestMigrateThroughATCPProxy migrates through a plain TCP proxy, which
// passes the server's own cancel key on: no probe of pooling, migrations
// applied.
func TestMigrateThroughATCPProxy(t *testing.T) {
	t.Parallel()
	direct := testenv.EmptyDatabase(t)
	u, err := url.Parse(direct)
	require.NoError(t, err)
	proxy := testenv.StartProxy(t, "postgres", u.Host)
	u.Host = proxy.Addr
	applied, err := store.Migrate(context.Background(), testenv.Pool(t, u.String(), 2))
	require.NoError(t, err)
	require.Equal(t, versions(t), applied)
}
