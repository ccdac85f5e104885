package loadtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestDriveMeasuresTheWALOfItsLoad inserts rows of a known size under
// Drive, on a database of its own, and checks the WAL it reports: at
// least the rows' payload per operation (other tests share the server and
// write WAL too, so only the floor is exact).
func TestDriveMeasuresTheWALOfItsLoad(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testenv.Pool(t, testenv.EmptyDatabase(t), 4)
	// Stored PLAIN: never compressed, so each row's payload is logged whole.
	_, err := pool.Exec(ctx, `CREATE TABLE wal_probe (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload text NOT NULL);
		ALTER TABLE wal_probe ALTER COLUMN payload SET STORAGE PLAIN`)
	require.NoError(t, err)

	const payload = 1500
	body := strings.Repeat("x", payload)
	l := Load{Name: "wal", Clients: 4, Duration: time.Minute, MaxOps: 200,
		WAL: func(ctx context.Context) (int64, error) { return walPosition(ctx, pool) }}
	out := Drive(ctx, l, io.Discard, func(ctx context.Context, _ int, _ int64) error {
		_, err := pool.Exec(ctx, `INSERT INTO wal_probe (payload) VALUES ($1)`, body)
		return err
	})
	require.EqualValues(t, 200, out.Ops)
	require.NotNil(t, out.WALBytes)
	r := out.Result(4)
	require.NotNil(t, r.WALBytesPerOp)
	require.GreaterOrEqual(t, *r.WALBytesPerOp, float64(payload), "each insert logs its row")
}

func TestDriveWithoutAWALReaderReportsNone(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, int, int64) error { return nil }
	out := Drive(context.Background(), Load{Name: "none", Clients: 1, Duration: time.Minute, MaxOps: 3}, io.Discard, noop)
	require.Nil(t, out.WALBytes)
	require.Nil(t, out.Result(1).WALBytesPerOp)

	failing := func(context.Context) (int64, error) { return 0, errors.New("no server") }
	out = Drive(context.Background(), Load{Name: "failing", Clients: 1, Duration: time.Minute, MaxOps: 3, WAL: failing}, io.Discard, noop)
	require.Nil(t, out.WALBytes, "a reading that failed is not reported as zero")
	require.EqualValues(t, 3, out.Ops)
}

func TestWALPerOperationInTheReport(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Scenarios[ScenarioCancelHot] = &ScenarioResult{RPS: 4200, Ops: 42000, WALBytesPerOp: Num(1480)}
	r.Scenarios[ScenarioSignupHot].WALBytesPerOp = Num(0)

	_, table := markdownSection(t, r, "WAL per operation")
	require.Contains(t, table, "| cancel_hot | 1480 |")
	require.Contains(t, table, "| signup_hot | 0 |", "a measured zero is shown")
	require.NotContains(t, table, "| signup_spread | ", "a scenario measured without the WAL has no row")
	require.Less(t, strings.Index(table, "| signup_hot |"), strings.Index(table, "| cancel_hot |"), "rows in page order")

	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	require.Contains(t, js.String(), `"wal_bytes_per_op": 1480`)

	var buf bytes.Buffer
	require.NoError(t, WriteMarkdown(&buf, sampleReport(), MarkdownMeta{Scale: FullScale}))
	require.NotContains(t, buf.String(), "WAL per operation")
}
