package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// planNode is the part of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	IndexName     string     `json:"Index Name"`
	IndexCond     string     `json:"Index Cond"`
	Filter        string     `json:"Filter"`
	RowsRemoved   float64    `json:"Rows Removed by Filter"`
	ActualRows    float64    `json:"Actual Rows"`
	Plans         []planNode `json:"Plans"`
	RecheckCond   string     `json:"Recheck Cond"`
	HeapFetches   float64    `json:"Heap Fetches"`
	RelationName  string     `json:"Relation Name"`
	ParentRelship string     `json:"Parent Relationship"`
}

func scans(n planNode) []planNode {
	var out []planNode
	if n.RelationName != "" {
		out = append(out, n)
	}
	for _, c := range n.Plans {
		out = append(out, scans(c)...)
	}
	return out
}

// TestAuthorityCountStaysAnIndexScanAfterManyExecutions guards against the
// generic-plan trap: after five executions of a prepared statement
// PostgreSQL may switch to a generic plan; the authority COUNT must still
// read only the activity's occupying index entries.
func TestAuthorityCountStaysAnIndexScanAfterManyExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.DB(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO activity (public_id, title, capacity)
		SELECT 'a_plan' || g, 'plan ' || g, 100000 FROM generate_series(1, 300) g;
		INSERT INTO registration (public_id, activity_id, user_id, status, waitlist_seq)
		SELECT 'r_plan' || g,
			CASE WHEN g % 3 = 0 THEN 1 ELSE 2 + g % 299 END,
			'u' || g,
			CASE WHEN g % 20 < 4 THEN 'pending' WHEN g % 20 < 6 THEN 'approved' WHEN g % 20 = 6 THEN 'waitlisted' ELSE 'cancelled' END,
			CASE WHEN g % 20 = 6 THEN g END
		FROM generate_series(1, 120000) g;`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `VACUUM ANALYZE registration`)
	require.NoError(t, err)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var hotID int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM activity WHERE public_id = 'a_plan1'`).Scan(&hotID))

	_, err = conn.Exec(ctx, `PREPARE authority_count(bigint) AS `+store.CountOccupyingSQL)
	require.NoError(t, err)
	var want int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM registration WHERE activity_id = $1 AND status IN ('pending','awaiting_payment','approved')`, hotID).Scan(&want))
	for range 20 {
		var n int64
		require.NoError(t, conn.QueryRow(ctx, `EXECUTE authority_count(`+itoa(hotID)+`)`, pgx.QueryExecModeSimpleProtocol).Scan(&n))
		require.Equal(t, want, n)
	}

	var raw []byte
	require.NoError(t, conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE authority_count(`+itoa(hotID)+`)`,
		pgx.QueryExecModeSimpleProtocol).Scan(&raw))
	var explained []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &explained))
	ss := scans(explained[0].Plan)
	require.Len(t, ss, 1, "one scan of registration: %s", raw)
	scan := ss[0]
	require.Contains(t, []string{"Index Only Scan", "Index Scan"}, scan.NodeType, "plan: %s", raw)
	require.NotEmpty(t, scan.IndexCond, "the activity and status are index conditions: %s", raw)
	require.Zero(t, scan.RowsRemoved, "no filter over the activity's rows: %s", raw)
	require.Equal(t, float64(want), scan.ActualRows, "reads exactly the occupying entries: %s", raw)
	require.Equal(t, "registration_occupying_idx", scan.IndexName, "the partial index of the occupying rows: %s", raw)
	t.Logf("authority COUNT plan after 20 executions: %s on %s, cond %s, heap fetches %v", scan.NodeType, scan.IndexName, scan.IndexCond, scan.HeapFetches)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
