package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// attempt makes one attempt of a claimed delivery and judges it.
func (d *Dispatcher) attempt(ctx context.Context, j Job) Attempt {
	a := Attempt{Ref: j.Ref, Batch: j.Batch, Attempt: j.Attempt, At: time.Now(), EventAt: j.CreatedAt}
	status, err := d.post(ctx, j)
	a.Duration, a.StatusCode = time.Since(a.At), status
	if err != nil {
		a.Error = describe(err, d.cfg.Timeout)
	}
	a.Outcome, a.RetryIn = judge(status, j.Attempt, j.CreatedAt, time.Now(), d.cfg.RetryBase)
	d.metrics.observe(a)
	return a
}

// post sends the signed payload and returns the receiver's status.
func (d *Dispatcher) post(ctx context.Context, j Job) (int, error) {
	key, err := d.key(j)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.URL, bytes.NewReader(j.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "capacityd-webhooks")
	if err := sign(req.Header, key, j.EventID, time.Now(), j.Body); err != nil {
		return 0, err
	}
	if d.pipe != nil && req.URL.Scheme == "http" {
		return d.pipe.do(ctx, req)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	return resp.StatusCode, nil
}

// key returns the webhook's signing key, opened once per webhook.
func (d *Dispatcher) key(j Job) ([]byte, error) {
	d.mu.Lock()
	k, ok := d.keys[j.WebhookID]
	d.mu.Unlock()
	if ok {
		return k, nil
	}
	k, err := d.cfg.Sealer.Open(j.WebhookID, j.SealedSecret)
	if err != nil {
		d.mu.Lock()
		first := !d.unopened[j.WebhookID]
		d.unopened[j.WebhookID] = true
		d.mu.Unlock()
		if first {
			d.log.Error("a webhook's secret cannot be opened: its deliveries fail and are retried until WEBHOOK_SECRET_KEY is the key it was sealed with",
				"webhook", j.WebhookID, "err", err)
		}
		return nil, err
	}
	d.mu.Lock()
	d.keys[j.WebhookID] = k
	d.mu.Unlock()
	return k, nil
}

// describe says in a few words why an attempt got no answer.
func describe(err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("timeout: no answer within %s", timeout)
	case errors.Is(err, context.Canceled):
		return "cut short: the instance shut down"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	s := err.Error()
	if len(s) > maxErrorLen {
		s = s[:maxErrorLen]
	}
	return s
}

// recordResults records the attempts' results until the results channel
// closes: each write holds what arrives within recordWindow of its first
// (whole batches: a batch's results arrive together).
func (d *Dispatcher) recordResults() {
	for rs := range d.results {
		batch := rs
		window := time.NewTimer(recordWindow)
	more:
		for len(batch) < recordBatch {
			select {
			case rs, ok := <-d.results:
				if !ok {
					break more
				}
				batch = append(batch, rs...)
			case <-window.C:
				break more
			}
		}
		window.Stop()
		d.record(batch)
	}
}

// record writes results and wakes the dispatcher when the soonest of
// their retries is due. Results that cannot be written are dropped: their
// batches and retries are claimed again when their leases end.
//
// Once written (or not), the batches are no longer held: the activities
// whose commits came meanwhile have their next batches claimed.
func (d *Dispatcher) record(batch []Attempt) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.cfg.Store.RecordAttempts(ctx, batch)
	if d.release(batch) {
		d.signal()
	}
	if err != nil {
		d.log.Warn("webhook attempts not recorded; their deliveries are tried again when their leases end",
			"attempts", len(batch), "err", err)
		return
	}
	var soonest time.Duration = -1
	for _, a := range batch {
		switch {
		case a.Outcome == OutcomeUnsent:
			soonest = 0 // due again now
		case a.Outcome == OutcomeRetry && (soonest < 0 || a.RetryIn < soonest):
			soonest = a.RetryIn
		}
	}
	if soonest < 0 {
		return
	}
	at := time.Now().Add(soonest)
	d.mu.Lock()
	if d.next.IsZero() || at.Before(d.next) {
		d.next = at
	}
	d.mu.Unlock()
	d.Wake()
}
