package loadtest

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one operation of a scenario. worker is the client's number and i
// the operation's number in the scenario (0, 1, 2, … across all clients),
// e.g. to pick a distinct user. A returned error counts as a failed
// operation; its latency is not recorded.
type Op func(ctx context.Context, worker int, i int64) error

// Load describes a closed-loop load: Clients workers each running Op
// back to back until Duration has passed or MaxOps operations were
// started, whichever comes first.
type Load struct {
	Name     string
	Clients  int
	Duration time.Duration
	// MaxOps bounds the operations; 0 means Duration alone bounds them.
	MaxOps int64
	// WAL, if set, reads PostgreSQL's WAL position before and after the
	// load, to report the WAL written per operation.
	WAL WALFunc
	// Processes, if set, names the processes whose processor time the
	// load reports by group (see ProcessFunc); without it only the
	// machine's and the load test's own are reported.
	Processes ProcessFunc
	// Settle, if set, waits after the operations end for the work they
	// left behind (webhook deliveries): that work counts in the load's
	// processor time and WAL, not in its elapsed time.
	Settle func(ctx context.Context) error
}

// Outcome is what a load measured.
type Outcome struct {
	Ops     int64
	Errors  int64
	Elapsed time.Duration
	Lat     *Latencies
	// FirstError is the first error seen, for the log (Settle's, if it
	// failed, when the operations had none).
	FirstError error
	// CPU is the processor time the machine spent meanwhile, and until
	// Settle returned (nil where /proc cannot be read).
	CPU *CPUUse
	// WALBytes is the WAL PostgreSQL wrote meanwhile, and until Settle
	// returned (nil when the load had no WAL reader or it failed).
	WALBytes *int64
}

// Result converts the outcome into a report entry.
func (o Outcome) Result(clients int) *ScenarioResult {
	secs := o.Elapsed.Seconds()
	rps := 0.0
	if secs > 0 {
		rps = float64(o.Ops) / secs
	}
	r := &ScenarioResult{
		RPS: round(rps, 1), P50MS: o.Lat.QuantileMS(50), P95MS: o.Lat.QuantileMS(95), P99MS: o.Lat.QuantileMS(99),
		MaxMS: o.Lat.MaxMS(), Errors: o.Errors, Ops: o.Ops, Clients: clients, Seconds: round(secs, 2),
	}
	if o.CPU != nil {
		r.CPUBusy, r.CPUMicrosPerOp = round(o.CPU.Busy, 3), o.CPU.perOp(o.Ops)
	}
	r.WALBytesPerOp = walPerOp(o.WALBytes, o.Ops)
	return r
}

// Add adds o2, a load run after o, to o: their operations, errors,
// latencies, elapsed times, processor time and WAL, as if one load. o2 is
// left as it was.
func (o *Outcome) Add(o2 Outcome) {
	if o.Lat == nil {
		*o = o2
		o.Lat = NewLatencies()
		o.Lat.Merge(o2.Lat)
		return
	}
	o.CPU = o.CPU.add(o.Elapsed, o2.CPU, o2.Elapsed)
	if o.WALBytes != nil && o2.WALBytes != nil {
		sum := *o.WALBytes + *o2.WALBytes
		o.WALBytes = &sum
	} else {
		o.WALBytes = nil
	}
	o.Ops, o.Errors, o.Elapsed = o.Ops+o2.Ops, o.Errors+o2.Errors, o.Elapsed+o2.Elapsed
	o.Lat.Merge(o2.Lat)
	if o.FirstError == nil {
		o.FirstError = o2.FirstError
	}
}

// Drive runs op under load l, printing a progress line to progress about
// once a second. It stops early when ctx ends.
func Drive(ctx context.Context, l Load, progress io.Writer, op Op) Outcome {
	wal0, walOK := sampleWAL(ctx, l.WAL)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	var started, ok, failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	hists := make([]*Latencies, l.Clients)
	var wg sync.WaitGroup
	// The clock runs between the processor-time samples, which read /proc
	// for a few milliseconds.
	cpu0 := sampleCPU(ctx, l.Processes)
	begin := time.Now()
	for w := range l.Clients {
		hists[w] = NewLatencies()
		wg.Go(func() {
			h := hists[w]
			for ctx.Err() == nil {
				i := started.Add(1) - 1
				if l.MaxOps > 0 && i >= l.MaxOps {
					return
				}
				t0 := time.Now()
				if err := op(ctx, w, i); err != nil {
					if ctx.Err() != nil {
						return // cut short by the deadline: neither success nor failure
					}
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				h.Record(time.Since(t0))
				ok.Add(1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	p := newProgress(progress, l.Name)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			p.line(time.Since(begin), ok.Load(), failed.Load())
		}
	}
	elapsed := time.Since(begin)
	if l.Settle != nil {
		if err := l.Settle(parent); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: settle: %w", l.Name, err)
		}
	}
	cpu := sampleCPU(parent, l.Processes).since(cpu0)
	all := NewLatencies()
	for _, h := range hists {
		all.Merge(h)
	}
	out := Outcome{Ops: ok.Load(), Errors: failed.Load(), Elapsed: elapsed, Lat: all, FirstError: firstErr, CPU: cpu}
	if wal1, ok := sampleWAL(parent, l.WAL); ok && walOK {
		written := wal1 - wal0
		out.WALBytes = &written
	}
	p.done(out)
	return out
}

// progress prints one live line per scenario: rewritten in place on a
// terminal, one line per tick elsewhere.
type progress struct {
	w    io.Writer
	name string
	tty  bool
}

func newProgress(w io.Writer, name string) *progress {
	return &progress{w: w, name: name, tty: isTerminal(w)}
}

func (p *progress) line(elapsed time.Duration, ok, failed int64) {
	s := fmt.Sprintf("%-16s %5.1fs  ok=%-8d errors=%-6d %8.0f/s", p.name, elapsed.Seconds(), ok, failed,
		float64(ok)/max(elapsed.Seconds(), 1e-9))
	if p.tty {
		fmt.Fprint(p.w, "\r"+s)
		return
	}
	fmt.Fprintln(p.w, s)
}

func (p *progress) done(o Outcome) {
	if p.tty {
		fmt.Fprint(p.w, "\r")
	}
	r := o.Result(0)
	fmt.Fprintf(p.w, "%-16s done  %.1fs  ok=%d errors=%d  %.0f/s  p50=%.2fms p95=%.2fms p99=%.2fms max=%.2fms\n",
		p.name, o.Elapsed.Seconds(), o.Ops, o.Errors, r.RPS, r.P50MS, r.P95MS, r.P99MS, r.MaxMS)
	if c := r.CPUMicrosPerOp; c != nil {
		fmt.Fprintf(p.w, "%-16s cpu   %.0f%% of the cores busy; µs per op: machine %.0f, capacityd %.0f, postgres %.0f, redis %.0f, loadtest %.0f\n",
			p.name, 100*r.CPUBusy, c[CPUMachine], c[CPUCapacityd], c[CPUPostgres], c[CPURedis], c[CPULoadTest])
	}
	if w := r.WALBytesPerOp; w != nil {
		fmt.Fprintf(p.w, "%-16s wal   %.0f bytes per op, %.1f MB in all\n", p.name, *w, float64(*o.WALBytes)/1e6)
	}
	if o.FirstError != nil {
		fmt.Fprintf(p.w, "%-16s first error: %v\n", p.name, o.FirstError)
	}
}
