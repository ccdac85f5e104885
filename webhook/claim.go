package webhook

import (
	"context"
	"time"
)

// held is what this instance holds of one webhook's deliveries.
type held struct {
	// busy counts the attempts in flight; waiting are claimed deliveries
	// waiting for a slot, oldest claim first.
	busy    int
	waiting []claimed
	// full is set when the last claim took all it asked for: more may be
	// due.
	full bool
}

// claimed is a delivery claimed at (this instance's clock, before the
// claim).
type claimed struct {
	job Job
	at  time.Time
}

// claim claims what is due, as far as the webhooks have room, and starts
// the attempts that have a free slot.
func (d *Dispatcher) claim(ctx context.Context) {
	d.mu.Lock()
	holding := make(map[string]int, len(d.hooks))
	for id, h := range d.hooks {
		holding[id] = h.busy + len(h.waiting)
	}
	if !d.next.IsZero() && !d.next.After(time.Now()) {
		d.next = time.Time{}
	}
	var activities []string
	if !d.all {
		activities = make([]string, 0, len(d.dirty))
		for id := range d.dirty {
			if d.covered(id) {
				d.deferred[id] = true
			} else {
				activities = append(activities, id)
			}
		}
	}
	all := d.all
	d.all = false
	clear(d.dirty)
	d.mu.Unlock()
	if !all && len(activities) == 0 {
		return
	}
	limit := prefetch * d.cfg.Concurrency
	at := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	jobs, err := d.cfg.Store.ClaimDeliveries(cctx, Claim{Lease: d.lease, Slots: limit, Busy: holding, Activities: activities})
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("claim webhook deliveries failed", "err", err)
		}
		if all {
			// Look at every activity again next time.
			d.mu.Lock()
			d.all = true
			d.mu.Unlock()
		}
		return
	}
	got := make(map[string]int)
	d.mu.Lock()
	d.hold(jobs)
	for _, j := range jobs {
		h := d.hooks[j.WebhookID]
		if h == nil {
			h = &held{}
			d.hooks[j.WebhookID] = h
		}
		h.waiting = append(h.waiting, claimed{job: j, at: at})
		got[j.WebhookID]++
	}
	var stale []Job
	for id, h := range d.hooks {
		h.full = got[id] > 0 && got[id] >= limit-holding[id]
		stale = append(stale, d.start(id)...)
	}
	d.mu.Unlock()
	d.giveBack(stale)
}

// hold counts the batches of claimed jobs as held, and notes each
// activity's webhooks that had batches in this claim. d.mu is held.
func (d *Dispatcher) hold(jobs []Job) {
	seen := make(map[*Batch]bool)
	fresh := make(map[string]bool)
	for _, j := range jobs {
		b := j.Batch
		if b == nil || seen[b] {
			continue
		}
		seen[b] = true
		if d.holding[b.Activity] == nil {
			d.holding[b.Activity] = make(map[int64]int)
		}
		d.holding[b.Activity][b.WebhookID]++
		if !fresh[b.Activity] {
			fresh[b.Activity] = true
			d.claimed[b.Activity] = d.claimed[b.Activity][:0]
		}
		d.claimed[b.Activity] = append(d.claimed[b.Activity], b.WebhookID)
	}
}

// covered reports whether this instance holds a batch of each webhook
// that the last claim of the activity gave batches to. d.mu is held.
func (d *Dispatcher) covered(activity string) bool {
	hooks := d.claimed[activity]
	for _, w := range hooks {
		if d.holding[activity][w] == 0 {
			return false
		}
	}
	return len(hooks) > 0
}

// release counts the batches of recorded results as no longer held, and
// marks the deferred activities that are then no longer covered as
// dirty. It returns whether it did, so that the dispatcher claims their
// next batches.
func (d *Dispatcher) release(results []Attempt) (dirty bool) {
	seen := make(map[*Batch]bool)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range results {
		b := a.Batch
		if b == nil || seen[b] {
			continue
		}
		seen[b] = true
		held := d.holding[b.Activity]
		if held[b.WebhookID]--; held[b.WebhookID] <= 0 {
			delete(held, b.WebhookID)
		}
		if len(held) == 0 {
			delete(d.holding, b.Activity)
			delete(d.claimed, b.Activity)
		}
		if d.deferred[b.Activity] && !d.covered(b.Activity) {
			delete(d.deferred, b.Activity)
			d.dirty[b.Activity] = true
			dirty = true
		}
	}
	return dirty
}
