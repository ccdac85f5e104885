// Package app assembles capacityd from its parts. The command and the
// end-to-end tests build the service the same way through it.
package app

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/capacity"
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

// Options are the settings of an assembled service.
type Options struct {
	JWTSecret      string
	SeatCacheTTL   time.Duration
	RequestTimeout time.Duration
	// AdmissionMaxBatch caps the commands of one change transaction,
	// AdmissionMaxActivities the activities it serves and
	// AdmissionMaxTransactions the change transactions in flight; zero:
	// the registration package's defaults.
	AdmissionMaxBatch        int
	AdmissionMaxActivities   int
	AdmissionMaxTransactions int
	// AdmissionGatherAt and AdmissionGatherFor make a crowded activity
	// gather its next commands (registration.Config's GatherAt and
	// GatherFor); zero: the defaults, a negative AdmissionGatherFor: never.
	AdmissionGatherAt  int
	AdmissionGatherFor time.Duration
	ExpiryInterval     time.Duration
	// QueueTick is how often the admission controller advances an active
	// queue (default 200 ms).
	QueueTick         time.Duration
	ReconcileInterval time.Duration
	// Now is the clock of expiry; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// NoteCombiningOff makes every note increment its own upsert (the
	// baseline of the load test); the zero value combines concurrent
	// increments of a note into one upsert.
	NoteCombiningOff bool
	// NoteMaxBatch caps the increments one note upsert combines. Default 1000.
	NoteMaxBatch int
	// NotesMode says which note ids count views and waters: note.Open (the
	// zero value) any, note.Registered only those an admin registered.
	NotesMode note.Mode
	// WaterWindow allows one water per client address per note per window;
	// zero is off.
	WaterWindow time.Duration
	// StreamMaxClients caps the seat streams of this instance; beyond it a
	// stream is refused with unavailable. Default 10000.
	StreamMaxClients int
	// StreamPingInterval is the time between pings on a seat stream.
	// Default 15s.
	StreamPingInterval time.Duration
	// StreamMaxPerAddress caps the seat streams one client address holds
	// open; beyond it a stream is refused with rate_limited. Zero: the
	// default (httpapi.DefaultStreamsPerAddress); negative: no cap.
	StreamMaxPerAddress int
	// EventFeedMaxWaitsPerUser caps the event feed long polls one admin
	// holds open; beyond it a poll is refused with rate_limited. Zero: the
	// default (httpapi.DefaultEventWaitsPerUser); negative: no cap.
	EventFeedMaxWaitsPerUser int
	// StreamRefreshInterval is how often seat streams are re-read from the
	// authority while the Redis subscription is down. Default 5s.
	StreamRefreshInterval time.Duration
	// CORSAllowedOrigins may send writes from browser pages of another
	// origin ("*": any); reads are allowed from every origin.
	CORSAllowedOrigins []string
	// DemoSignups enables the demo page's "sign up a random user" endpoint.
	DemoSignups bool
	// MetricsElsewhere leaves /metrics out of the API's routes: the caller
	// serves Server.MetricsHandler on a listener of its own.
	MetricsElsewhere bool
	// PublicWriteLimit limits note views and waters per client IP;
	// SignupLimit limits signups per user. The zero values are off.
	PublicWriteLimit httpapi.RateLimit
	SignupLimit      httpapi.RateLimit
	// CodeLimit limits the signups with a block code per user (off when
	// zero), counted in Redis across the instances when there is one.
	CodeLimit httpapi.RateLimit
	// PublicReadLimit limits, per client IP, the public reads that reach
	// PostgreSQL (note stats, activity reads that miss the activity
	// cache); the zero value is off.
	PublicReadLimit httpapi.RateLimit
	// ActivityCacheTTL is how long this instance keeps an activity's (or
	// a pool's) settings, and an id found to name none, for public reads;
	// zero: the settingscache package's defaults.
	ActivityCacheTTL time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For gives
	// the client address; empty: the connection's peer.
	TrustedProxies []*net.IPNet
	// Auth verifies tokens; nil: HS256 tokens signed with JWTSecret only.
	Auth *httpapi.Authenticator

	// WebhookSecretKey (32 bytes) seals webhook signing secrets at rest.
	// Without it, new secrets are stored in clear (StartWorkers seals them
	// once an instance has the key), and sealed ones cannot be opened:
	// their attempts fail, and are retried, until it is set.
	WebhookSecretKey []byte
	// WebhookAllowPrivate lets webhooks reach loopback, private and
	// link-local addresses.
	WebhookAllowPrivate bool
	// WebhookRetryBase, WebhookTimeout, WebhookConcurrency,
	// WebhookPollInterval and WebhookBacklogInterval tune delivery; zero:
	// the webhook package's defaults.
	WebhookRetryBase       time.Duration
	WebhookTimeout         time.Duration
	WebhookConcurrency     int
	WebhookPollInterval    time.Duration
	WebhookBacklogInterval time.Duration
	// WebhookResolver resolves webhook hosts; nil: the system's resolver.
	WebhookResolver webhook.Resolver
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
	if opts.ExpiryInterval <= 0 {
		opts.ExpiryInterval = time.Second
	}
	if opts.ReconcileInterval <= 0 {
		opts.ReconcileInterval = 15 * time.Second
	}
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
	memory := capacity.NewMemory(capacity.DefaultMemorySize, cmp.Or(opts.SeatCacheTTL, capacity.DefaultTTL), nil)
	changes := stream.NewNotifier(stream.NotifierConfig{
		Redis: rdb, RefreshInterval: opts.StreamRefreshInterval, Logger: opts.Logger, Registerer: reg, Memory: memory,
	})
	counter := capacity.New(capacity.Config{
		Redis: rdb, Authority: st, Announcer: changes, TTL: opts.SeatCacheTTL, Logger: opts.Logger, Registerer: reg,
		Memory: memory, Live: changes.CarriesSeats,
	})
	var gate registration.Gate
	if rdb != nil {
		gate = counter
	}
	sealer, err := webhook.NewSealer(opts.WebhookSecretKey)
	if err != nil {
		return nil, err
	}
	guard := &webhook.Guard{AllowPrivate: opts.WebhookAllowPrivate, Resolver: opts.WebhookResolver}
	deliveries := webhook.NewDispatcher(webhook.DispatcherConfig{
		Store: st, Sealer: sealer, Guard: guard, RetryBase: opts.WebhookRetryBase, Timeout: opts.WebhookTimeout,
		Concurrency: opts.WebhookConcurrency, PollInterval: opts.WebhookPollInterval,
		BacklogInterval: opts.WebhookBacklogInterval,
		Logger:          opts.Logger, Registerer: reg,
	})
	activities := settingscache.New(settingscache.Config[registration.Activity]{
		Kind: settingscache.Activities, Load: st.ActivityRows, TTL: opts.ActivityCacheTTL, UnknownTTL: opts.ActivityCacheTTL,
		Registerer: reg, LoadTimeout: opts.RequestTimeout,
	})
	pools := settingscache.New(settingscache.Config[registration.Pool]{
		Kind: settingscache.Pools, Load: st.PoolRows, TTL: opts.ActivityCacheTTL, UnknownTTL: opts.ActivityCacheTTL,
		Registerer: reg, LoadTimeout: opts.RequestTimeout,
	})
	queues := onsale.New(st, onsale.Options{Tick: opts.QueueTick, Log: opts.Logger, Metrics: onsale.NewMetrics(reg)})
	regs := registration.NewService(registration.Config{
		Store: st, Gate: gate,
		// The caches first, so that announced changes read new numbers;
		// webhook delivery last.
		Observers: []registration.Observer{activities, pools, counter, queues, changes, deliveries},
		Changes:   changes, Now: opts.Now,
		MaxBatch: opts.AdmissionMaxBatch, MaxActivities: opts.AdmissionMaxActivities,
		MaxTransactions: opts.AdmissionMaxTransactions, ChangeTimeout: opts.RequestTimeout,
		GatherAt: opts.AdmissionGatherAt, GatherFor: opts.AdmissionGatherFor,
		Logger: opts.Logger, Registerer: reg,
	})
	notes := note.NewService(note.Config{
		Store: st, CombiningOff: opts.NoteCombiningOff, MaxBatch: opts.NoteMaxBatch, Mode: opts.NotesMode, Registerer: reg,
	})
	streams := stream.NewHub(stream.HubConfig{
		Changes: changes, Seats: counter.Seats, MaxStreams: opts.StreamMaxClients, Registerer: reg,
	})
	hooks := webhook.NewService(st, guard, sealer, deliveries)
	var pingRedis func(context.Context) error
	var codeAttempts httpapi.SharedLimiter
	if rdb != nil {
		pingRedis = counter.Ping
		codeAttempts = sharedlimit.New(rdb, "block-codes:")
	}
	srv := httpapi.New(httpapi.Config{
		Registrations: regs, Seats: counter.Seats, CachedSeats: counter.CachedSeats, PoolSeats: counter.PoolSeats, Auth: auth, PingPostgres: st.Ping, PingRedis: pingRedis,
		Registry: reg, MetricsElsewhere: opts.MetricsElsewhere, RequestTimeout: opts.RequestTimeout, Logger: opts.Logger,
		Notes:            notes,
		PublicWriteLimit: opts.PublicWriteLimit, SignupLimit: opts.SignupLimit, CodeLimit: opts.CodeLimit, SharedAttempts: codeAttempts, WaterWindow: opts.WaterWindow,
		PublicReadLimit: opts.PublicReadLimit, Activities: activities, Pools: pools,
		Streams: streams, PingInterval: opts.StreamPingInterval,
		StreamsPerAddress: opts.StreamMaxPerAddress, EventWaitsPerUser: opts.EventFeedMaxWaitsPerUser,
		CORSAllowedOrigins: opts.CORSAllowedOrigins, DemoSignups: opts.DemoSignups,
		TrustedProxies: opts.TrustedProxies,
		Webhooks:       hooks,
		Queues:         queues,
	})
	return &App{
		Pool: pool, Redis: rdb, Store: st, Seats: counter, Registrations: regs, Notes: notes,
		Activities: activities, Pools: pools, Changes: changes, Streams: streams, Server: srv, Registry: reg, Webhooks: hooks, Deliveries: deliveries,
		Queues: queues, opts: opts,
	}, nil
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
	err := errors.Join(a.Registrations.Close(ctx), a.Notes.Close(ctx), a.Activities.Close(ctx), a.Pools.Close(ctx))
	if a.stop != nil {
		a.stop()
	}
	a.workers.Wait()
	return err
}
