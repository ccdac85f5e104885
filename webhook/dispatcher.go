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
	// NoPipelining sends deliveries to plain-HTTP receivers with one
	// request at a time per connection, as to HTTPS ones, instead of
	// pipelining them (see pipeline): for a receiver behind a proxy that
	// mishandles pipelined requests.
	NoPipelining bool
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
	active atomic.Bool
	client *http.Client
	// pipe sends to plain-HTTP receivers; nil with NoPipelining.
	pipe    *pipeline
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
	if !cfg.NoPipelining {
		d.pipe = newPipeline(cfg.Guard.dial(cfg.Timeout), (2*cfg.Concurrency+pipelineDepth-1)/pipelineDepth)
	}
	d.active.Store(true)
	return d
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
	if d.pipe != nil {
		d.pipe.close()
	}
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
