package note_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/store"
)

// The three measurements of the note counters, meant to be run together:
//
//	go test -run '^$' -bench . -benchtime 5s ./note/
//
// BenchmarkViewsHTTP drives POST /v1/notes/{id}/views on one hot note from
// 64 clients over HTTP (server and clients in this process), with
// combining on and off; BenchmarkPgbenchNoteUpsert runs pgbench's
// single-note upsert at 32 clients for the same time. Compare their
// views/s and upserts/s.

// benchClients is the number of concurrent HTTP clients.
const benchClients = 64

func BenchmarkViewsHTTP(b *testing.B) {
	for _, mode := range []struct {
		name string
		off  bool
	}{{"combining", false}, {"naive", true}} {
		b.Run(mode.name, func(b *testing.B) {
			inst := apptest.Start(b, apptest.Options{NoRedis: true, App: app.Options{Notes: note.Config{CombiningOff: mode.off}}})
			id := fmt.Sprintf("bench-%s-%d", mode.name, b.N)
			url := inst.URL + "/v1/notes/" + id + "/views"
			var failed atomic.Int64
			b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, err := apptest.Do(http.MethodPost, url, "", nil)
					if err != nil || r.Status != http.StatusOK {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "views/s")
			b.ReportMetric(upsertsOf(b, inst), "upserts")
			require.Zero(b, failed.Load())
			var views int64
			require.NoError(b, inst.App.Pool.QueryRow(context.Background(),
				`SELECT views FROM note_stats WHERE note_id = $1`, id).Scan(&views))
			require.EqualValues(b, b.N, views)
		})
	}
}

// pgbenchScript is the service's upsert of one view, as pgbench runs it.
const pgbenchScript = `INSERT INTO note_stats (note_id, views, waters) VALUES ('pgbench-hot', 1, 0)
ON CONFLICT (note_id) DO UPDATE SET views = note_stats.views + EXCLUDED.views,
waters = note_stats.waters + EXCLUDED.waters, updated_at = now() RETURNING views, waters;
`

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// BenchmarkPgbenchNoteUpsert runs pgbench's single-note upsert at 32
// clients on a throwaway database (dropped afterwards) for the benchtime,
// once.
func BenchmarkPgbenchNoteUpsert(b *testing.B) {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		bin = "/usr/lib/postgresql/15/bin/pgbench"
	}
	_, statErr := exec.LookPath(bin)
	testenv.Require(b, statErr == nil, "pgbench")
	secs := 5
	if d := benchtime(); d > 0 {
		secs = max(1, int(d.Seconds()))
	}
	for b.Loop() {
		url := testenv.NewDatabase(b)
		script := filepath.Join(b.TempDir(), "upsert.sql")
		require.NoError(b, writeFile(script, pgbenchScript))
		out, err := exec.Command(bin, "-n", "-c", "32", "-j", "2", "-T", strconv.Itoa(secs), "-M", "prepared",
			"-f", script, url).CombinedOutput()
		require.NoError(b, err, "%s", out)
		m := tpsLine.FindSubmatch(out)
		require.NotNil(b, m, "%s", out)
		tps, _ := strconv.ParseFloat(string(m[1]), 64)
		b.ReportMetric(tps, "upserts/s")
	}
}

// benchtime returns the -test.benchtime duration, 0 if it is a count.
func benchtime() time.Duration {
	f := flagLookup("test.benchtime")
	d, err := time.ParseDuration(f)
	if err != nil {
		return 0
	}
	return d
}

// BenchmarkIncrementService drives Service.View on one hot note from 64
// goroutines, without HTTP: what combining does to the database side alone.
func BenchmarkIncrementService(b *testing.B) {
	for _, mode := range []struct {
		name string
		off  bool
	}{{"combining", false}, {"naive", true}} {
		b.Run(mode.name, func(b *testing.B) {
			pool := testenv.Pool(b, testenv.NewDatabase(b), 16)
			cs := &countingStore{Store: store.New(pool)}
			svc := note.NewService(note.Config{Store: cs, CombiningOff: mode.off})
			b.Cleanup(func() { _ = svc.Close(context.Background()) })
			var failed atomic.Int64
			b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := svc.View(context.Background(), "hot"); err != nil {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "views/s")
			b.ReportMetric(float64(cs.upserts.Load()), "upserts")
			require.Zero(b, failed.Load())
		})
	}
}
