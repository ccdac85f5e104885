package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// hammer runs n concurrent workers of queries with arguments (each a
// statement pgx would prepare) through pool and returns the first error.
func hammer(t *testing.T, st *store.Store, n int) error {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() {
			for i := range 30 {
				note := fmt.Sprintf("n%d", (w+i)%5)
				if _, err := st.AddNoteStats(context.Background(), note, 1, 0); err != nil {
					errs <- err
					return
				}
				if _, err := st.NoteStats(context.Background(), note); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func TestPoolWorksThroughPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	for name, settings := range map[string][]string{
		"startup parameters refused": nil,
		"startup parameters ignored": {"ignore_startup_parameters = statement_timeout, idle_in_transaction_session_timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			poolThroughPgBouncer(t, settings)
		})
	}
}

func poolThroughPgBouncer(t *testing.T, settings []string) {
	direct := testenv.NewDatabase(t)
	bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 3, settings...)
	pool := testenv.PoolWith(t, bouncer.URL(direct), store.ConnPoolConfig{MaxConns: 12, StatementTimeout: time.Second})
	st := store.New(pool)

	require.NoError(t, hammer(t, st, 12), "the URL a user writes for the pooler works as it is")
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	require.NotContains(t, conn.Conn().Config().RuntimeParams, "statement_timeout",
		"PgBouncer refuses or drops session timeouts at connect: the pool connects without them")
	require.Equal(t, pgx.QueryExecModeCacheDescribe, conn.Conn().Config().DefaultQueryExecMode,
		"and named prepared statements are avoided")
	conn.Release()
	views := 0
	for i := range 5 {
		s, err := st.NoteStats(context.Background(), fmt.Sprintf("n%d", i))
		require.NoError(t, err)
		views += int(s.Views)
	}
	require.Equal(t, 12*30, views, "every increment counted once")

	// The upsert still has a statement_timeout of its own (SET LOCAL): a
	// locked note fails it after a second, not after the minute-long
	// client-side backstop.
	release := testenv.LockNote(t, testenv.Pool(t, direct, 1), "n0")
	defer release()
	start := time.Now()
	_, err = st.AddNoteStats(context.Background(), "n0", 1, 0)
	require.Equal(t, capacityd.EUnavailable, capacityd.ErrorCode(err), "%v", err)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestNamedPreparedStatementsFailThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := testenv.NewDatabase(t)
	bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 3)
	// What the describe cache avoids: pgx's default statement cache
	// prepares named statements, which PgBouncer 1.18 does not carry from
	// one server connection to another.
	pool := testenv.Pool(t, bouncer.URL(direct)+"&default_query_exec_mode=cache_statement", 12)
	require.ErrorContains(t, hammer(t, store.New(pool), 12), "prepared statement")
}

func TestPoolKeepsSessionTimeoutsOnADirectConnection(t *testing.T) {
	t.Parallel()
	pool := testenv.PoolWith(t, testenv.NewDatabase(t), store.ConnPoolConfig{StatementTimeout: 1500 * time.Millisecond})
	var timeout string
	require.NoError(t, pool.QueryRow(context.Background(), `SHOW statement_timeout`).Scan(&timeout))
	require.Equal(t, "1500ms", timeout)
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	require.Equal(t, pgx.QueryExecModeCacheStatement, conn.Conn().Config().DefaultQueryExecMode,
		"PostgreSQL itself keeps named prepared statements: the faster statement cache")
	conn.Release()
	require.NoError(t, hammer(t, store.New(pool), 4))
}
