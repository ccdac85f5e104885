package store_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/testenv"
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
