package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// API is the load test's connection to one capacityd: the typed client
// (package client, without a token: WithToken gives one per user) on a
// transport tuned for load, plus Text for the Prometheus text of /metrics,
// which the typed client does not read.
type API struct {
	*client.Client
}

// NewAPI returns a client of the service at base, which must be on the
// loopback interface: load is never sent anywhere else.
func NewAPI(base string) (*API, error) {
	if err := checkLoopback(base); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2048,
		MaxIdleConnsPerHost: 2048,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &API{client.New(base, "", &http.Client{Transport: tr, Timeout: 30 * time.Second})}, nil
}

// checkLoopback refuses a service URL whose host is not 127.0.0.1,
// ::1 or localhost.
func checkLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("loadtest: service URL: %w", err)
	}
	switch u.Hostname() {
	case "127.0.0.1", "::1", "localhost":
		return nil
	}
	return fmt.Errorf("loadtest: service URL %q: load goes to 127.0.0.1 only", base)
}

// Close closes idle connections.
func (a *API) Close() { a.HTTP.CloseIdleConnections() }

// Text fetches path and returns its body.
func (a *API) Text(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.BaseURL+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	return string(b), err
}

// answer returns the HTTP status of a call's outcome: ok when err is nil,
// the refusal's status when err is a *client.Error, and 0 with err when
// no answer came (a transport error).
func answer(err error, ok int) (int, error) {
	if err == nil {
		return ok, nil
	}
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status, nil
	}
	return 0, err
}

// signupAnswer returns a signup's HTTP status (201 admitted, 202
// waitlisted, the refusal's) as answer does.
func signupAnswer(res client.SignupResult, err error) (int, error) {
	if res.Waitlisted {
		return answer(err, http.StatusAccepted)
	}
	return answer(err, http.StatusCreated)
}

// statusTally counts answers by HTTP status (0: no answer); safe for
// concurrent use.
type statusTally struct{ n [600]atomic.Int64 }

// add counts one answer of the given status.
func (t *statusTally) add(status int) {
	if status < 0 || status >= len(t.n) {
		status = 0
	}
	t.n[status].Add(1)
}

// count returns the answers of one status.
func (t *statusTally) count(status int) int64 { return t.n[status].Load() }

// fivexx returns the answers with a 5xx status.
func (t *statusTally) fivexx() int64 {
	var s int64
	for st := 500; st < len(t.n); st++ {
		s += t.n[st].Load()
	}
	return s
}
