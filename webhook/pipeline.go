package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// pipelineDepth is the most requests in flight on one pipelined
// connection, and pipelineIdle how long a connection with nothing to send
// stays open.
const (
	pipelineDepth = 8
	pipelineIdle  = 90 * time.Second
)

// errConnClosed is the error of a request whose connection ended before
// its answer came, after it was written.
var errConnClosed = errors.New("the receiver's connection closed before the answer")

// errNoAnswerInTime is the error of a request whose connection ended
// without its answer after its time was up: a timeout, as the read
// deadline's would have been had the connection lasted.
var errNoAnswerInTime = errors.New("timeout: no answer from the receiver within the delivery timeout")

// pipeline sends the deliveries to plain-HTTP receivers over a few
// kept-alive HTTP/1.1 connections per receiver address, each with up to
// pipelineDepth requests in flight (HTTP/1.1 pipelining, RFC 9112 §9.3.2):
// the requests that are ready are written together, in one write, and
// their answers are read in order, so that a busy webhook costs a write
// and a read per batch of deliveries instead of per delivery. net/http's
// client sends one request at a time on a connection; HTTPS receivers
// keep it (with HTTP/2 where they offer it).
//
// A connection sends one request at a time until a first answer shows
// that it is kept alive. When a connection ends (an answer that closes
// it, a connection closed before any byte of the next answer, an answer
// that did not come in its request's time), the requests written on it
// and not answered are sent once more on another connection, within
// their own time; a second time they end with errConnClosed, and their
// attempts are recorded as failed and retried, as a timeout is. A
// delivery carries its webhook-id, so a receiver can tell a repeat.
type pipeline struct {
	dial  func(ctx context.Context, network, address string) (net.Conn, error)
	conns int

	// ctx ends when the pipeline closes: dials and connections end with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	hosts map[string]*pipeHost
	// running counts the connections' goroutines, for close.
	running sync.WaitGroup
}

// newPipeline returns a pipeline that dials with dial and opens up to
// conns connections per receiver address.
func newPipeline(dial func(ctx context.Context, network, address string) (net.Conn, error), conns int) *pipeline {
	ctx, cancel := context.WithCancel(context.Background())
	return &pipeline{dial: dial, conns: max(conns, 1), ctx: ctx, cancel: cancel, hosts: make(map[string]*pipeHost)}
}

// pipeHost is one receiver address: its waiting requests and how many
// connections serve them.
type pipeHost struct {
	p       *pipeline
	address string
	queue   chan *pipeRequest
	// again is signalled when requests are put back to be sent again.
	again chan struct{}

	mu   sync.Mutex
	live int
	// resends are requests to send again, before the queue's.
	resends []*pipeRequest
}

// pipeRequest is one request on its way: state moves from queued to
// written (by a connection) or to abandoned (by its caller), once.
type pipeRequest struct {
	req      *http.Request
	deadline time.Time
	state    atomic.Int32
	resent   bool
	done     chan pipeResult
}

const (
	reqQueued int32 = iota
	reqWritten
	reqAbandoned
)

// pipeResult is the receiver's status, or why there is none.
type pipeResult struct {
	status int
	err    error
}

// answer hands the request's result to its caller (who may be gone).
func (r *pipeRequest) answer(status int, err error) {
	select {
	case r.done <- pipeResult{status: status, err: err}:
	default:
	}
}

// do sends req (a request with a body that can be read again, such as
// http.NewRequest's of a bytes.Reader) and returns the receiver's
// status. The answer's body is read, up to maxResponseBody, and dropped.
func (p *pipeline) do(ctx context.Context, req *http.Request) (int, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, errors.New("webhook: a pipelined request needs a deadline")
	}
	r := &pipeRequest{req: req, deadline: deadline, done: make(chan pipeResult, 1)}
	h := p.host(canonicalAddress(req))
	if err := h.submit(ctx, r); err != nil {
		return 0, err
	}
	select {
	case res := <-r.done:
		return res.status, res.err
	case <-ctx.Done():
		r.state.CompareAndSwap(reqQueued, reqAbandoned)
		return 0, ctx.Err()
	case <-p.ctx.Done():
		r.state.CompareAndSwap(reqQueued, reqAbandoned)
		return 0, context.Canceled
	}
}

// close closes every connection and waits for their goroutines.
func (p *pipeline) close() {
	p.cancel()
	p.running.Wait()
}

// host returns the receiver address's pipeHost.
func (p *pipeline) host(address string) *pipeHost {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hosts[address]
	if h == nil {
		h = &pipeHost{p: p, address: address, queue: make(chan *pipeRequest, 4*pipelineDepth*p.conns), again: make(chan struct{}, 1)}
		p.hosts[address] = h
	}
	return h
}

// canonicalAddress is the host:port a request goes to.
func canonicalAddress(req *http.Request) string {
	if req.URL.Port() != "" {
		return req.URL.Host
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// submit queues r, and opens a connection when fewer than the most are
// open.
func (h *pipeHost) submit(ctx context.Context, r *pipeRequest) error {
	select {
	case h.queue <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-h.p.ctx.Done():
		return context.Canceled
	}
	h.grow()
	return nil
}

// grow opens a connection when fewer than the most are open and requests
// wait.
func (h *pipeHost) grow() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.live >= h.p.conns || (len(h.queue) == 0 && len(h.resends) == 0) {
		return
	}
	select {
	case <-h.p.ctx.Done():
		return
	default:
	}
	h.live++
	h.p.running.Go(h.connect)
}

// connect dials a connection and serves the queue on it until it ends;
// then, when requests still wait, opens another.
func (h *pipeHost) connect() {
	defer func() {
		h.mu.Lock()
		h.live--
		h.mu.Unlock()
		h.grow()
	}()
	// The dialer bounds the dial by the delivery timeout.
	c, err := h.p.dial(h.p.ctx, "tcp", h.address)
	if err != nil {
		h.failQueued(err)
		return
	}
	pc := &pipeConn{h: h, c: c, freed: make(chan struct{}, 1), dead: make(chan struct{}), written: make(chan struct{}),
		pending: make(chan *pipeRequest, pipelineDepth)}
	pc.serve()
}

// failQueued ends the requests waiting now, those to send again
// included, with err (their connection could not be opened).
func (h *pipeHost) failQueued(err error) {
	h.mu.Lock()
	resends := h.resends
	h.resends = nil
	h.mu.Unlock()
	for _, r := range resends {
		r.answer(0, err)
	}
	for {
		select {
		case r := <-h.queue:
			if r.state.CompareAndSwap(reqQueued, reqWritten) {
				r.answer(0, err)
			}
		default:
			return
		}
	}
}

// resend puts back requests that were written but not answered, to be
// sent first, once each; those out of time end with errNoAnswerInTime,
// those already sent again with errConnClosed.
func (h *pipeHost) resend(rs []*pipeRequest) {
	h.mu.Lock()
	for _, r := range rs {
		if time.Now().After(r.deadline) {
			r.answer(0, errNoAnswerInTime)
			continue
		}
		if r.resent {
			r.answer(0, errConnClosed)
			continue
		}
		r.resent = true
		r.state.Store(reqQueued)
		h.resends = append(h.resends, r)
	}
	h.mu.Unlock()
	select {
	case h.again <- struct{}{}:
	default:
	}
	h.grow()
}

// takeResend returns the first request to send again, if any.
func (h *pipeHost) takeResend() *pipeRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.resends) == 0 {
		return nil
	}
	r := h.resends[0]
	h.resends = h.resends[1:]
	return r
}
