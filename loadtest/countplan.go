package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/store"
)

// ErrSeqScan is returned by CheckCount when the authority COUNT's plan
// reads the table sequentially.
var ErrSeqScan = errors.New("loadtest: the authority COUNT uses a Seq Scan")

// CountResult is the authority COUNT of one activity, run as a prepared
// statement after warm-up executions.
type CountResult struct {
	// Shape is the plan in one line, e.g.
	// "Aggregate > Index Only Scan using x on registration".
	Shape string
	// Text is EXPLAIN (ANALYZE, BUFFERS)'s text output.
	Text string
	// MedianMS is the median time of the timed executions.
	MedianMS float64
	// Count is the COUNT's value.
	Count int64
}

// countWarmups is how many times the prepared COUNT runs before its plan
// is examined: past the five custom-plan executions after which
// PostgreSQL may switch to a generic plan.
const countWarmups = 20

// CheckCount examines the authority COUNT (store.CountOccupyingSQL) for
// the small and the hot activity of the seed on a connection set up as
// the service's pool sets its own, records the results in r.Checks, prints
// the plans, and returns ErrSeqScan when either plan has a Seq Scan.
func CheckCount(ctx context.Context, dbURL string, seed SeedInfo, r *Report, log io.Writer) error {
	pool, err := store.OpenConnPool(ctx, dbURL, store.ConnPoolConfig{MaxConns: 1})
	if err != nil {
		return err
	}
	defer pool.Close()
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("loadtest: count: %w", err)
	}
	defer c.Release()
	conn := c.Conn()
	if _, err := conn.Exec(ctx, `PREPARE lt_count(bigint) AS `+store.CountOccupyingSQL); err != nil {
		return fmt.Errorf("loadtest: prepare the authority COUNT: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE lt_count`)
	var seq error
	for _, a := range []struct {
		label    string
		id       int64
		ms, plan string
	}{
		{"small", seed.SmallID, CheckCountSmallMS, CheckCountSmallPlan},
		{"hot", seed.HotID, CheckCountHotMS, CheckCountHotPlan},
	} {
		res, err := countActivity(ctx, conn, a.id)
		if err != nil {
			return err
		}
		r.Checks[a.ms] = res.MedianMS
		r.Checks[a.plan] = res.Shape
		fmt.Fprintf(log, "count %-5s activity %d: %d occupying, median %.3f ms after %d executions\n  plan: %s\n%s\n",
			a.label, a.id, res.Count, res.MedianMS, countWarmups, res.Shape, indent(res.Text, "    "))
		if strings.Contains(res.Shape, "Seq Scan") {
			seq = fmt.Errorf("%w for the %s activity: %s", ErrSeqScan, a.label, res.Shape)
		}
	}
	return seq
}

func countActivity(ctx context.Context, conn *pgx.Conn, id int64) (CountResult, error) {
	var res CountResult
	times := make([]float64, 0, countWarmups)
	for range countWarmups {
		t0 := time.Now()
		if err := conn.QueryRow(ctx, fmt.Sprintf(`EXECUTE lt_count(%d)`, id)).Scan(&res.Count); err != nil {
			return res, fmt.Errorf("loadtest: execute the authority COUNT: %w", err)
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1000)
	}
	// The timed figure is the executions past the custom-plan phase.
	res.MedianMS = round(median(times[6:]), 3)
	var js []byte
	if err := conn.QueryRow(ctx, fmt.Sprintf(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE lt_count(%d)`, id)).Scan(&js); err != nil {
		return res, fmt.Errorf("loadtest: explain the authority COUNT: %w", err)
	}
	shape, err := PlanShape(js)
	if err != nil {
		return res, err
	}
	res.Shape = shape
	rows, err := conn.Query(ctx, fmt.Sprintf(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE lt_count(%d)`, id))
	if err != nil {
		return res, fmt.Errorf("loadtest: explain the authority COUNT: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return res, fmt.Errorf("loadtest: explain the authority COUNT: %w", err)
	}
	res.Text = strings.Join(lines, "\n")
	return res, nil
}

// planNode is the part of EXPLAIN (FORMAT JSON) that the shape needs.
type planNode struct {
	NodeType         string     `json:"Node Type"`
	IndexName        string     `json:"Index Name"`
	RelationName     string     `json:"Relation Name"`
	Filter           string     `json:"Filter"`
	RowsRemoved      int64      `json:"Rows Removed by Filter"`
	HeapFetches      *int64     `json:"Heap Fetches"`
	SharedHitBlocks  int64      `json:"Shared Hit Blocks"`
	SharedReadBlocks int64      `json:"Shared Read Blocks"`
	Plans            []planNode `json:"Plans"`
}

// PlanShape renders EXPLAIN (FORMAT JSON) output as one line: the nodes
// from the top down, with the index or table each scan reads, its row
// filter and rows removed by it, and heap fetches of index-only scans.
func PlanShape(explainJSON []byte) (string, error) {
	var top []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(explainJSON, &top); err != nil || len(top) == 0 {
		return "", fmt.Errorf("loadtest: read EXPLAIN output: %v", err)
	}
	var parts []string
	var walk func(n planNode)
	walk = func(n planNode) {
		s := n.NodeType
		if n.IndexName != "" {
			s += " using " + n.IndexName
		}
		if n.RelationName != "" {
			s += " on " + n.RelationName
		}
		var notes []string
		if n.Filter != "" {
			notes = append(notes, fmt.Sprintf("Filter %s removed %d rows", n.Filter, n.RowsRemoved))
		}
		if n.HeapFetches != nil {
			notes = append(notes, fmt.Sprintf("heap fetches %d", *n.HeapFetches))
		}
		if n.SharedHitBlocks+n.SharedReadBlocks > 0 {
			notes = append(notes, fmt.Sprintf("buffers hit %d read %d", n.SharedHitBlocks, n.SharedReadBlocks))
		}
		if len(notes) > 0 {
			s += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, s)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(top[0].Plan)
	return strings.Join(parts, " > "), nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
