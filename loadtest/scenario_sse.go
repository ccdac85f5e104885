package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// sseRounds is the number of signups whose fan-out is timed; they are
// spaced wider than the stream's 100 ms coalescing window.
const (
	sseRounds     = 10
	sseRoundSpace = 300 * time.Millisecond
)

// sseFanout opens 1,000 streams of one new activity, then signs a user up
// sseRounds times and measures, for every client, the time from sending
// the signup to receiving the event that shows it. It also records the
// service's RSS with every stream open and the transactions the streams
// caused in the bench database while they connected.
func (b *bench) sseFanout(ctx context.Context) error {
	id := b.sseActivity
	if id == "" {
		var err error
		if id, err = b.prepareSSE(ctx); err != nil {
			return err
		}
		if err := sleep(ctx, b.cfg.StatsIdleWait); err != nil {
			return err
		}
	}
	toks, err := b.tokens(ScenarioSSEFanout, sseRounds)
	if err != nil {
		return err
	}
	tx0, err := b.mon.Transactions(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newFanout(sseRounds)
	tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1, ResponseHeaderTimeout: 15 * time.Second, DisableCompression: true}
	defer tr.CloseIdleConnections()
	streams := client.New(b.api.BaseURL, "", &http.Client{Transport: tr})
	var wg sync.WaitGroup
	for range b.cfg.SSEClients {
		wg.Go(func() { f.client(ctx, streams, id) })
	}
	connectDeadline := time.Now().Add(30 * time.Second)
	for f.ready.Load()+f.failed.Load() < int64(b.cfg.SSEClients) && time.Now().Before(connectDeadline) {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	fmt.Fprintf(b.log, "%-16s %d streams open, %d failed\n", ScenarioSSEFanout, f.ready.Load(), f.failed.Load())
	if f.ready.Load() == 0 {
		cancel()
		wg.Wait()
		return fmt.Errorf("no stream opened: %v", f.firstError())
	}
	if text, err := b.api.Text(ctx, "/metrics"); err == nil {
		if rss, ok := SumMetric(text, "process_resident_memory_bytes"); ok {
			b.report.Checks[CheckSSERSSMB] = round(rss/(1<<20), 1)
		}
	}
	if err := sleep(ctx, statsFlushWait); err != nil {
		return err
	}
	if tx1, err := b.mon.Transactions(ctx); err == nil {
		b.report.Checks[CheckSSEStreamPGQueries] = tx1 - tx0
	}
	begin := time.Now()
	for r := range sseRounds {
		f.sent(r + 1)
		if err := b.signupAdmitted(ctx, toks[r], id); err != nil {
			f.fail(err)
		}
		if err := sleep(ctx, sseRoundSpace); err != nil {
			return err
		}
	}
	// Let the last events arrive, then hang up.
	waitUntil := time.Now().Add(3 * time.Second)
	want := f.ready.Load() * sseRounds
	for f.delivered.Load() < want && time.Now().Before(waitUntil) {
		_ = sleep(ctx, 20*time.Millisecond)
	}
	elapsed := time.Since(begin)
	cancel()
	wg.Wait()
	lat := f.latencies()
	missing := want - f.delivered.Load()
	res := Outcome{Ops: f.delivered.Load(), Errors: f.failed.Load() + max(missing, 0), Elapsed: elapsed, Lat: lat}.Result(b.cfg.SSEClients)
	res.Note = fmt.Sprintf("%d streams open, %d signups %s apart; rps is events delivered per second",
		f.ready.Load(), sseRounds, sseRoundSpace)
	b.report.Scenarios[ScenarioSSEFanout] = res
	b.report.Checks[CheckSSEClients] = f.ready.Load()
	b.report.Checks[CheckSSEP99MS] = res.P99MS
	fmt.Fprintf(b.log, "%-16s delivered %d of %d events, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		ScenarioSSEFanout, f.delivered.Load(), want, res.P50MS, res.P99MS, res.MaxMS)
	return nil
}

// prepareSSE creates the stream activity and builds its display counter
// with a read, so connecting streams need no COUNT. The statistics of
// these writes must reach pg_stat_database (up to 10 s) before the
// streams' transactions are counted.
func (b *bench) prepareSSE(ctx context.Context) (string, error) {
	a, err := b.api.WithToken(b.admin).CreateActivity(ctx, client.NewActivity{Title: "Stream fan-out " + b.nonce, Capacity: 1000000})
	if err != nil {
		return "", fmt.Errorf("loadtest: create activity: %w", err)
	}
	return a.ID, b.warmSeats(ctx, a.ID)
}

// fanout is the shared state of the stream clients.
type fanout struct {
	base      time.Time
	sentAt    []atomic.Int64 // nanoseconds since base when round r's signup was sent; 0: not yet
	ready     atomic.Int64
	failed    atomic.Int64
	delivered atomic.Int64

	mu    sync.Mutex
	hists []*Latencies
	err   error
}

func newFanout(rounds int) *fanout {
	return &fanout{base: time.Now(), sentAt: make([]atomic.Int64, rounds+1)}
}

func (f *fanout) sent(round int) { f.sentAt[round].Store(int64(time.Since(f.base)) | 1) }

func (f *fanout) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *fanout) firstError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fanout) latencies() *Latencies {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := NewLatencies()
	for _, h := range f.hists {
		all.Merge(h)
	}
	return all
}

// client reads one stream. The first event sets the starting count; an
// event showing taken = start + r delivers rounds up to r (coalesced
// events deliver several at once).
func (f *fanout) client(ctx context.Context, api *client.Client, activity string) {
	h := NewLatencies()
	defer func() {
		f.mu.Lock()
		f.hists = append(f.hists, h)
		f.mu.Unlock()
	}()
	stream, err := api.StreamSeats(ctx, activity)
	if err != nil {
		if ctx.Err() == nil {
			f.failed.Add(1)
			f.fail(err)
		}
		return
	}
	defer stream.Close()
	start, got := -1, 0
	for {
		s, err := stream.Next()
		if err != nil {
			return
		}
		now := int64(time.Since(f.base))
		if start < 0 {
			start = s.Taken
			f.ready.Add(1)
			continue
		}
		for r := got + 1; r <= s.Taken-start && r < len(f.sentAt); r++ {
			if at := f.sentAt[r].Load(); at != 0 {
				h.Record(time.Duration(now - at))
				f.delivered.Add(1)
				got = r
			}
		}
	}
}
