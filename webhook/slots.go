package webhook

import "time"

// start starts the waiting attempts of a webhook that have a free slot,
// and returns the deliveries that waited too long to be sent within their
// lease (or that Run's end caught waiting), to give back. d.mu is held.
func (d *Dispatcher) start(webhookID string) (stale []Job) {
	h := d.hooks[webhookID]
	for len(h.waiting) > 0 && h.busy < d.cfg.Concurrency {
		c := h.waiting[0]
		h.waiting = h.waiting[1:]
		// Sent later than Timeout after its claim, the attempt could end
		// after the lease (2·Timeout + 5 s), when another instance may
		// already have claimed it again.
		if time.Since(c.at) > d.cfg.Timeout || d.ctx.Err() != nil {
			stale = append(stale, c.job)
			continue
		}
		h.busy++
		d.metrics.inFlight.Inc()
		d.sends.Go(func() { d.finish(c.job.WebhookID, d.attempt(d.ctx, c.job)) })
	}
	if h.busy == 0 && len(h.waiting) == 0 {
		delete(d.hooks, webhookID)
	}
	return stale
}

// finish hands an attempt's result to the recorder, frees its slot for
// the next waiting delivery, and wakes the dispatcher when the webhook's
// deliveries ran out and more may be due.
func (d *Dispatcher) finish(webhookID string, a Attempt) {
	d.done(a)
	d.metrics.inFlight.Dec()
	d.mu.Lock()
	h := d.hooks[webhookID]
	h.busy--
	more := h.full && len(h.waiting) == 0
	stale := d.start(webhookID)
	d.mu.Unlock()
	d.giveBack(stale)
	if more {
		d.Wake()
	}
}

// giveBack hands deliveries that were claimed but not sent to the
// recorder, which makes them due again at once without counting an
// attempt.
func (d *Dispatcher) giveBack(jobs []Job) {
	for _, j := range jobs {
		d.done(Attempt{Ref: j.Ref, Batch: j.Batch, Attempt: j.Attempt, Outcome: OutcomeUnsent, At: time.Now(), EventAt: j.CreatedAt})
	}
}

// done hands a result to the recorder: a retry's at once, a batch's with
// the others of its batch once each of them is done.
func (d *Dispatcher) done(a Attempt) {
	if a.Batch == nil {
		d.results <- []Attempt{a}
		return
	}
	d.mu.Lock()
	rs := append(d.batches[a.Batch], a)
	complete := len(rs) >= a.Batch.Jobs
	if complete {
		delete(d.batches, a.Batch)
	} else {
		d.batches[a.Batch] = rs
	}
	d.mu.Unlock()
	if complete {
		d.results <- rs
	}
}
