// Package groupcommit combines concurrent requests into batches handled by
// one call, with at most one batch in flight per key.
//
// Requests that arrive while their key's batch is being flushed queue up
// and are all taken by the next flush, so batches grow with load: one
// request alone costs one flush, a thousand concurrent ones cost a handful.
// A flush may serve several keys at once (Options.MaxKeys), and the number
// of flushes in flight may be bounded (Options.MaxFlushes): requests for
// many keys then share flushes, the way requests for one key share a batch.
// Seat changes (one transaction for the queued commands of many activities)
// and note counters (one upsert per note) are built on it.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrClosed is returned by Submit after Close has been called.
var ErrClosed = errors.New("groupcommit: closed")

var errWrongResults = errors.New("groupcommit: flush returned a wrong number of results")

// ErrWithdrawn is returned by Submit when its context ended before a flush
// took the request: the request was never flushed.
var ErrWithdrawn = errors.New("groupcommit: withdrawn before it was flushed")

// Batch is the requests of one key taken by a flush, in the order they were
// submitted. The flush sets Results (one per request, in order) or Err,
// which fails every request of the batch. Errs, when set (by Isolate), has
// one entry per request: a non-nil one fails its request alone, whose
// Result is then unset.
type Batch[K comparable, Req, Res any] struct {
	Key     K
	Reqs    []Req
	Results []Res
	Err     error
	Errs    []error
}

// FlushFunc handles one flush: the batches of one or more keys (each key
// once). An error fails every request of every batch.
type FlushFunc[K comparable, Req, Res any] func(ctx context.Context, batches []*Batch[K, Req, Res]) error

// PerKey adapts a function that handles the batch of one key to a
// FlushFunc, for Groups whose flushes serve one key each (MaxKeys 1).
func PerKey[K comparable, Req, Res any](f func(ctx context.Context, key K, reqs []Req) ([]Res, error)) FlushFunc[K, Req, Res] {
	return func(ctx context.Context, batches []*Batch[K, Req, Res]) error {
		for _, b := range batches {
			b.Results, b.Err = f(ctx, b.Key, b.Reqs)
		}
		return nil
	}
}

// Options tune a Group.
type Options struct {
	// MaxBatch caps the requests one flush takes, over all its keys.
	// Default 1000.
	MaxBatch int
	// MaxKeys caps the keys one flush serves. Default 1.
	MaxKeys int
	// MaxFlushes caps the flushes in flight. Default 0: no cap, every key
	// with queued requests has its flush.
	MaxFlushes int
	// FlushTimeout bounds each flush's context. Default 10s.
	FlushTimeout time.Duration
	// GatherAt and GatherFor make a busy key gather before its next
	// flush, as PostgreSQL's commit_delay does when commit_siblings
	// transactions are active. After a flush that took at least GatherAt
	// requests of a key, the key's next flush waits until as many requests
	// as that flush took have queued beyond those already waiting (the
	// clients just answered, back with their next requests) or until
	// GatherFor has passed, whichever comes first. With one flush in
	// flight per key, two consecutive batches of N clients otherwise share
	// them: a crowd's batches stay near N/2. (The requests counted as
	// already waiting are those queued when the flush returned, before
	// its requests are answered.) A key that already has as many requests
	// queued (at most MaxBatch are waited for) does not gather. Default 0:
	// never gather.
	GatherAt  int
	GatherFor time.Duration
	// GatherEnded, if set, is told how each gather ended: GatherFilled or
	// GatherDeadline (Close ends gathers untold). It is called with the
	// Group's lock held and must not call the Group.
	GatherEnded func(ended string)
	// Rest, if set, is told how long a flush took and answers how long
	// its keys wait after it before their next flush (zero or less: not
	// at all). Their requests are answered first; what queues meanwhile
	// waits for the next flush, which the rest does not hold after Close.
	// A rest of k times took keeps a busy key's flushes to 1/(k+1) of the
	// time, which leaves the processor to other work: a door's scans yield
	// to seat changes this way. The flush's place among MaxFlushes is kept
	// while it rests.
	Rest func(took time.Duration) time.Duration
}

// How a gather ended, as Options.GatherEnded is told; metrics label their
// counts of gathers with them.
const (
	// GatherFilled: as many requests as it waited for queued.
	GatherFilled = "filled"
	// GatherDeadline: GatherFor passed first.
	GatherDeadline = "deadline"
)

// GatherEndings are every way a gather ends, for metrics that create their
// labelled series at start.
var GatherEndings = []string{GatherFilled, GatherDeadline}

// Group batches requests per key. The zero value is not usable; call New.
type Group[K comparable, Req, Res any] struct {
	flush FlushFunc[K, Req, Res]
	opts  Options

	mu       sync.Mutex
	queues   map[K]*queue[Req, Res] // keys with queued requests or a flush in flight
	ready    []K                    // keys with queued requests and no flush in flight, oldest first
	inFlight int                    // flushes in flight
	closed   bool
	closing  chan struct{} // closed by Close: rests end
	wg       sync.WaitGroup
}

type outcome[Res any] struct {
	res Res
	err error
}

type item[Req, Res any] struct {
	req  Req
	done chan outcome[Res]
}

type queue[Req, Res any] struct {
	items     []*item[Req, Res]
	flushing  bool // a flush of the key is in flight
	ready     bool // the key is in Group.ready
	gathering bool // the key waits for want requests, or its timer, before it is ready
	want      int
	gathers   int // gathers started, so that a stale timer does nothing
	timer     *time.Timer
}

// New returns a Group that hands batches to flush.
func New[K comparable, Req, Res any](flush FlushFunc[K, Req, Res], opts Options) *Group[K, Req, Res] {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1000
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = 1
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 10 * time.Second
	}
	return &Group[K, Req, Res]{flush: flush, opts: opts, queues: make(map[K]*queue[Req, Res]), closing: make(chan struct{})}
}

// Submit queues req under key and waits for the result of the flush that
// takes it. When ctx ends while req is still queued, req is withdrawn:
// Submit returns ErrWithdrawn (wrapping ctx's error) and no flush ever sees
// it. Once a flush has taken req, Submit waits for its outcome whatever ctx
// says, so that an outcome (committed or not) is always reported; each
// flush is bounded by FlushTimeout. Submit returns ErrClosed after Close.
func (g *Group[K, Req, Res]) Submit(ctx context.Context, key K, req Req) (Res, error) {
	it := &item[Req, Res]{req: req, done: make(chan outcome[Res], 1)}

	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		var zero Res
		return zero, ErrClosed
	}
	q := g.queues[key]
	if q == nil {
		q = &queue[Req, Res]{}
		g.queues[key] = q
	}
	q.items = append(q.items, it)
	switch {
	case q.gathering:
		if len(q.items) >= q.want {
			g.gatherEnded(GatherFilled)
			g.endGather(key, q)
		}
	case !q.flushing && !q.ready:
		q.ready = true
		g.ready = append(g.ready, key)
	}
	g.dispatch()
	g.mu.Unlock()

	select {
	case o := <-it.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	if g.withdraw(key, it) {
		var zero Res
		return zero, fmt.Errorf("%w: %w", ErrWithdrawn, context.Cause(ctx))
	}
	o := <-it.done
	return o.res, o.err
}

// Queued returns how many requests are queued under key and not yet taken
// by a flush. It is a point-in-time reading for tests and diagnostics
// (for one, a test that must know its requests are waiting before it lets
// a blocked flush go); it takes the group's lock.
func (g *Group[K, Req, Res]) Queued(key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.queues[key]; q != nil {
		return len(q.items)
	}
	return 0
}

// withdraw removes it from key's queue if no flush has taken it yet.
func (g *Group[K, Req, Res]) withdraw(key K, it *item[Req, Res]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[key]
	if q == nil {
		return false
	}
	i := slices.Index(q.items, it)
	if i < 0 {
		return false
	}
	q.items = slices.Delete(q.items, i, i+1)
	if len(q.items) == 0 && q.ready {
		g.ready = slices.DeleteFunc(g.ready, func(k K) bool { return k == key })
		q.ready = false
		if !q.flushing {
			delete(g.queues, key)
		}
	}
	return true
}

// gather makes key, whose flush has just ended, wait until want requests
// are queued, or for GatherFor. g.mu is held.
func (g *Group[K, Req, Res]) gather(key K, q *queue[Req, Res], want int) {
	q.gathering = true
	q.want = want
	q.gathers++
	n := q.gathers
	q.timer = time.AfterFunc(g.opts.GatherFor, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.queues[key] == q && q.gathering && q.gathers == n {
			g.gatherEnded(GatherDeadline)
			g.endGather(key, q)
			g.dispatch()
		}
	})
}

// gatherEnded tells Options.GatherEnded how a gather ended.
func (g *Group[K, Req, Res]) gatherEnded(ended string) {
	if g.opts.GatherEnded != nil {
		g.opts.GatherEnded(ended)
	}
}

// endGather ends key's gather: the key is ready if requests wait, and
// forgotten otherwise. g.mu is held; the caller dispatches.
func (g *Group[K, Req, Res]) endGather(key K, q *queue[Req, Res]) {
	q.gathering = false
	q.timer.Stop()
	if len(q.items) == 0 {
		delete(g.queues, key)
		return
	}
	q.ready = true
	g.ready = append(g.ready, key)
}

// dispatch starts flushes while there are ready keys and room for a
// flush. g.mu is held.
func (g *Group[K, Req, Res]) dispatch() {
	for len(g.ready) > 0 && (g.opts.MaxFlushes == 0 || g.inFlight < g.opts.MaxFlushes) {
		var batches []*Batch[K, Req, Res]
		var taken [][]*item[Req, Res]
		room := g.opts.MaxBatch
		for len(g.ready) > 0 && len(batches) < g.opts.MaxKeys && room > 0 {
			key := g.ready[0]
			g.ready = g.ready[1:]
			q := g.queues[key]
			q.ready, q.flushing = false, true
			n := min(len(q.items), room)
			its := q.items[:n:n]
			q.items = append([]*item[Req, Res](nil), q.items[n:]...)
			room -= n
			b := &Batch[K, Req, Res]{Key: key, Reqs: make([]Req, n)}
			for i, it := range its {
				b.Reqs[i] = it.req
			}
			batches = append(batches, b)
			taken = append(taken, its)
		}
		g.inFlight++
		g.wg.Add(1)
		go g.run(batches, taken)
	}
}

// run flushes batches, answers their requests, and readies their keys
// again if requests queued meanwhile.
func (g *Group[K, Req, Res]) run(batches []*Batch[K, Req, Res], taken [][]*item[Req, Res]) {
	defer g.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), g.opts.FlushTimeout)
	began := time.Now()
	err := g.flush(ctx, batches)
	took := time.Since(began)
	cancel()
	// What queued during the flush, before anyone of it is answered and
	// can queue again: a gather waits for that many more.
	var queued []int
	if g.opts.GatherFor > 0 && g.opts.GatherAt > 0 {
		queued = make([]int, len(batches))
		g.mu.Lock()
		for i, b := range batches {
			queued[i] = len(g.queues[b.Key].items)
		}
		g.mu.Unlock()
	}
	for i, b := range batches {
		berr := firstErr(err, b.Err)
		if berr == nil && len(b.Results) != len(b.Reqs) {
			berr = errWrongResults
		}
		for j, it := range taken[i] {
			switch {
			case berr != nil:
				it.done <- outcome[Res]{err: berr}
			case b.Errs != nil && b.Errs[j] != nil:
				it.done <- outcome[Res]{err: b.Errs[j]}
			default:
				it.done <- outcome[Res]{res: b.Results[j]}
			}
		}
	}
	if g.opts.Rest != nil {
		g.rest(g.opts.Rest(took))
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	for i, b := range batches {
		q := g.queues[b.Key]
		q.flushing = false
		if queued != nil && !g.closed && len(b.Reqs) >= g.opts.GatherAt {
			// Unless as many already wait (the batch cap can make that so).
			if want := min(queued[i]+len(b.Reqs), g.opts.MaxBatch); len(q.items) < want {
				g.gather(b.Key, q, want)
				continue
			}
		}
		if len(q.items) == 0 {
			delete(g.queues, b.Key)
			continue
		}
		q.ready = true
		g.ready = append(g.ready, b.Key)
	}
	g.dispatch()
}

// rest waits for d, or until Close.
func (g *Group[K, Req, Res]) rest(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-g.closing:
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Close refuses new requests and waits until every queued request has been
// flushed and answered, or until ctx ends.
func (g *Group[K, Req, Res]) Close(ctx context.Context) error {
	g.mu.Lock()
	if !g.closed {
		close(g.closing)
	}
	g.closed = true
	for key, q := range g.queues {
		if q.gathering {
			g.endGather(key, q)
		}
	}
	g.dispatch()
	g.mu.Unlock()

	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
