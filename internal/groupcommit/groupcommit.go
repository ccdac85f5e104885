// Package groupcommit combines concurrent requests for the same key into
// batches handled by one call, with at most one batch in flight per key.
//
// Requests that arrive while a key's batch is being flushed queue up and are
// all taken by the next flush, so batches grow with load: one request alone
// costs one flush, a thousand concurrent ones cost a handful. Both seat
// admission (one transaction per activity batch) and note counters (one
// upsert per note batch) are built on it.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by Submit after Close has been called.
var ErrClosed = errors.New("groupcommit: closed")

// FlushFunc handles one batch of requests for key and returns one result per
// request, in order. An error fails every request of the batch.
type FlushFunc[K comparable, Req, Res any] func(ctx context.Context, key K, reqs []Req) ([]Res, error)

// Options tune a Group.
type Options struct {
	// MaxBatch caps how many requests one flush takes. Default 1000.
	MaxBatch int
	// FlushTimeout bounds each flush's context. Default 10s.
	FlushTimeout time.Duration
}

// Group batches requests per key. The zero value is not usable; call New.
type Group[K comparable, Req, Res any] struct {
	flush        FlushFunc[K, Req, Res]
	maxBatch     int
	flushTimeout time.Duration

	mu     sync.Mutex
	queues map[K]*queue[Req, Res]
	closed bool
	wg     sync.WaitGroup
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
	items []*item[Req, Res]
}

// New returns a Group that hands batches to flush.
func New[K comparable, Req, Res any](flush FlushFunc[K, Req, Res], opts Options) *Group[K, Req, Res] {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1000
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 10 * time.Second
	}
	return &Group[K, Req, Res]{
		flush:        flush,
		maxBatch:     opts.MaxBatch,
		flushTimeout: opts.FlushTimeout,
		queues:       make(map[K]*queue[Req, Res]),
	}
}

// Submit queues req under key and waits for the result of the batch that
// takes it. It does not give up when ctx ends: once queued, a request's
// outcome (committed or not) is always reported, and each flush is bounded
// by FlushTimeout. Submit returns ErrClosed after Close.
func (g *Group[K, Req, Res]) Submit(_ context.Context, key K, req Req) (Res, error) {
	it := &item[Req, Res]{req: req, done: make(chan outcome[Res], 1)}

	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		var zero Res
		return zero, ErrClosed
	}
	q, running := g.queues[key]
	if !running {
		q = &queue[Req, Res]{}
		g.queues[key] = q
		g.wg.Add(1)
		go g.run(key, q)
	}
	q.items = append(q.items, it)
	g.mu.Unlock()

	o := <-it.done
	return o.res, o.err
}

// run flushes key's queue until it is empty, then forgets the key.
func (g *Group[K, Req, Res]) run(key K, q *queue[Req, Res]) {
	defer g.wg.Done()
	for {
		g.mu.Lock()
		if len(q.items) == 0 {
			delete(g.queues, key)
			g.mu.Unlock()
			return
		}
		n := min(len(q.items), g.maxBatch)
		batch := q.items[:n:n]
		q.items = append([]*item[Req, Res](nil), q.items[n:]...)
		g.mu.Unlock()

		g.flushBatch(key, batch)
	}
}

func (g *Group[K, Req, Res]) flushBatch(key K, batch []*item[Req, Res]) {
	reqs := make([]Req, len(batch))
	for i, it := range batch {
		reqs[i] = it.req
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.flushTimeout)
	defer cancel()

	res, err := g.flush(ctx, key, reqs)
	if err == nil && len(res) != len(batch) {
		err = errors.New("groupcommit: flush returned a wrong number of results")
	}
	for i, it := range batch {
		if err != nil {
			it.done <- outcome[Res]{err: err}
			continue
		}
		it.done <- outcome[Res]{res: res[i]}
	}
}

// Close refuses new requests and waits until every queued request has been
// flushed and answered, or until ctx ends.
func (g *Group[K, Req, Res]) Close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
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
