package loadtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
)

func TestActivityPublicIDIsAValidULID(t *testing.T) {
	t.Parallel()
	idPattern := regexp.MustCompile(`^a_[0-9A-HJKMNP-TV-Z]{26}$`)
	for _, n := range []int{1, 255, 3001, 1 << 40} {
		id := ActivityPublicID(n)
		require.Regexp(t, idPattern, id)
		_, err := ulid.ParseStrict(id[2:])
		require.NoError(t, err, id)
	}
	require.NotEqual(t, ActivityPublicID(1), ActivityPublicID(16))
}

func TestScale(t *testing.T) {
	t.Parallel()
	require.Equal(t, 980000, FullScale.Rows())
	require.Equal(t, 24000, FullScale.HotOccupying())
	require.NoError(t, QuickScale.Validate())
	require.Error(t, Scale{Activities: 0, PerActivity: 1, HotRows: 10}.Validate())
}

func TestBenchDatabaseNameGuard(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkBenchName("capacityd_bench"))
	require.Error(t, checkBenchName("capacityd"))
	name, err := databaseName("postgres://u@127.0.0.1:5432/capacityd_bench?sslmode=disable")
	require.NoError(t, err)
	require.Equal(t, "capacityd_bench", name)
	u, err := withDatabase("postgres://u@127.0.0.1:5432/capacityd_bench?sslmode=disable", "postgres")
	require.NoError(t, err)
	require.Equal(t, "postgres://u@127.0.0.1:5432/postgres?sslmode=disable", u)
}

func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkLoopback("http://127.0.0.1:8080"))
	require.NoError(t, checkLoopback("http://localhost:8080"))
	require.Error(t, checkLoopback("http://10.0.0.1:8080"))
	require.Error(t, checkLoopback("https://example.com"))
}

func TestSumMetric(t *testing.T) {
	t.Parallel()
	text := `# HELP capacityd_admission_transactions_total Admission transactions.
# TYPE capacityd_admission_transactions_total counter
capacityd_admission_transactions_total{result="ok"} 17
capacityd_admission_transactions_total{result="error"} 2
capacityd_admission_transactions_total_extra{result="ok"} 100
capacityd_admission_batch_size_bucket{le="1"} 3
process_resident_memory_bytes 6.5536e+07
`
	v, ok := SumMetric(text, "capacityd_admission_transactions_total")
	require.True(t, ok)
	require.Equal(t, 19.0, v)
	v, ok = SumMetric(text, "capacityd_admission_transactions_total", `result="ok"`)
	require.True(t, ok)
	require.Equal(t, 17.0, v)
	v, ok = SumMetric(text, "process_resident_memory_bytes")
	require.True(t, ok)
	require.Equal(t, 65536000.0, v)
	_, ok = SumMetric(text, "capacityd_missing")
	require.False(t, ok)
}

func TestPlanShape(t *testing.T) {
	t.Parallel()
	js := []byte(`[{"Plan": {"Node Type": "Aggregate", "Shared Hit Blocks": 209, "Plans": [
		{"Node Type": "Index Only Scan", "Index Name": "registration_activity_status_idx", "Relation Name": "registration",
		 "Heap Fetches": 0, "Shared Hit Blocks": 209}]}}]`)
	s, err := PlanShape(js)
	require.NoError(t, err)
	require.Equal(t, "Aggregate (buffers hit 209 read 0) > Index Only Scan using registration_activity_status_idx on registration (heap fetches 0, buffers hit 209 read 0)", s)

	js = []byte(`[{"Plan": {"Node Type": "Aggregate", "Plans": [{"Node Type": "Seq Scan", "Relation Name": "registration",
		"Filter": "(status = ANY ('{pending}'::text[]))", "Rows Removed by Filter": 56000}]}}]`)
	s, err = PlanShape(js)
	require.NoError(t, err)
	require.Contains(t, s, "Seq Scan on registration (Filter (status = ANY ('{pending}'::text[])) removed 56000 rows)")

	_, err = PlanShape([]byte(`nope`))
	require.Error(t, err)
}

func TestLatencies(t *testing.T) {
	t.Parallel()
	l := NewLatencies()
	for i := 1; i <= 100; i++ {
		l.Record(time.Duration(i) * time.Millisecond)
	}
	other := NewLatencies()
	other.Record(time.Hour) // clamped to the range
	l.Merge(other)
	require.EqualValues(t, 101, l.Count())
	require.InDelta(t, 51, l.QuantileMS(50), 0.1, "the 51st of 101 values")
	require.InDelta(t, 100, l.QuantileMS(99), 0.1)
	require.InDelta(t, 120000, l.MaxMS(), 200)
	require.Zero(t, NewLatencies().QuantileMS(50))
}

func TestDriveIsBoundedByCountAndTime(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var log bytes.Buffer
	out := Drive(context.Background(), Load{Name: "count", Clients: 8, Duration: 10 * time.Second, MaxOps: 1000}, &log,
		func(_ context.Context, _ int, i int64) error {
			calls.Add(1)
			if i%10 == 0 {
				return errors.New("every tenth fails")
			}
			return nil
		})
	require.EqualValues(t, 1000, calls.Load())
	require.EqualValues(t, 900, out.Ops)
	require.EqualValues(t, 100, out.Errors)
	require.EqualValues(t, 900, out.Lat.Count())
	require.Contains(t, log.String(), "count            done")

	begin := time.Now()
	// Half a second of 2 ms operations: some end within it even on a
	// loaded machine.
	out = Drive(context.Background(), Load{Name: "time", Clients: 2, Duration: 500 * time.Millisecond}, &log,
		func(ctx context.Context, _ int, _ int64) error {
			return sleep(ctx, 2*time.Millisecond)
		})
	require.Less(t, time.Since(begin), 2*time.Second)
	require.Positive(t, out.Ops)
	require.Zero(t, out.Errors, "operations cut by the deadline are not failures")
}

func TestMarkdownAndCharts(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Checks[CheckFlashAdmitted] = int64(500)
	r.Checks[CheckCountHotPlan] = "Aggregate > Index Only Scan | x"
	r.ComputeRatios()
	var buf bytes.Buffer
	require.NoError(t, WriteMarkdown(&buf, r, MarkdownMeta{
		Date: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC), Command: "make bench", Scale: FullScale,
		ScenarioDuration: 10 * time.Second, BaselineDuration: 5 * time.Second, ChartDir: "docs/bench",
	}))
	md := buf.String()
	require.Contains(t, md, "2026-11-29 22:00 UTC")
	require.Contains(t, md, "`make bench`")
	require.Contains(t, md, "| signup_hot |")
	require.Contains(t, md, "| topic | measure |")
	require.Contains(t, md, "| admission | hot signups/s at 64 clients vs one-row UPDATE at 32 clients |")
	require.NotContains(t, strings.ToLower(md), "issue", "the page names topics, not work items")
	require.Contains(t, md, "**yes**")
	require.Contains(t, md, "not measured")
	require.Contains(t, md, `Index Only Scan \| x`, "cells are escaped")
	require.Contains(t, md, "docs/bench/throughput.png")

	dir := t.TempDir()
	require.NoError(t, WriteCharts(dir, r))
	for _, f := range []string{ThroughputChart, LatencyChart} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	// An empty report still renders.
	require.NoError(t, WriteCharts(t.TempDir(), NewReport("x")))
}
