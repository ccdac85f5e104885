package store_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// TestACommitOnlyTheRestartedPrimaryHas: a COMMIT waits for a synchronous
// standby that never answers, and the primary crashes (its postmaster
// SIGKILLed: the waiting backend ends, the commit in the primary's own
// log only) and starts again, replaying that log. The transaction is
// committed there. While the server requires a synchronous standby, no
// standby has the commit, and a failover would lose it (a promoted
// standby, or this server rewound to follow one): the store does not
// call it a success (503, outcome unknown). A server that requires no
// standby is all there is, and the same commit is a success.
func TestACommitOnlyTheRestartedPrimaryHas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		standby bool
	}{{"a synchronous standby required", true}, {"no standby required", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pg := testenv.PrivatePostgres(t)
			admin := testenv.Pool(t, pg.URL, 1)
			_, err := store.Migrate(ctx, admin)
			require.NoError(t, err)
			_, err = admin.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = 'nobody'`)
			require.NoError(t, err)
			_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
			require.NoError(t, err)
			// The test servers run with synchronous_commit off; the store's
			// sessions turn it on, as a production server has it.
			s := store.New(testenv.Pool(t, pg.URL+"&synchronous_commit=on", 2))

			done := make(chan error, 1)
			go func() { done <- s.InsertNoteWithCommit(ctx, "restarted", time.Minute) }()
			require.Eventually(t, func() bool {
				var n int
				err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n)
				return err == nil && n == 1
			}, 10*time.Second, 10*time.Millisecond, "the COMMIT waits for the synchronous standby")
			admin.Close()

			pg.Kill()
			if !tc.standby {
				conf := filepath.Join(pg.DataDir(), "postgresql.auto.conf")
				b, err := os.ReadFile(conf)
				require.NoError(t, err)
				b = regexp.MustCompile(`(?m)^synchronous_standby_names.*$`).ReplaceAll(b, nil)
				require.NoError(t, os.WriteFile(conf, b, 0o600))
			}
			pg.Start(t)

			err = <-done
			require.Equal(t, 1, noteRows(t, pg.URL, "restarted"), "the restarted server replayed the commit from its log")
			if tc.standby {
				require.True(t, capacityd.IsCode(err, capacityd.EUnavailable), "a commit no standby has is not a success: %v", err)
			} else {
				require.NoError(t, err, "without a standby to wait for, the server's log is the authority")
			}
		})
	}
}
