package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	busy, total, ok := parseProcStat([]byte("cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n"))
	require.True(t, ok)
	require.Equal(t, int64(100+5+50+3+2+1), busy, "user, nice, system, irq, softirq and steal are busy")
	require.Equal(t, busy+1000+20, total, "idle and iowait are not")

	_, _, ok = parseProcStat([]byte("intr 1 2 3\n"))
	require.False(t, ok)
	_, _, ok = parseProcStat([]byte("cpu 1 2 x 4 5 6 7 8\n"))
	require.False(t, ok)
}

func TestParsePidStatTakesTheNameInParenthesesWhole(t *testing.T) {
	t.Parallel()
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
	// priority nice threads itrealvalue starttime …
	st, ok := parsePidStat([]byte("42 (post gres) (x)) S 1 42 42 0 -1 4194304 10 0 0 0 700 300 40 2 20 0 1 0 5123 0\n"))
	require.True(t, ok)
	require.Equal(t, pidStat{comm: "post gres) (x)", own: 1000, start: 5123}, st, "its ended children's time is not its own")

	_, ok = parsePidStat([]byte("42 (short) S 1 2\n"))
	require.False(t, ok)
}

func TestCPUUseBetweenTwoSamples(t *testing.T) {
	t.Parallel()
	pg := procKey{pid: 10, start: 1}
	reused := procKey{pid: 11, start: 1}
	s0 := cpuSample{total: 1000, busy: 400, self: 30, procs: map[procKey]procTime{
		pg: {CPUPostgres, 100}, reused: {CPUPostgres, 500}, {pid: 12, start: 1}: {CPURedis, 70}}}
	s1 := cpuSample{total: 1400, busy: 700, self: 50, procs: map[procKey]procTime{
		pg: {CPUPostgres, 150},
		// The same process id, another process: it started meanwhile.
		{pid: 11, start: 900}: {CPUPostgres, 20},
		{pid: 20, start: 950}: {CPUCapacityd, 80},
	}}
	u := s1.since(s0)
	require.NotNil(t, u)
	require.InDelta(t, 0.75, u.Busy, 1e-9)
	require.Equal(t, map[string]float64{CPUMachine: 3, CPULoadTest: 0.2, CPUPostgres: 0.7, CPUCapacityd: 0.8}, u.Seconds,
		"a process that started meanwhile counts from its start; one that ended (pid 12) is not counted")
	per := u.perOp(1000)
	require.Equal(t, 3000.0, per[CPUMachine])
	require.Equal(t, 700.0, per[CPUPostgres])

	require.Nil(t, s1.since(cpuSample{}), "no first sample: nothing measured")
	require.Nil(t, cpuSample{}.since(s0))
	require.Nil(t, u.perOp(0))

	s0.procs = nil
	require.Equal(t, map[string]float64{CPUMachine: 3, CPULoadTest: 0.2}, s1.since(s0).Seconds,
		"processes not read at both ends: no group of them is reported")
}

func TestSampleCPUCountsOnlyTheNamedProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("processor time is read from /proc, on Linux only")
	}
	t.Parallel()
	// A child that does a fixed amount of work, says so, and waits to be
	// ended, so that its time can be read before and after it is reaped.
	busy := func() (*exec.Cmd, *bufio.Reader) {
		cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done; read x`)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
		return cmd, bufio.NewReader(stdout)
	}
	var named map[int]string
	list := func(context.Context) (map[int]string, error) { return named, nil }
	s0 := sampleCPU(context.Background(), list)
	counted, countedOut := busy()
	other, otherOut := busy()
	misnamed, misnamedOut := busy()
	for _, out := range []*bufio.Reader{countedOut, otherOut, misnamedOut} {
		line, err := out.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "done\n", line)
	}
	named = map[int]string{
		counted.Process.Pid: CPUCapacityd,
		// Not a PostgreSQL process: a process id of another machine's
		// server names some unrelated process here.
		misnamed.Process.Pid: CPUPostgres,
	}
	u := sampleCPU(context.Background(), list).since(s0)
	require.NotNil(t, u)
	_, own, _, ok := readPidStat(counted.Process.Pid)
	require.True(t, ok)
	require.Greater(t, own, int64(0), "the child did work")
	require.InDelta(t, float64(own)/clockTicks, u.Seconds[CPUCapacityd], 1e-9,
		"the named child started after the first sample: all its time counts")
	require.Zero(t, u.Seconds[CPUPostgres], "a process not named postgres is not PostgreSQL's")
	require.NotContains(t, u.Seconds, CPURedis)
	_ = other // running all along, named by no group
}

func TestParseRedisPID(t *testing.T) {
	t.Parallel()
	pid, err := parseRedisPID("# Server\r\nredis_version:7.0.15\r\nprocess_id:4711\r\nrun_id:abc\r\n")
	require.NoError(t, err)
	require.Equal(t, 4711, pid)
	_, err = parseRedisPID("# Server\r\nredis_version:7.0.15\r\n")
	require.Error(t, err)
}

func TestBenchBackendsAreTheBenchDatabasesAndTheSharedWriters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := testenv.EmptyDatabase(t)
	mon, err := OpenMonitor(ctx, url)
	require.NoError(t, err)
	defer mon.Close(ctx)
	bench := testenv.Pool(t, url, 1)
	var benchPID int
	require.NoError(t, bench.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&benchPID))
	var monitorPID int
	require.NoError(t, mon.conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&monitorPID))
	var writers []int
	rows, err := mon.conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type IN ('walwriter', 'checkpointer', 'background writer')`)
	require.NoError(t, err)
	writers, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Len(t, writers, 3)

	pids, err := mon.BenchBackends(ctx)
	require.NoError(t, err)
	require.Contains(t, pids, benchPID, "a connection to the bench database")
	require.Subset(t, pids, writers, "the server's shared writers")
	require.NotContains(t, pids, monitorPID, "a connection to another database")
}

func TestOutcomesAddUpAsOneLoad(t *testing.T) {
	t.Parallel()
	lat := func(ms ...int) *Latencies {
		l := NewLatencies()
		for _, m := range ms {
			l.Record(time.Duration(m) * time.Millisecond)
		}
		return l
	}
	wal := func(n int64) *int64 { return &n }
	first := Outcome{Ops: 3, Errors: 1, Elapsed: time.Second, Lat: lat(10, 10, 10), WALBytes: wal(300),
		CPU: &CPUUse{Busy: 0.5, Seconds: map[string]float64{CPUMachine: 1, CPUPostgres: 0.25}}}
	second := Outcome{Ops: 1, Elapsed: 3 * time.Second, Lat: lat(50), WALBytes: wal(100), FirstError: io.EOF,
		CPU: &CPUUse{Busy: 0.9, Seconds: map[string]float64{CPUMachine: 5.4, CPUCapacityd: 2}}}

	var total Outcome
	total.Add(first)
	total.Add(second)
	require.EqualValues(t, 4, total.Ops)
	require.EqualValues(t, 1, total.Errors)
	require.Equal(t, 4*time.Second, total.Elapsed)
	require.EqualValues(t, 4, total.Lat.Count())
	require.InDelta(t, 50, total.Lat.MaxMS(), 0.1)
	require.EqualValues(t, 400, *total.WALBytes)
	require.Equal(t, io.EOF, total.FirstError)
	require.InDelta(t, 0.8, total.CPU.Busy, 1e-9, "busy shares weighted by duration: (0.5×1 + 0.9×3) / 4")
	require.Equal(t, map[string]float64{CPUMachine: 6.4, CPUPostgres: 0.25, CPUCapacityd: 2}, total.CPU.Seconds)
	require.Equal(t, 1.0, first.CPU.Seconds[CPUMachine], "the outcomes added are left as they were")
	require.EqualValues(t, 3, first.Lat.Count())
	require.InDelta(t, 1.0, total.Result(1).RPS, 1e-9)

	total.Add(Outcome{Ops: 1, Elapsed: time.Second, Lat: lat(5)})
	require.Nil(t, total.CPU, "a load without processor time leaves the sum without one")
	require.Nil(t, total.WALBytes, "and without WAL")
}

func TestDriveMeasuresTheProcessorTimeOfItsLoad(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("processor time is read from /proc, on Linux only")
	}
	// Not parallel: the process's processor time must be this load's.
	before := processCPU(t)
	out := Drive(context.Background(), Load{Name: "burn", Clients: 2, Duration: time.Minute, MaxOps: 40}, io.Discard,
		func(context.Context, int, int64) error {
			// About 10 ms of processor time per operation.
			sum := sha256.Sum256(nil)
			for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
				sum = sha256.Sum256(sum[:])
			}
			return nil
		})
	spent := processCPU(t) - before
	require.NotNil(t, out.CPU)
	r := out.Result(2)
	require.Greater(t, r.CPUBusy, 0.0)
	require.LessOrEqual(t, r.CPUBusy, 1.0)
	// /proc counts in ticks of 10 ms: allow two per sample over the 40
	// operations, and a tenth for the runtime's own work.
	want := float64(spent.Microseconds()) / 40
	require.Greater(t, want, 2000.0, "the operations burnt processor time")
	require.InDelta(t, want, r.CPUMicrosPerOp[CPULoadTest], 1000+want/10, "%v", r.CPUMicrosPerOp)
	require.GreaterOrEqual(t, r.CPUMicrosPerOp[CPUMachine], r.CPUMicrosPerOp[CPULoadTest]-1000,
		"the machine's time includes this process's")
}

// processCPU returns this process's processor time so far, from getrusage.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestProcessorTimeInTheReport(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Scenarios[ScenarioSignupHot].CPUBusy = 0.82
	r.Scenarios[ScenarioSignupHot].CPUMicrosPerOp = map[string]float64{CPUMachine: 563, CPUCapacityd: 274, CPUPostgres: 123, CPURedis: 59, CPULoadTest: 122}
	r.Scenarios[ScenarioSignupHotWebhooks] = &ScenarioResult{RPS: 2000, Ops: 20000, CPUBusy: 0.88,
		CPUMicrosPerOp: map[string]float64{CPUMachine: 1132, CPUCapacityd: 538, CPUPostgres: 317, CPURedis: 62, CPULoadTest: 242}}
	r.Baselines[BaselineLoopbackPostCPU] = Num(88)
	r.ComputeRatios()
	require.Equal(t, 569.0, r.Checks[CheckWebhookCPUAdded])

	md, table := markdownSection(t, r, "Processor time per operation")
	require.Contains(t, table, "| signup_hot | 82% | 563 | 274 | 123 | 59 | 122 |")
	require.Contains(t, table, "| signup_hot_webhooks | 88% | 1132 | 538 | 317 | 62 | 242 |")
	require.NotContains(t, table, "| signup_spread | ", "a scenario measured without processor time has no row")
	require.Contains(t, md, "| "+BaselineLoopbackPostCPU+" | ")
	for _, b := range throughputBars(r) {
		require.NotEqual(t, BaselineLoopbackPostCPU, b.label, "a processor time is not charted as a rate")
	}

	// A report without processor times (not Linux) has no such table.
	var buf bytes.Buffer
	require.NoError(t, WriteMarkdown(&buf, sampleReport(), MarkdownMeta{Scale: FullScale}))
	require.NotContains(t, buf.String(), "Processor time per operation")
}

// markdownSection writes r's page and returns it with the section under the
// heading, which it must have, up to the next heading.
func markdownSection(t *testing.T, r *Report, heading string) (md, section string) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteMarkdown(&buf, r, MarkdownMeta{Scale: FullScale}))
	md = buf.String()
	_, section, found := strings.Cut(md, "\n## "+heading+"\n")
	require.True(t, found, "no section %q", heading)
	section, _, _ = strings.Cut(section, "\n## ")
	return md, section
}
