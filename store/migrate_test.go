package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// emptyDatabase creates an empty (unmigrated) database on the test server.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.DatabaseURL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	name := "capacityd_empty_" + strings.ToLower(t.Name()[len(t.Name())-8:])
	_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	_, err = conn.Exec(ctx, `CREATE DATABASE `+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), testenv.DatabaseURL())
		if err == nil {
			_, _ = c.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
			c.Close(context.Background())
		}
	})
	u := testenv.DatabaseURL()
	return replaceDB(u, name)
}

func TestMigrateFromEmptyTwice(t *testing.T) {
	t.Parallel()
	pool := testenv.Pool(t, emptyDatabase(t), 4)
	applied, err := store.Migrate(context.Background(), pool)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, applied)
	applied, err = store.Migrate(context.Background(), pool)
	require.NoError(t, err)
	require.Empty(t, applied, "nothing pending the second time")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM registration`).Scan(&n))
}

func TestConcurrentMigratorsApplyOnce(t *testing.T) {
	t.Parallel()
	url := emptyDatabase(t)
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
	require.Equal(t, 2, total, "each version applied exactly once: %v", results)
}
