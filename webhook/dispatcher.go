package webhook

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd/internal/loop"
	"github.com/physiciansnet/capacityd/registration"
)

// Defaults of a Dispatcher.
const (
	DefaultTimeout         = 10 * time.Second
	DefaultConcurrency     = 16
	DefaultPollInterval    = time.Second
	DefaultBacklogInterval = 5 * time.Second
	// PurgeAfter is how long delivery records are kept.
	PurgeAfter = 30 * 24 * time.Hour
)

const (
	// claimGap is the least time between two claims: under load one claim
	// takes what many commits recorded meanwhile, in one batch per
	// activity and webhook.
	claimGap = 50 * time.Millisecond
	// prefetch is how many deliveries per webhook a claim may hold, in
	// flight or waiting for a slot, as a multiple of Concurrency: it is
	// also the longest batch of an activity's events. A cursor's next
	// batch is claimed only once its batch is recorded, so a batch is
	// long enough for a fast receiver to keep up with a hot activity.
	prefetch = 64
	// recordBatch caps the attempts recorded in one statement, and
	// recordWindow is how long a batch waits for more after its first.
	recordBatch  = 1000
	recordWindow = 20 * time.Millisecond
	// maxResponseBody is how much of a receiver's answer is read (and
	// dropped), so that its connection can be used again.
	maxResponseBody = 64 << 10
	// maxErrorLen caps a recorded error.
	maxErrorLen = 300
)

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	Store  Store
	Sealer *Sealer
	Guard  *Guard
	// RetryBase is the delay after a first failed attempt (default 5s);
	// each later one doubles, up to an hour.
	RetryBase time.Duration
	// Timeout bounds each attempt, answer included (default 10s).
	Timeout time.Duration
	// Concurrency is the most attempts in flight per webhook on this
	// instance (default 16): a slow receiver holds only its own slots.
	Concurrency int
	// PollInterval is how often due deliveries are looked for when nothing
	// wakes the dispatcher (default 1s): those other instances queued,
	// and those of an instance that died with them leased.
	PollInterval time.Duration
	// BacklogInterval is how often the backlog gauges are refreshed
	// (default 5s, and never more often than PollInterval). It is also how
	// soon an instance that saw no enabled webhook notices one that
	// another instance added.
	BacklogInterval time.Duration
	Logger          *slog.Logger
	Registerer      prometheus.Registerer
}

// Dispatcher delivers the event log to the webhooks: it claims batches of
// each webhook's events (and its due retries), sends each outside any
// transaction with at most Concurrency in flight per webhook, records
// every attempt, and schedules retries. Every instance runs one; claims
// skip what another holds, so each attempt is made once. It wakes after
// each local commit that recorded events (it is a registration.Observer;
// it then claims only those activities' batches, or, for an activity whose
// batches it holds, the next ones once those are recorded), after a
// retry's delay, and every PollInterval (it then claims every activity's).
//
// A batch's results are recorded together once each of its events was
// tried (or given back): its cursor advances past it, and the events not
// delivered join the retry set, so a failing event holds up none after
// it. A claim may take a few times Concurrency of a webhook's deliveries
// (so that claims stay few under load); those wait for a free slot, and
// one that has waited so long that its attempt could outlast its lease is
// given back unsent instead (to the retry set, due at once), so no attempt
// is ever made twice.
//
// While no webhook is enabled it stays idle, sending PostgreSQL nothing
// but the backlog refresh: commits do not wake it and it does not poll.
type Dispatcher struct {
	cfg DispatcherConfig
	// active is false while the last backlog refresh found no enabled
	// webhook.
	active  atomic.Bool
	client  *http.Client
	lease   time.Duration
	log     *slog.Logger
	metrics *metrics
	wake    chan struct{}
	results chan []Attempt
	sends   sync.WaitGroup

	// ctx is Run's: attempts end with it.
	ctx context.Context

	mu sync.Mutex
	// activations counts Activate calls, so that a backlog refresh that
	// began before a webhook was added does not turn the dispatcher off.
	activations uint64
	// hooks are the webhooks with deliveries held by this instance.
	hooks map[string]*held
	// next is the earliest retry this instance scheduled and has not
	// looked for yet.
	next time.Time
	// keys are the opened signing keys, by webhook id; unopened the
	// webhooks whose key could not be opened (logged once).
	keys     map[string][]byte
	unopened map[string]bool
	// dirty are the activities whose local commits woke the dispatcher
	// since its last claim; all asks the next claim to look at every
	// activity.
	dirty map[string]bool
	all   bool
	// holding counts the batches this instance holds (claimed and not yet
	// recorded) by activity and webhook; claimed are the webhooks of the
	// last claim's batches of each activity. An activity of whose every
	// claimed webhook a batch is held is deferred when a local commit
	// marks it: a claim would find those cursors leased. It is claimed
	// once one of them is recorded.
	holding  map[string]map[int64]int
	claimed  map[string][]int64
	deferred map[string]bool
	// batches holds the results of the batches with attempts still to
	// end.
	batches map[*Batch][]Attempt
}

// NewDispatcher returns a Dispatcher; Run starts it.
func NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	cfg.RetryBase = cmp.Or(cfg.RetryBase, DefaultRetryBase)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.BacklogInterval = max(cmp.Or(cfg.BacklogInterval, DefaultBacklogInterval), cfg.PollInterval)
	d := &Dispatcher{
		cfg:    cfg,
		client: cfg.Guard.Client(cfg.Timeout, cfg.Concurrency),
		// An attempt ends within Timeout; the lease leaves room for
		// recording it.
		lease:    2*cfg.Timeout + 5*time.Second,
		log:      cmp.Or(cfg.Logger, slog.Default()),
		metrics:  newMetrics(cfg.Registerer),
		wake:     make(chan struct{}, 1),
		results:  make(chan []Attempt, 4*recordBatch),
		hooks:    make(map[string]*held),
		keys:     make(map[string][]byte),
		unopened: make(map[string]bool),
		dirty:    make(map[string]bool),
		all:      true,
		holding:  make(map[string]map[int64]int),
		claimed:  make(map[string][]int64),
		deferred: make(map[string]bool),
		batches:  make(map[*Batch][]Attempt),
	}
	d.active.Store(true)
	return d
}

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

// Run delivers until ctx ends. Attempts in flight then are cut short and
// recorded as failed attempts, to be retried; deliveries waiting for a
// slot are given back.
func (d *Dispatcher) Run(ctx context.Context) {
	d.ctx = ctx
	var workers sync.WaitGroup
	workers.Go(d.recordResults)
	workers.Go(func() {
		if err := d.refreshBacklog(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("refresh the webhook backlog failed", "err", err)
		}
		loop.Every(ctx, d.cfg.BacklogInterval, d.log, "refresh the webhook backlog", d.refreshBacklog)
	})
	d.dispatch(ctx)
	d.mu.Lock()
	var unsent []Job
	for id, h := range d.hooks {
		for _, c := range h.waiting {
			unsent = append(unsent, c.job)
		}
		h.waiting = nil
		if h.busy == 0 {
			delete(d.hooks, id)
		}
	}
	d.mu.Unlock()
	d.giveBack(unsent)
	d.sends.Wait()
	close(d.results)
	workers.Wait()
}

// RunPurge deletes delivery records older than PurgeAfter every interval
// until ctx ends.
func (d *Dispatcher) RunPurge(ctx context.Context, every time.Duration) {
	loop.Every(ctx, every, d.log, "purge webhook deliveries", func(ctx context.Context) error {
		_, err := d.cfg.Store.PurgeDeliveries(ctx, time.Now().Add(-PurgeAfter))
		return err
	})
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
