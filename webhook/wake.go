package webhook

import (
	"context"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// Committed implements registration.Observer: a commit that recorded
// events has events to deliver.
func (d *Dispatcher) Committed(_ context.Context, commits []registration.Commit) {
	if !d.active.Load() {
		return
	}
	woken := false
	for _, c := range commits {
		if !c.Failed && len(c.Events) > 0 && c.ActivityID != "" {
			if !woken {
				d.mu.Lock()
				woken = true
			}
			d.dirty[c.ActivityID] = true
		}
	}
	if woken {
		d.mu.Unlock()
		d.signal()
	}
}

// Activate tells the dispatcher that a webhook was added, and wakes it.
func (d *Dispatcher) Activate() {
	d.mu.Lock()
	d.activations++
	d.active.Store(true)
	d.mu.Unlock()
	d.Wake()
}

// Wake makes the dispatcher look for due deliveries now, of every
// activity.
func (d *Dispatcher) Wake() {
	d.mu.Lock()
	d.all = true
	d.mu.Unlock()
	d.signal()
}

// signal wakes the dispatch loop.
func (d *Dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// dispatch claims and starts attempts whenever woken, until ctx ends.
func (d *Dispatcher) dispatch(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
			d.mu.Lock()
			d.all = true
			d.mu.Unlock()
		}
		if d.active.Load() {
			d.claim(ctx)
		}
		timer.Reset(d.untilNext())
		select {
		case <-ctx.Done():
			return
		case <-time.After(claimGap):
		}
	}
}

// untilNext returns how long to wait for the next look when nothing wakes
// the dispatcher: the poll interval, or less for a retry due sooner.
func (d *Dispatcher) untilNext() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	wait := d.cfg.PollInterval
	if !d.next.IsZero() {
		wait = min(wait, max(0, time.Until(d.next)))
	}
	return wait
}

// refreshBacklog counts the backlog for the gauges, and turns the
// dispatcher off while no webhook is enabled. A count read before a
// webhook was added on this instance leaves it on: it is stale.
func (d *Dispatcher) refreshBacklog(ctx context.Context) error {
	d.mu.Lock()
	since := d.activations
	d.mu.Unlock()
	b, err := d.cfg.Store.Backlog(ctx)
	if err != nil {
		return err
	}
	d.metrics.setBacklog(b, time.Now())
	d.mu.Lock()
	if b.Webhooks > 0 || d.activations == since {
		d.active.Store(b.Webhooks > 0)
	}
	d.mu.Unlock()
	return nil
}
