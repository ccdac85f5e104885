package loadtest

import (
	"bytes"
	"context"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the times in /proc (USER_HZ, 100 on Linux).
const clockTicks = 100

// CPU groups: the processes whose processor time a scenario reports.
const (
	CPUMachine   = "machine"
	CPUCapacityd = "capacityd"
	CPUPostgres  = "postgres"
	CPURedis     = "redis"
	CPULoadTest  = "loadtest"
)

// processNames are the command names a group's processes must have: a
// process id of PostgreSQL or Redis on another host (or in a container's
// own process ids) names nothing or some unrelated process here, which is
// then not counted. A capacityd the load test started is its own child,
// whatever its binary's name.
var processNames = map[string]string{
	CPUPostgres: "postgres",
	CPURedis:    "redis-server",
}

// ProcessFunc returns the processes that serve a load, each with its
// group (CPUCapacityd, CPUPostgres, CPURedis), by process id. It is read
// at both ends of the load, so a process that starts meanwhile counts from
// its start; one that ends meanwhile is not counted.
type ProcessFunc func(ctx context.Context) (map[int]string, error)

// processSampleTimeout bounds one reading of a load's processes.
const processSampleTimeout = 5 * time.Second

// procKey names one process over time: a process id may be used again
// once its process ended.
type procKey struct {
	pid   int
	start int64
}

// procTime is a process's group and processor time, in clock ticks.
type procTime struct {
	group string
	ticks int64
}

// cpuSample is the processor time the machine, this process and each of
// the load's processes had spent at one moment, in clock ticks; total is
// the machine's busy and idle time over all cores. The zero sample means
// /proc could not be read; procs is nil when the load named no processes
// or they could not be read.
type cpuSample struct {
	total int64
	busy  int64
	self  int64
	procs map[procKey]procTime
}

// CPUUse is the processor time a load cost, between two samples.
type CPUUse struct {
	// Busy is the fraction of all cores that were busy.
	Busy float64
	// Seconds is the processor time of the whole machine (CPUMachine),
	// of this process (CPULoadTest, with any receiver or stream client
	// the scenario runs) and of each group of the load's processes
	// (CPUCapacityd, CPUPostgres, CPURedis) that was measured.
	Seconds map[string]float64
}

// sampleCPU reads /proc: the machine's busy and total time, this
// process's, and that of each process f names (none when f is nil). Only a
// process's own time counts, not that of its ended children: PostgreSQL's
// postmaster collects every database's ended backends.
func sampleCPU(ctx context.Context, f ProcessFunc) cpuSample {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	busy, total, ok := parseProcStat(stat)
	if !ok {
		return cpuSample{}
	}
	s := cpuSample{total: total, busy: busy}
	if _, own, _, ok := readPidStat(os.Getpid()); ok {
		s.self = own
	}
	if f == nil {
		return s
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), processSampleTimeout)
	defer cancel()
	pids, err := f(ctx)
	if err != nil {
		return s
	}
	s.procs = make(map[procKey]procTime, len(pids))
	for pid, group := range pids {
		comm, own, start, ok := readPidStat(pid)
		if !ok || (processNames[group] != "" && comm != processNames[group]) {
			continue // ended meanwhile, or not a process of this machine
		}
		s.procs[procKey{pid, start}] = procTime{group, own}
	}
	return s
}

// readPidStat reads /proc/<pid>/stat: the command name, the processor
// time of the process itself and when it started.
func readPidStat(pid int) (comm string, own, start int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0, false
	}
	st, ok := parsePidStat(b)
	return st.comm, st.own, st.start, ok
}

// parseProcStat returns the busy and the total time of all cores from
// /proc/stat's first line (user nice system idle iowait irq softirq steal
// …; guest time is part of user time).
func parseProcStat(b []byte) (busy, total int64, ok bool) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		v[i] = n
	}
	idle := v[3] + v[4]
	busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return busy, busy + idle, true
}

// pidStat is what the load test reads of /proc/<pid>/stat.
type pidStat struct {
	comm string
	// own is the process's processor time (utime + stime), in clock
	// ticks; that of its ended children (cutime + cstime) is not counted.
	own int64
	// start is when it started, in clock ticks after boot.
	start int64
}

// parsePidStat parses /proc/<pid>/stat. The name is in parentheses and may
// hold spaces and parentheses.
func parsePidStat(b []byte) (pidStat, bool) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return pidStat{}, false
	}
	f := strings.Fields(string(b[closing+1:]))
	// f[0] is the state (field 3); utime is field 14, stime field 15,
	// starttime field 22.
	if len(f) < 20 {
		return pidStat{}, false
	}
	var v [3]int64
	for i, s := range []string{f[11], f[12], f[19]} {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return pidStat{}, false
		}
		v[i] = n
	}
	return pidStat{comm: string(b[open+1 : closing]), own: v[0] + v[1], start: v[2]}, true
}

// since returns what the machine spent from s0 to s, or nil when either
// sample is missing. The groups of the load's processes are there only
// when both samples read them: a process in s and not in s0 started
// meanwhile and counts from its start.
func (s cpuSample) since(s0 cpuSample) *CPUUse {
	if s.total == 0 || s0.total == 0 || s.total <= s0.total {
		return nil
	}
	ticks := map[string]int64{CPUMachine: s.busy - s0.busy, CPULoadTest: s.self - s0.self}
	if s.procs != nil && s0.procs != nil {
		for k, p := range s.procs {
			ticks[p.group] += p.ticks - s0.procs[k].ticks
		}
	}
	u := &CPUUse{Seconds: make(map[string]float64, len(ticks))}
	for g, t := range ticks {
		u.Seconds[g] = float64(max(0, t)) / clockTicks
	}
	u.Busy = float64(s.busy-s0.busy) / float64(s.total-s0.total)
	return u
}

// add returns the processor time of two loads together, u lasting d and
// u2 lasting d2: their times summed, their busy shares weighted by their
// durations; nil when either is missing.
func (u *CPUUse) add(d time.Duration, u2 *CPUUse, d2 time.Duration) *CPUUse {
	if u == nil || u2 == nil || d+d2 <= 0 {
		return nil
	}
	sum := &CPUUse{Seconds: maps.Clone(u.Seconds)}
	for g, s := range u2.Seconds {
		sum.Seconds[g] += s
	}
	sum.Busy = (u.Busy*d.Seconds() + u2.Busy*d2.Seconds()) / (d + d2).Seconds()
	return sum
}

// perOp returns the processor time per operation, in microseconds, of
// the machine and of each group.
func (u *CPUUse) perOp(ops int64) map[string]float64 {
	if u == nil || ops <= 0 {
		return nil
	}
	out := make(map[string]float64, len(u.Seconds))
	for g, s := range u.Seconds {
		out[g] = round(s*1e6/float64(ops), 0)
	}
	return out
}
