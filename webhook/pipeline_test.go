package webhook

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingListener counts the connections accepted and the reads that
// brought the server bytes.
type countingListener struct {
	net.Listener
	conns, reads atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.Add(1)
		c = &countingConn{Conn: c, reads: &l.reads}
	}
	return c, err
}

type countingConn struct {
	net.Conn
	reads *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.reads.Add(1)
	}
	return n, err
}

// pipeReceiver is a receiver whose handler is h, on a listener that
// counts connections and reads.
func pipeReceiver(t *testing.T, h http.HandlerFunc) (*httptest.Server, *countingListener) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	l := &countingListener{Listener: srv.Listener}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, l
}

// testPipeline returns a pipeline to loopback addresses.
func testPipeline(t *testing.T, conns int) *pipeline {
	t.Helper()
	p := newPipeline((&Guard{AllowPrivate: true}).dial(5*time.Second), conns)
	t.Cleanup(p.close)
	return p
}

// post sends id's delivery through p within timeout.
func pipePost(p *pipeline, url string, id int, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	body := []byte(`{"id":` + strconv.Itoa(id) + `}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Id", strconv.Itoa(id))
	return p.do(ctx, req)
}

// handled records which deliveries a receiver handled, and how often.
type handled struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *handled) add(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[id]++
	return h.n[id]
}

func (h *handled) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[id]
}

// wantStatus is the status the test receivers answer delivery id with.
func wantStatus(id int) int { return []int{200, 202, 204, 500}[id%4] }

// sendAll sends deliveries 0..n-1 at once and returns each one's result.
func sendAll(p *pipeline, url string, n int, timeout time.Duration) ([]int, []error) {
	statuses, errs := make([]int, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { statuses[i], errs[i] = pipePost(p, url, i, timeout) })
	}
	wg.Wait()
	return statuses, errs
}

// TestPipelineAnswersEachInOrderOverFewConnections: 400 deliveries sent
// at once reach the receiver over at most the pipeline's connections,
// several requests to a read, and each gets its own answer's status.
func TestPipelineAnswersEachInOrderOverFewConnections(t *testing.T) {
	t.Parallel()
	var seen handled
	srv, l := pipeReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if !assert.NoError(t, err) {
			return
		}
		id, _ := strconv.Atoi(r.Header.Get("X-Id"))
		assert.JSONEq(t, `{"id":`+strconv.Itoa(id)+`}`, string(body))
		seen.add(r.Header.Get("X-Id"))
		w.WriteHeader(wantStatus(id))
		_, _ = w.Write([]byte("ok " + strconv.Itoa(id)))
	})
	p := testPipeline(t, 2)

	const n = 400
	statuses, errs := sendAll(p, srv.URL+"/hook", n, 10*time.Second)
	for i := range n {
		require.NoError(t, errs[i], "delivery %d", i)
		assert.Equal(t, wantStatus(i), statuses[i], "delivery %d has its own answer", i)
		assert.Equal(t, 1, seen.count(strconv.Itoa(i)), "delivery %d handled once", i)
	}
	assert.LessOrEqual(t, l.conns.Load(), int64(2), "no more connections than the pipeline opens")
	assert.Less(t, l.reads.Load(), int64(n/2), "pipelined: several requests reach the receiver in one read")
}

// TestPipelineResendsWhatAClosingAnswerLeft: an answer that closes its
// connection leaves the requests written behind it unanswered; they go
// out again on another connection, and each is handled once.
func TestPipelineResendsWhatAClosingAnswerLeft(t *testing.T) {
	t.Parallel()
	var seen handled
	srv, l := pipeReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.Header.Get("X-Id"))
		seen.add(r.Header.Get("X-Id"))
		if id == 100 {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(wantStatus(id))
	})
	p := testPipeline(t, 1)

	const n = 200
	statuses, errs := sendAll(p, srv.URL, n, 10*time.Second)
	for i := range n {
		require.NoError(t, errs[i], "delivery %d", i)
		assert.Equal(t, wantStatus(i), statuses[i], "delivery %d", i)
		assert.Equal(t, 1, seen.count(strconv.Itoa(i)), "delivery %d handled once", i)
	}
	assert.Equal(t, int64(2), l.conns.Load(), "the closed connection was replaced once")
}

// TestPipelineTimeoutEndsItsRequestAlone: a delivery whose answer does
// not come in its time ends with a timeout; the requests written behind
// it on its connection are sent again on another and answered.
func TestPipelineTimeoutEndsItsRequestAlone(t *testing.T) {
	t.Parallel()
	var seen handled
	stuck := make(chan struct{})
	srv, _ := pipeReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.Header.Get("X-Id"))
		if seen.add(r.Header.Get("X-Id")) == 1 && id == 7 {
			select {
			case <-stuck:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(wantStatus(id))
	})
	t.Cleanup(func() { close(stuck) })
	p := testPipeline(t, 1)

	const n = 64
	statuses, errs := make([]int, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		timeout := 10 * time.Second
		if i == 7 {
			timeout = 500 * time.Millisecond
		}
		wg.Go(func() { statuses[i], errs[i] = pipePost(p, srv.URL, i, timeout) })
	}
	wg.Wait()
	require.Error(t, errs[7])
	var ne net.Error
	if !assert.ErrorAs(t, errs[7], &ne) || !ne.Timeout() {
		assert.ErrorIs(t, errs[7], context.DeadlineExceeded)
	}
	for i := range n {
		if i == 7 {
			continue
		}
		require.NoError(t, errs[i], "delivery %d", i)
		assert.Equal(t, wantStatus(i), statuses[i], "delivery %d", i)
		assert.Equal(t, 1, seen.count(strconv.Itoa(i)), "delivery %d handled once", i)
	}
}

// TestPipelineDialsOnlyAllowedAddresses: the pipeline dials through the
// guard: a loopback receiver is refused unless private addresses are
// allowed, and the refusal is the delivery's error.
func TestPipelineDialsOnlyAllowedAddresses(t *testing.T) {
	t.Parallel()
	srv, l := pipeReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	p := newPipeline((&Guard{}).dial(5*time.Second), 1)
	t.Cleanup(p.close)
	_, err := pipePost(p, srv.URL, 1, 5*time.Second)
	require.ErrorIs(t, err, ErrForbiddenAddress)
	assert.Zero(t, l.conns.Load())
}

// TestPipelineCloseEndsWaitingRequests: closing the pipeline ends the
// requests still waiting for their answers.
func TestPipelineCloseEndsWaitingRequests(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	srv, _ := pipeReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	p := newPipeline((&Guard{AllowPrivate: true}).dial(5*time.Second), 1)
	res := make(chan error, 1)
	go func() {
		_, err := pipePost(p, srv.URL, 1, 30*time.Second)
		res <- err
	}()
	<-entered
	p.close()
	require.ErrorIs(t, <-res, context.Canceled)
}

// TestPipelineEndsResendsWhenTheReceiverCannotBeReached: a request put
// back to be sent again, whose receiver then refuses connections, ends
// with the dial's error, and the pipeline stops dialling for it.
func TestPipelineEndsResendsWhenTheReceiverCannotBeReached(t *testing.T) {
	t.Parallel()
	var dials atomic.Int64
	refused := errors.New("connection refused")
	p := newPipeline(func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, refused
	}, 1)
	t.Cleanup(p.close)
	req, err := http.NewRequest(http.MethodPost, "http://receiver.example/hook", bytes.NewReader([]byte(`{}`)))
	require.NoError(t, err)
	r := &pipeRequest{req: req, deadline: time.Now().Add(time.Minute), done: make(chan pipeResult, 1)}
	r.state.Store(reqWritten)
	h := p.host(canonicalAddress(req))
	h.resend([]*pipeRequest{r})

	select {
	case res := <-r.done:
		require.ErrorIs(t, res.err, refused)
	case <-time.After(10 * time.Second):
		t.Fatal("the request to send again never ended")
	}
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.live == 0
	}, 10*time.Second, time.Millisecond, "no connection is left trying")
	assert.Equal(t, int64(1), dials.Load(), "one dial for the one request")
}

// TestPipelineRequestOutOfTimeFailsAsATimeout: a written request whose
// connection ended without its answer after its time was up is not sent
// again; it fails as a timeout, as the read deadline's would have.
func TestPipelineRequestOutOfTimeFailsAsATimeout(t *testing.T) {
	t.Parallel()
	p := newPipeline(func(context.Context, string, string) (net.Conn, error) {
		t.Error("a request out of time is not sent again")
		return nil, errors.New("no dial")
	}, 1)
	t.Cleanup(p.close)
	req, err := http.NewRequest(http.MethodPost, "http://receiver.example/hook", bytes.NewReader([]byte(`{}`)))
	require.NoError(t, err)
	r := &pipeRequest{req: req, deadline: time.Now().Add(-time.Millisecond), done: make(chan pipeResult, 1)}
	r.state.Store(reqWritten)
	p.host(canonicalAddress(req)).resend([]*pipeRequest{r})
	res := <-r.done
	require.ErrorIs(t, res.err, errNoAnswerInTime)
	assert.Contains(t, res.err.Error(), "timeout")
}
