// Package app assembles capacityd from its parts. The command and the
// end-to-end tests build the service the same way through it.
package app

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/attendance"
	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/settingscache"
	"github.com/physiciansnet/capacityd/internal/sharedlimit"
	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
	"github.com/physiciansnet/capacityd/stream"
	"github.com/physiciansnet/capacityd/webhook"
)

// Defaults of the background work that New's App runs.
const (
	// DefaultExpiryInterval is how often awaiting_payment holds are
	// expired.
	DefaultExpiryInterval = time.Second
	// DefaultReconcileInterval is how often display counters are compared
	// with the authority.
	DefaultReconcileInterval = 15 * time.Second
)

// Options are the settings of an assembled service. Each package's
// settings are held in its own configuration type, whose package says
// what a zero field means (mostly its default); New supplies the parts
// that are not settings (stores, clients, loggers, metrics registries, the
// other services), so those fields of Seats, Notes, Streams, Notifier,
// OnSale, Webhooks and HTTP are ignored. The settings table of capacityd
// serve fills them, each setting into its package's field.
type Options struct {
	// JWTSecret signs and verifies HS256 tokens when Auth is nil.
	JWTSecret string
	// Auth verifies tokens; nil: HS256 tokens signed with JWTSecret only.
	Auth *httpapi.Authenticator
	// RequestTimeout is the deadline of every request but streams
	// (HTTP.RequestTimeout is ignored); it also bounds one change
	// transaction and the caches' loads.
	RequestTimeout time.Duration
	// ExpiryInterval is how often holds are expired and ReconcileInterval
	// how often display counters are compared with the authority; zero:
	// DefaultExpiryInterval and DefaultReconcileInterval.
	ExpiryInterval    time.Duration
	ReconcileInterval time.Duration
	// Now is the clock of expiry; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger

	// Seats configures the display counter (its TTL also bounds the seat
	// memory of warm activities).
	Seats capacity.Config
	// Change sizes the change transactions.
	Change registration.ChangeConfig
	// CheckinGather is checkin.Config.GatherFor (zero: a list never
	// gathers its scans).
	CheckinGather time.Duration
	// Notes configures the note counters.
	Notes note.Config
	// Streams configures the seat streams' hub and Notifier the
	// announcements of changes between instances.
	Streams  stream.HubConfig
	Notifier stream.NotifierConfig
	// OnSale configures the admission queues of on-sales.
	OnSale onsale.Options
	// HTTP configures the API: its limits, CORS, trusted proxies, seat
	// stream pings and the demo page's signups.
	HTTP httpapi.Config
	// ActivityCacheTTL is how long this instance keeps an activity's (or
	// a pool's) settings, and an id found to name none, for public reads;
	// zero: the settingscache package's defaults.
	ActivityCacheTTL time.Duration

	// Webhooks configures webhook delivery and WebhookGuard the addresses
	// it may reach.
	Webhooks     webhook.DispatcherConfig
	WebhookGuard webhook.Guard
	// Console configures the organisers' console (its sign-in, sessions
	// and time zone); its Sessions and Services are supplied by New.
	Console console.Config
	// KeyRefreshInterval is how often the check-in keys are read again
	// (0: checkin.KeyRefresh).
	KeyRefreshInterval time.Duration
	// WebhookSecretKey (32 bytes) seals webhook signing secrets at rest.
	// Without it, new secrets are stored in clear (StartWorkers seals them
	// once an instance has the key), and sealed ones cannot be opened:
	// their attempts fail, and are retried, until it is set.
	WebhookSecretKey []byte
}

// App is the assembled service.
type App struct {
	Pool          *pgxpool.Pool
	Redis         redis.UniversalClient
	Store         *store.Store
	Seats         *capacity.Counter
	Registrations *registration.Service
	Notes         *note.Service
	Activities    *settingscache.Cache[registration.Activity]
	Pools         *settingscache.Cache[registration.Pool]
	Changes       *stream.Notifier
	Streams       *stream.Hub
	Server        *httpapi.Server
	Registry      *prometheus.Registry
	Webhooks      *webhook.Service
	Deliveries    *webhook.Dispatcher
	Queues        *onsale.Queue
	Checkins      *checkin.Service
	Attendance    *attendance.Service

	opts    Options
	stop    context.CancelFunc
	workers sync.WaitGroup
}

// New wires the service on an open (migrated) pool and an optional Redis
// client (nil: no display tier).
func New(opts Options, pool *pgxpool.Pool, rdb redis.UniversalClient) (*App, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.ExpiryInterval = cmp.Or(opts.ExpiryInterval, DefaultExpiryInterval)
	opts.ReconcileInterval = cmp.Or(opts.ReconcileInterval, DefaultReconcileInterval)
	auth := opts.Auth
	if auth == nil {
		var err error
		if auth, err = httpapi.NewAuthenticator([]byte(opts.JWTSecret)); err != nil {
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st := store.New(pool)

	// The seat memory of warm activities, kept current by the announced
	// changes (and by this instance's commits, through the counter).
	memory := capacity.NewMemory(capacity.DefaultMemorySize, opts.Seats.TTL, nil)
	notifier := opts.Notifier
	notifier.Redis, notifier.Logger, notifier.Registerer, notifier.Memory = rdb, opts.Logger, reg, memory
	changes := stream.NewNotifier(notifier)
	seats := opts.Seats
	seats.Redis, seats.Authority, seats.Announcer, seats.Logger, seats.Registerer = rdb, st, changes, opts.Logger, reg
	seats.Memory, seats.Live = memory, changes.CarriesSeats
	counter := capacity.New(seats)
	var gate registration.Gate
	if rdb != nil {
		gate = counter
	}
	sealer, err := webhook.NewSealer(opts.WebhookSecretKey)
	if err != nil {
		return nil, err
	}
	guard := new(webhook.Guard)
	*guard = opts.WebhookGuard
	delivery := opts.Webhooks
	delivery.Store, delivery.Sealer, delivery.Guard, delivery.Logger, delivery.Registerer = st, sealer, guard, opts.Logger, reg
	deliveries := webhook.NewDispatcher(delivery)
	activities := settingscache.New(settingscache.Config[registration.Activity]{
		Kind: settingscache.Activities, Load: st.ActivityRows, TTL: opts.ActivityCacheTTL, UnknownTTL: opts.ActivityCacheTTL,
		Registerer: reg, LoadTimeout: opts.RequestTimeout,
	})
	pools := settingscache.New(settingscache.Config[registration.Pool]{
		Kind: settingscache.Pools, Load: st.PoolRows, TTL: opts.ActivityCacheTTL, UnknownTTL: opts.ActivityCacheTTL,
		Registerer: reg, LoadTimeout: opts.RequestTimeout,
	})
	onSale := opts.OnSale
	onSale.Log, onSale.Metrics = opts.Logger, onsale.NewMetrics(reg)
	queues := onsale.New(st, onSale)
	regs := registration.NewService(registration.Config{
		Store: st, Gate: gate,
		// The caches first, so that announced changes read new numbers;
		// webhook delivery last.
		Observers: []registration.Observer{activities, pools, counter, queues, changes, deliveries},
		Changes:   changes, Now: opts.Now,
		Change: opts.Change, ChangeTimeout: opts.RequestTimeout,
		Logger: opts.Logger, Registerer: reg,
	})
	notesCfg := opts.Notes
	notesCfg.Store, notesCfg.Registerer = st, reg
	notes := note.NewService(notesCfg)
	hub := opts.Streams
	hub.Changes, hub.Seats, hub.Registerer = changes, counter.Seats, reg
	streams := stream.NewHub(hub)
	hooks := webhook.NewService(st, guard, sealer, deliveries)
	doors := checkin.NewService(checkin.Config{Store: st, Registrations: regs, Sealer: sealer, Announcer: changes,
		Observer: deliveries, Now: opts.Now, Registerer: reg, GatherFor: opts.CheckinGather, SeatChanges: regs})
	attended := attendance.NewService(attendance.Config{Store: st, Registrations: regs, Keys: doors, Now: opts.Now,
		Ender: st, Announcer: changes, Observers: []attendance.Observer{deliveries}, Logger: opts.Logger})
	pages, err := newConsole(opts, st, regs, counter, hooks, queues, doors, attended)
	if err != nil {
		return nil, err
	}
	srv := httpapi.New(httpConfig(opts, httpDeps{
		console: pages,
		auth:    auth, store: st, rdb: rdb, reg: reg, regs: regs, counter: counter, notes: notes,
		activities: activities, pools: pools, streams: streams, hooks: hooks, queues: queues, doors: doors, changes: changes,
		attendance: attended,
	}))
	return &App{
		Pool: pool, Redis: rdb, Store: st, Seats: counter, Registrations: regs, Notes: notes,
		Activities: activities, Pools: pools, Changes: changes, Streams: streams, Server: srv, Registry: reg, Webhooks: hooks, Deliveries: deliveries,
		Queues: queues, Checkins: doors, Attendance: attended, opts: opts,
	}, nil
}

// httpDeps are the services the API is built on.
type httpDeps struct {
	auth       *httpapi.Authenticator
	store      *store.Store
	rdb        redis.UniversalClient
	reg        *prometheus.Registry
	regs       *registration.Service
	counter    *capacity.Counter
	notes      *note.Service
	activities *settingscache.Cache[registration.Activity]
	pools      *settingscache.Cache[registration.Pool]
	streams    *stream.Hub
	hooks      *webhook.Service
	queues     *onsale.Queue
	doors      *checkin.Service
	attendance *attendance.Service
	changes    *stream.Notifier
	console    *console.Handler
}

// httpConfig returns the API's configuration: opts.HTTP's settings on the
// services in d.
func httpConfig(opts Options, d httpDeps) httpapi.Config {
	cfg := opts.HTTP
	cfg.Registrations, cfg.Seats, cfg.CachedSeats, cfg.PoolSeats = d.regs, d.counter.Seats, d.counter.CachedSeats, d.counter.PoolSeats
	cfg.Auth, cfg.PingPostgres, cfg.PingRedis, cfg.SharedAttempts = d.auth, d.store.Ping, nil, nil
	if d.rdb != nil {
		cfg.PingRedis = d.counter.Ping
		cfg.SharedAttempts = sharedlimit.New(d.rdb, "block-codes:")
	}
	cfg.Registry, cfg.RequestTimeout, cfg.Logger = d.reg, opts.RequestTimeout, opts.Logger
	cfg.Notes, cfg.Activities, cfg.Pools, cfg.Streams = d.notes, d.activities, d.pools, d.streams
	cfg.Webhooks, cfg.Queues = d.hooks, d.queues
	cfg.Checkins, cfg.ListChanges = d.doors, d.changes
	cfg.Attendance, cfg.Console = d.attendance, d.console
	return cfg
}

// StartWorkers starts the background work of every instance: hold expiry,
// idempotency purge, display reconciliation, and webhook delivery with its
// purge. Shutdown stops them.
func (a *App) StartWorkers() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	a.workers.Go(func() { a.Registrations.RunExpiry(ctx, a.opts.ExpiryInterval) })
	a.workers.Go(func() { a.Registrations.RunOutcomePurge(ctx, time.Hour) })
	a.workers.Go(func() { capacity.NewReconciler(a.Seats).Run(ctx, a.opts.ReconcileInterval, a.opts.Logger) })
	a.workers.Go(func() { a.Changes.Run(ctx) })
	a.workers.Go(func() { a.Deliveries.Run(ctx) })
	a.workers.Go(func() { a.Deliveries.RunPurge(ctx, time.Hour) })
	a.workers.Go(func() { a.sealClearSecrets(ctx) })
	a.workers.Go(func() { a.Queues.Run(ctx) })
	a.workers.Go(func() { a.Checkins.Run(ctx, a.opts.KeyRefreshInterval) })
	a.workers.Go(func() { a.Attendance.RunEnds(ctx, a.opts.ExpiryInterval) })
}

// RegisterDemoNote registers the demo page's note (httpapi.DemoNoteID) in
// the registered notes mode, so that the demo page counts its views and
// waters there too; in open mode it does nothing. It is idempotent.
func (a *App) RegisterDemoNote(ctx context.Context) error {
	if a.Notes.Mode() != note.Registered {
		return nil
	}
	_, _, err := a.Notes.Register(ctx, httpapi.DemoNoteID)
	return err
}

// sealClearSecrets seals, with WEBHOOK_SECRET_KEY, the webhook secrets that
// a server without the key stored in clear. A failure leaves them in
// clear, where they still sign deliveries, and is logged.
func (a *App) sealClearSecrets(ctx context.Context) {
	n, err := a.Webhooks.SealClearSecrets(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		a.opts.Logger.Error("webhook secrets stored in clear could not be sealed; they stay in clear until the next start", "err", err)
	case n > 0:
		a.opts.Logger.Info("webhook secrets stored in clear were sealed with WEBHOOK_SECRET_KEY", "webhooks", n)
	}
}

// Shutdown finishes the admission batches and note upserts in flight, then stops the
// workers. Call it after the HTTP server has stopped accepting requests;
// closing Redis and the pool is left to their owner.
func (a *App) Shutdown(ctx context.Context) error {
	a.Streams.Close()
	defer a.Changes.Close()
	err := errors.Join(a.Checkins.Close(ctx), a.Registrations.Close(ctx), a.Notes.Close(ctx), a.Activities.Close(ctx), a.Pools.Close(ctx))
	if a.stop != nil {
		a.stop()
	}
	a.workers.Wait()
	return err
}

// newConsole builds the organisers' console on the services the API uses.
func newConsole(opts Options, st *store.Store, regs *registration.Service, counter *capacity.Counter,
	hooks *webhook.Service, queues *onsale.Queue, doors *checkin.Service, attended *attendance.Service,
) (*console.Handler, error) {
	cfg := opts.Console
	cfg.Sessions, cfg.Logger = st, opts.Logger
	cfg.Services = console.Services{
		Activities: regs, Registrations: regs, Pools: regs, OnSale: queues, Webhooks: hooks,
		Checkins: doors, Attendance: attended, Seats: counter.Seats, PoolSeats: counter.PoolSeats,
	}
	return console.New(cfg)
}
