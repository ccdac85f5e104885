package webhook

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// pipeConn is one connection: serve writes the requests, read reads the
// answers in the same order.
type pipeConn struct {
	h *pipeHost
	c net.Conn
	// pending are the written requests whose answers are still to read,
	// in order; inFlight counts them, and freed is signalled when an
	// answer is read.
	pending  chan *pipeRequest
	inFlight atomic.Int32
	freed    chan struct{}
	// keepAlive is set once an answer showed that the connection stays
	// open: until then one request at a time is sent.
	keepAlive atomic.Bool
	// dead is closed when the connection ended; unanswered is the request
	// whose answer had not begun when the reader found the connection
	// closed (the reader's until it returns, then serve's).
	dead       chan struct{}
	deadOnce   sync.Once
	unanswered []*pipeRequest
	// lost is the writer's batch that a failed write left unsent.
	lost []*pipeRequest
	// written is closed when the writer stops writing.
	written chan struct{}
}

// serve writes the queue's requests until the connection ends or has
// been idle for pipelineIdle.
func (pc *pipeConn) serve() {
	var reading sync.WaitGroup
	reading.Go(pc.read)
	defer pc.finish(&reading)
	bw := bufio.NewWriterSize(pc.c, 32<<10)
	idle := time.NewTimer(pipelineIdle)
	defer idle.Stop()
	for {
		if !pc.waitRoom() {
			return
		}
		first, ok := pc.next(idle)
		if !ok {
			return
		}
		if first == nil {
			continue
		}
		batch := pc.gather(first)
		if len(batch) == 0 {
			continue
		}
		if err := pc.write(bw, batch); err != nil {
			return
		}
		idle.Reset(pipelineIdle)
	}
}

// finish ends the connection once the writer stopped: the reader reads
// the answers of what was written (at once ended when the pipeline
// closes), then what was written and not answered, and what a failed
// write left, go out again on another connection.
func (pc *pipeConn) finish(reading *sync.WaitGroup) {
	close(pc.written)
	select {
	case <-pc.h.p.ctx.Done():
		pc.kill()
	default:
	}
	reading.Wait()
	pc.kill()
	for {
		select {
		case r := <-pc.pending:
			pc.unanswered = append(pc.unanswered, r)
			continue
		default:
		}
		break
	}
	pc.h.resend(append(pc.unanswered, pc.lost...))
}

// next returns the next request to send (nil: look again), or false when
// the connection ends: closed, or idle for pipelineIdle.
func (pc *pipeConn) next(idle *time.Timer) (*pipeRequest, bool) {
	if r := pc.h.takeResend(); r != nil {
		return r, true
	}
	select {
	case r := <-pc.h.queue:
		return r, true
	case <-pc.h.again:
		return nil, true
	case <-pc.dead:
		return nil, false
	case <-pc.h.p.ctx.Done():
		return nil, false
	case <-idle.C:
		if pc.inFlight.Load() == 0 {
			return nil, false
		}
		idle.Reset(pipelineIdle)
		return nil, true
	}
}

// waitRoom waits until fewer requests are in flight than the connection
// may hold; false when it ended.
func (pc *pipeConn) waitRoom() bool {
	for int(pc.inFlight.Load()) >= pc.limit() {
		select {
		case <-pc.freed:
		case <-pc.dead:
			return false
		case <-pc.h.p.ctx.Done():
			return false
		}
	}
	return true
}

// limit is how many requests the connection may hold in flight.
func (pc *pipeConn) limit() int {
	if pc.keepAlive.Load() {
		return pipelineDepth
	}
	return 1
}

// gather takes first and the requests waiting now, as many as there is
// room for, skipping those their callers abandoned.
func (pc *pipeConn) gather(first *pipeRequest) []*pipeRequest {
	room := pc.limit() - int(pc.inFlight.Load())
	batch := make([]*pipeRequest, 0, room)
	take := func(r *pipeRequest) {
		if r.state.CompareAndSwap(reqQueued, reqWritten) {
			batch = append(batch, r)
		}
	}
	take(first)
	for len(batch) < room {
		if r := pc.h.takeResend(); r != nil {
			take(r)
			continue
		}
		select {
		case r := <-pc.h.queue:
			take(r)
			continue
		default:
		}
		break
	}
	return batch
}

// write writes the batch in one flush and hands it to the reader. On an
// error the connection ends, and the batch is kept in lost, to be sent
// again.
func (pc *pipeConn) write(bw *bufio.Writer, batch []*pipeRequest) error {
	last := batch[0].deadline
	for _, r := range batch {
		last = maxTime(last, r.deadline)
	}
	_ = pc.c.SetWriteDeadline(last)
	var err error
	for _, r := range batch {
		if r.req.GetBody != nil && r.resent {
			if r.req.Body, err = r.req.GetBody(); err != nil {
				break
			}
		}
		if err = r.req.Write(bw); err != nil {
			break
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		// The connection ended under the writes (the reader closed it
		// after an answer that closes it, or the receiver did): the
		// batch goes out once more on another connection, with what was
		// written before it and not answered.
		pc.lost = batch
		return err
	}
	for _, r := range batch {
		pc.inFlight.Add(1)
		pc.pending <- r
	}
	return nil
}

// read reads the answers in the order of the requests, until the
// connection ends. A request whose answer did not begin before the
// connection closed is left in unanswered, for serve to resend.
func (pc *pipeConn) read() {
	defer pc.kill()
	br := bufio.NewReaderSize(pc.c, 16<<10)
	for {
		var r *pipeRequest
		select {
		case r = <-pc.pending:
		case <-pc.dead:
			return
		case <-pc.written:
			// The writer stopped: read what it wrote, then end.
			select {
			case r = <-pc.pending:
			default:
				return
			}
		}
		_ = pc.c.SetReadDeadline(r.deadline)
		status, keep, err := readAnswer(br, r.req)
		switch {
		case err == nil:
			r.answer(status, nil)
		case errors.Is(err, io.EOF) && br.Buffered() == 0:
			// Closed before any byte of this answer: not answered.
			pc.unanswered = append(pc.unanswered, r)
			return
		default:
			r.answer(0, err)
			return
		}
		pc.inFlight.Add(-1)
		select {
		case pc.freed <- struct{}{}:
		default:
		}
		if !keep {
			return
		}
		pc.keepAlive.Store(true)
	}
}

// readAnswer reads one answer, its body up to maxResponseBody, and
// reports whether the connection may carry the next one.
func readAnswer(br *bufio.Reader, req *http.Request) (status int, keep bool, err error) {
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return 0, false, err
	}
	keep = !resp.Close && resp.ProtoAtLeast(1, 1) && n <= maxResponseBody
	return resp.StatusCode, keep, nil
}

// kill closes the connection once.
func (pc *pipeConn) kill() {
	pc.deadOnce.Do(func() {
		close(pc.dead)
		_ = pc.c.Close()
	})
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
