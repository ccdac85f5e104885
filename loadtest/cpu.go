package loadtest

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
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

// cpuGroups maps a process's command name to its group.
var cpuGroups = map[string]string{
	"capacityd":    CPUCapacityd,
	"postgres":     CPUPostgres,
	"redis-server": CPURedis,
}

// cpuSample is the processor time the machine and each group had spent at
// one moment, in clock ticks; total is the machine's busy and idle time
// over all cores. The zero sample means /proc could not be read.
type cpuSample struct {
	total  int64
	groups map[string]int64
}

// CPUUse is the processor time a load cost, between two samples.
type CPUUse struct {
	// Busy is the fraction of all cores that were busy.
	Busy float64
	// Seconds is the processor time of the whole machine and of each
	// group (CPUCapacityd, CPUPostgres, CPURedis, CPULoadTest: this
	// process, with any receiver or stream client the scenario runs).
	Seconds map[string]float64
}

// sampleCPU reads /proc: the machine's busy and total time, and each
// group's processes' time. A group's time includes that of its processes'
// children that ended (PostgreSQL's postmaster collects its backends'),
// so backends that close during a load still count.
func sampleCPU() cpuSample {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	busy, total, ok := parseProcStat(stat)
	if !ok {
		return cpuSample{}
	}
	s := cpuSample{total: total, groups: map[string]int64{CPUMachine: busy}}
	self := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		comm, own, children, ok := parsePidStat(b)
		if !ok {
			continue
		}
		// This process's children are the capacityd instances it starts,
		// counted as capacityd while they run.
		if filepath.Base(d) == self {
			s.groups[CPULoadTest] += own
		} else if g, ok := cpuGroups[comm]; ok {
			s.groups[g] += own + children
		}
	}
	return s
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

// parsePidStat returns a process's command name, its own processor time
// (utime + stime) and that of its ended children (cutime + cstime), from
// /proc/<pid>/stat. The name is in parentheses and may hold spaces.
func parsePidStat(b []byte) (comm string, own, children int64, ok bool) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return "", 0, 0, false
	}
	comm = string(b[open+1 : closing])
	f := strings.Fields(string(b[closing+1:]))
	// f[0] is the state (field 3); utime is field 14, cstime field 17.
	if len(f) < 15 {
		return "", 0, 0, false
	}
	var v [4]int64
	for i, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", 0, 0, false
		}
		v[i] = n
	}
	return comm, v[0] + v[1], v[2] + v[3], true
}

// since returns what the machine spent from s0 to s, or nil when either
// sample is missing.
func (s cpuSample) since(s0 cpuSample) *CPUUse {
	if s.total == 0 || s0.total == 0 || s.total <= s0.total {
		return nil
	}
	u := &CPUUse{Seconds: make(map[string]float64, len(s.groups))}
	for g, t := range s.groups {
		u.Seconds[g] = float64(max(0, t-s0.groups[g])) / clockTicks
	}
	u.Busy = float64(s.groups[CPUMachine]-s0.groups[CPUMachine]) / float64(s.total-s0.total)
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
