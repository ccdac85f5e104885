package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestAnExportOutlastsTheStatementTimeoutOnOneConnection exports an
// activity of 20,000 registrations with a 1,000-byte metadata each (20 MB,
// more than the socket buffers hold, over many chunks of reads) to a slow
// reader, from a pool of one connection whose statements time out after
// 1 s (a chunk's read takes a few milliseconds, but a loaded test machine
// has stretched one past 300 ms). The export takes over 3 s, yet every row
// arrives once, in creation order; and while the rows are being written
// out the connection is free: the one-connection pool has none acquired.
// (Read by one statement, the export was cut by the statement timeout.)
func TestAnExportOutlastsTheStatementTimeoutOnOneConnection(t *testing.T) {
	t.Parallel()
	const rows = 20000
	url := testenv.NewDatabase(t)
	pool := testenv.PoolWith(t, url, store.ConnPoolConfig{MaxConns: 1, StatementTimeout: time.Second})
	s := store.New(pool)
	id := createActivities(t, s, 1, rows)[0]
	ctx := context.Background()
	_, err := testenv.Pool(t, url, 1).Exec(ctx, `
		INSERT INTO registration (public_id, activity_id, user_id, status, metadata)
		SELECT 'r_' || lpad(g::text, 26, '0'), a.id, 'user-' || g,
		       CASE WHEN g % 3 = 0 THEN 'cancelled' ELSE 'pending' END,
		       json_build_object('note', repeat('x', 1000), 'n', g)
		FROM activity a, generate_series(1, $2) g WHERE a.public_id = $1`, id, rows)
	require.NoError(t, err)

	var got []string
	var heldWhileEmitting []int32
	start := time.Now()
	err = s.ExportRegistrations(ctx, id, "", func(r registration.Registration) error {
		got = append(got, r.UserID)
		if len(got)%2500 == 0 {
			heldWhileEmitting = append(heldWhileEmitting, pool.Stat().AcquiredConns())
		}
		if len(got)%50 == 0 {
			// Kept: a slow reader is what this test is about; 4 s in all,
			// so that the export outlasts the statement timeout.
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, time.Since(start), 3*time.Second, "the export outlasted the statement timeout several times")
	require.Len(t, got, rows)
	for i, u := range got {
		require.Equal(t, fmt.Sprint("user-", i+1), u, "row %d: every row once, in creation order", i)
	}
	require.Equal(t, make([]int32, rows/2500), heldWhileEmitting, "the export holds no connection while its rows are written out")
	var one int
	require.NoError(t, pool.QueryRow(ctx, `SELECT 1`).Scan(&one), "and gave it back")

	var pending int
	err = s.ExportRegistrations(ctx, id, registration.Pending, func(r registration.Registration) error {
		require.Equal(t, registration.Pending, r.Status)
		pending++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, rows-rows/3, pending, "the status filter holds across chunks")
}
