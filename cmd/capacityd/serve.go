package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/store"
)

// openRedis returns the display tier's client, or nil when none is
// configured. Timeouts are short: Redis is a cache and a gate, and a slow
// one must fall back to the authority quickly. A cluster client gets the
// same timeouts and retries as a single-node one (see clusterOptions).
func openRedis(cfg config) (redis.UniversalClient, error) {
	if len(cfg.RedisClusterAddrs) > 0 {
		return redis.NewClusterClient(clusterOptions(cfg.RedisClusterAddrs, redisTimeouts(&redis.Options{}))), nil
	}
	if cfg.RedisURL == "" {
		return nil, nil
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	return redis.NewClient(redisTimeouts(opt)), nil
}

// redisTimeouts sets the display tier's timeouts and retries on opt.
func redisTimeouts(opt *redis.Options) *redis.Options {
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond, time.Second
	opt.MaxRetries = 1
	return opt
}

// clusterStateReload bounds how long a cluster client keeps a topology
// without reloading it: after a failover it finds the promoted replica
// within this time even when no redirect tells it.
const clusterStateReload = time.Second

// clusterOptions returns the options of a Redis Cluster client seeded with
// addrs, with the timeouts and retries of the single-node options opt.
func clusterOptions(addrs []string, opt *redis.Options) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:       addrs,
		DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout,
		PoolTimeout: opt.PoolTimeout, MaxRetries: opt.MaxRetries,
		MinRetryBackoff: opt.MinRetryBackoff, MaxRetryBackoff: opt.MaxRetryBackoff,
		ClusterStateReloadInterval: clusterStateReload,
	}
}

// openDatabase connects and, with MIGRATE_ON_START, migrates; without it,
// it checks that the schema is current. It retries for a while so that the
// service can start alongside its database.
func openDatabase(ctx context.Context, cfg config, log *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := store.OpenConnPool(ctx, cfg.DatabaseURL, cfg.DB)
	if err != nil {
		return nil, err
	}
	prepare := func() error {
		applied, err := store.Migrate(ctx, pool)
		if err == nil {
			log.Info("migrations applied", "versions", applied)
		}
		if throughPooler(err) {
			return fmt.Errorf("MIGRATE_ON_START: %w; run capacityd migrate against the PostgreSQL server directly (DATABASE_URL with the server's own host and port, not the pooler's), and start the instances that use the pooler with MIGRATE_ON_START=false", err)
		}
		return err
	}
	if !cfg.MigrateOnStart {
		prepare = func() error { return requireCurrentSchema(ctx, pool) }
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := prepare()
		if err == nil {
			return pool, nil
		}
		if errors.Is(err, errSchemaBehind) || throughPooler(err) || time.Now().After(deadline) || ctx.Err() != nil {
			pool.Close()
			return nil, err
		}
		log.Warn("database not ready; retrying", "err", err)
		time.Sleep(time.Second)
	}
}

// throughPooler reports whether err is store.Migrate's refusal to
// migrate through a pooler that does not keep (or might not keep) a
// session: waiting does not change that.
func throughPooler(err error) bool {
	return errors.Is(err, store.ErrSessionNotKept) || errors.Is(err, store.ErrSessionUnknown)
}

// serve runs the service until ctx ends (SIGTERM or SIGINT), then shuts
// down in order: stop accepting and finish in-flight requests, finish the
// admission batches, stop the background workers, close Redis and the pool.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.Dev {
		log.Warn("--dev: development mode; a built-in JWT secret is used when none is set")
	}
	if len(cfg.App.WebhookSecretKey) == 0 {
		log.Warn("WEBHOOK_SECRET_KEY is not set: webhook signing secrets are stored in clear in the database until a start with the key seals them")
	}
	pool, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb, err := openRedis(cfg)
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
	}
	// The JWK Set, if any, is refreshed until serve returns.
	authCtx, stopAuth := context.WithCancel(context.Background())
	defer stopAuth()
	auth, err := httpapi.NewTokenAuthenticator(authCtx, cfg.tokenConfig(log))
	if err != nil {
		return err
	}
	opts := cfg.App
	opts.Auth, opts.Logger = auth, log
	a, err := app.New(opts, pool, rdb)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("LISTEN_ADDR: %w", err)
	}
	if cfg.DebugAddr != "" {
		stopDebug, err := serveDebug(cfg.DebugAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopDebug()
	}
	if cfg.MetricsAddr != httpapi.MetricsOnAPI {
		stopMetrics, err := serveMetrics(cfg.MetricsAddr, a.Server.MetricsHandler(), log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopMetrics()
	}
	httpSrv := &http.Server{
		Handler:           a.Server.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      cfg.App.RequestTimeout + 5*time.Second,
		IdleTimeout:       120 * time.Second,
	}
	// Seat streams never finish on their own: end them when shutdown
	// starts, so that it need not wait for them.
	httpSrv.RegisterOnShutdown(a.Streams.Close)
	demoCtx, cancelDemo := context.WithTimeout(ctx, 5*time.Second)
	if err := a.RegisterDemoNote(demoCtx); err != nil {
		log.Warn("the demo note could not be registered; the demo page's note buttons answer not found until it is", "note", httpapi.DemoNoteID, "err", err)
	}
	cancelDemo()
	a.StartWorkers()
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	log.Info("capacityd serving", "addr", ln.Addr().String(), "redis", rdb != nil)

	select {
	case err := <-serveErr:
		_ = a.Shutdown(context.Background())
		return err
	case <-ctx.Done():
	}
	return shutDown(cfg, a, httpSrv, serveErr, log)
}

// shutDown stops a serving instance after its context ended: it drains
// for SHUTDOWN_DRAIN (readiness answers 503 while every request is still
// served), then gives the HTTP server and the app's work
// SHUTDOWN_TIMEOUT to finish.
func shutDown(cfg config, a *app.App, httpSrv *http.Server, serveErr <-chan error, log *slog.Logger) error {
	if cfg.ShutdownDrain > 0 {
		// A load balancer that still sends requests would find the
		// listener closed with a connection it had just opened: it
		// learns from /readyz first, while every request is served.
		a.Server.Drain()
		log.Info("draining", "for", cfg.ShutdownDrain)
		time.Sleep(cfg.ShutdownDrain)
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	shutStart := time.Now()
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil {
		log.Error("http shutdown", "err", err)
	}
	if err := a.Shutdown(shutCtx); err != nil {
		log.Error("admission shutdown", "err", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped", "took", time.Since(shutStart))
	return nil
}
