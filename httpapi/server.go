// Package httpapi is the HTTP edge of capacityd: the routes of the API on
// echo v4, token authentication, strict JSON decoding, and the one table
// from domain errors to HTTP statuses.
package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
)

// Config holds what the HTTP edge serves.
type Config struct {
	// Registrations serves activities, pools, series, blocks and
	// registrations.
	Registrations Registrations
	// Seats reads an activity's live seat display.
	Seats func(ctx context.Context, activityID string) (registration.Seats, error)
	// CachedSeats reads it from a warm display counter only (ok false
	// otherwise), without any database query; nil: never warm.
	CachedSeats func(ctx context.Context, activityID string) (registration.Seats, bool)
	// PoolSeats reads a pool's seats from the display tier, with their
	// source (registration.SourceCache or SourceDatabase), for the public
	// read of a pool; nil: that read is authoritative, like an admin's.
	PoolSeats func(ctx context.Context, poolID string) (registration.PoolSeatState, string, error)
	Auth      *Authenticator
	// PingPostgres and PingRedis back /readyz. PingRedis nil means no
	// display tier is configured.
	PingPostgres func(context.Context) error
	PingRedis    func(context.Context) error
	// Registry receives the HTTP metrics and is served on /metrics.
	Registry *prometheus.Registry
	// MetricsElsewhere keeps /metrics off the API's listener for anyone
	// but a client on this machine that comes straight, not through a
	// proxy (404 to all others): it is served on a listener of its own
	// (see MetricsHandler).
	MetricsElsewhere bool
	// RequestTimeout bounds every request but streams. Default 10s.
	RequestTimeout time.Duration
	Logger         *slog.Logger
	// Notes counts note views and waters; nil leaves the note routes out.
	Notes NoteService
	// Streams fans seat changes out to the seat streams; nil leaves the
	// stream route out.
	Streams SeatStreams
	// PingInterval is the time between ": ping" comments on a seat
	// stream. Default 15s.
	PingInterval time.Duration
	// CORSAllowedOrigins may send writes from a browser page of another
	// origin ("*": any); reads are allowed from every origin.
	CORSAllowedOrigins []string
	// DemoSignups enables POST /demo/signups, which signs up a random
	// user without a token, for the demo page. Never in production.
	DemoSignups bool
	// PublicWriteLimit limits note views and waters (and demo signups) per
	// client IP; the zero value is off.
	PublicWriteLimit RateLimit
	// WaterWindow allows one water per client address per note per
	// window; zero is off.
	WaterWindow time.Duration
	// SignupLimit limits signups per user; the zero value is off.
	SignupLimit RateLimit
	// CodeLimit limits the signups with a block code per user; the zero
	// value is off.
	CodeLimit RateLimit
	// SharedAttempts, when set, counts the block code attempts of every
	// instance together (see SharedLimiter); while it cannot answer, and
	// without it, each instance counts its own.
	SharedAttempts SharedLimiter
	// StreamsPerAddress caps the seat streams one client address holds
	// open (429 beyond); zero: DefaultStreamsPerAddress, negative: no cap.
	StreamsPerAddress int
	// EventWaitsPerUser caps the event feed long polls one admin holds
	// open (429 beyond); zero: DefaultEventWaitsPerUser, negative: no cap.
	EventWaitsPerUser int
	// PublicReadLimit limits, per client IP, the public reads that reach
	// PostgreSQL: note stats, reads of a pool, and reads of an activity
	// (its settings, its seats, its seat stream) that miss Activities; the
	// zero value is off.
	PublicReadLimit RateLimit
	// Activities caches the settings of activities, and the ids that name
	// none, for the public reads; nil: those read the database every time.
	Activities SettingsCache[registration.Activity]
	// Pools does the same for the public reads of pools.
	Pools SettingsCache[registration.Pool]
	// TrustedProxies are the reverse proxies whose X-Forwarded-For gives
	// the client address (rate limits, access log); empty: the peer's.
	TrustedProxies []*net.IPNet
	// Webhooks registers webhooks; nil leaves the webhook routes out.
	Webhooks WebhookService
	// Queues serves the admission queues; nil leaves their routes out.
	Queues QueueService
	// Checkins serves tickets and the doors; nil leaves their routes out.
	Checkins CheckinService
	// Attendance serves the attendance reads; nil leaves their routes out.
	Attendance AttendanceService
	// Console serves the organisers' console under /console; nil leaves
	// it out.
	Console ConsoleSessions
	// ListChanges wakes the check-in list streams when any instance
	// announces a change of their list; nil: they poll.
	ListChanges Watcher
}

// Watcher lets a reader wait for the announced changes of an id.
type Watcher interface {
	Watch(id string) (<-chan struct{}, func())
}

// Server is the HTTP edge.
type Server struct {
	cfg  Config
	regs Registrations
	auth *Authenticator
	log  *slog.Logger
	echo *echo.Echo
	// limits are the per-client rate limits.
	limits *rateLimits
	// waters limits waters per address and note; nil is off.
	waters *waterLimit
	// lists are the check-in lists this instance's list streams follow.
	lists *stream.Shared[checkin.List]
	// draining is set once the instance is stopping (Drain): /readyz
	// answers 503 while requests are still served.
	draining atomic.Bool
}

// Drain makes /readyz answer 503 with "draining": true from now on, while
// every route is still served, so that a load balancer stops sending the
// instance requests before it stops accepting them.
func (s *Server) Drain() { s.draining.Store(true) }

// DefaultRequestTimeout is the deadline of every request but streams
// (REQUEST_TIMEOUT).
const DefaultRequestTimeout = 10 * time.Second

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = defaultPingInterval
	}
	s := &Server{cfg: cfg, regs: cfg.Registrations, auth: cfg.Auth, log: cfg.Logger, echo: echo.New(),
		limits: newRateLimits(cfg)}
	if cfg.WaterWindow > 0 {
		s.waters = newWaterLimit(cfg.WaterWindow, maxWaterEntries, time.Now)
	}
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = clientAddrExtractor(cfg.TrustedProxies)
	e.Use(s.accessLog)
	e.Use(s.metricsMiddleware(cfg.Registry))
	e.Use(clientRequestIDs, middleware.RequestID())
	e.Use(middleware.Recover())
	e.Use(middleware.BodyLimit(bodyLimit))
	e.Use(s.deadline)
	e.Use(cors(cfg.CORSAllowedOrigins), noSniff)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	metrics := echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	if cfg.MetricsElsewhere {
		metrics = onlyLocal(metrics)
	}
	e.GET("/metrics", metrics)

	v1 := e.Group("/v1")
	user := s.authenticate
	admin := []echo.MiddlewareFunc{s.authenticate, requireAdmin}
	v1.POST("/activities", s.createActivity, admin...)
	v1.GET("/activities", s.listActivities, admin...)
	v1.GET("/activities/:id", s.getActivity)
	v1.PATCH("/activities/:id", s.patchActivity, admin...)
	v1.GET("/activities/:id/seats", s.seats)
	v1.POST("/activities/:id/registrations", composed(s.signup, user, s.limitSignups))
	v1.GET("/activities/:id/registrations", s.listRegistrations, admin...)
	v1.GET("/activities/:id/registrations.csv", s.exportRegistrations, admin...)
	v1.GET("/activities/:id/events", s.activityEvents, admin...)
	v1.GET("/me/registrations", s.myRegistrations, user)
	v1.GET("/registrations/:id", s.getRegistration, user)
	v1.GET("/registrations/:id/events", s.registrationEvents, user)
	v1.POST("/registrations/:id/cancel", s.cancelRegistration, user)
	v1.POST("/registrations/:id/confirm", s.confirmRegistration, user)
	v1.POST("/registrations/:id/seats", s.reduceSeats, user)
	v1.POST("/registrations/:id/status", s.setStatus, admin...)
	v1.POST("/pools", s.createPool, admin...)
	v1.GET("/pools", s.listPools, admin...)
	v1.GET("/pools/:id", s.getPool)
	v1.PATCH("/pools/:id", s.patchPool, admin...)
	v1.POST("/series", s.createSeries, admin...)
	v1.GET("/series", s.listSeries, admin...)
	v1.GET("/series/:id", s.getSeries, admin...)
	v1.PATCH("/series/:id", s.patchSeries, admin...)
	v1.POST("/activities/:id/blocks", s.createBlock, admin...)
	v1.GET("/activities/:id/blocks", s.listBlocks, admin...)
	if cfg.Queues != nil {
		v1.POST("/activities/:id/queue", s.joinQueue, user)
		v1.GET("/activities/:id/queue/me", s.myQueueTicket, user)
	}
	v1.DELETE("/blocks/:id", s.deleteBlock, admin...)
	if cfg.Notes != nil {
		s.registerNoteRoutes(v1, admin)
	}
	if cfg.Streams != nil {
		v1.GET("/activities/:id/seats/stream", s.seatStream)
	}
	if cfg.Webhooks != nil {
		s.registerWebhookRoutes(v1, admin)
	}
	if cfg.Checkins != nil {
		s.registerCheckinRoutes(v1, admin)
	}
	if cfg.Attendance != nil {
		s.registerAttendanceRoutes(v1, admin)
	}
	s.registerWidgetRoutes(e)
	s.registerAPIDescription(e)
	if cfg.Console != nil {
		s.registerConsole(e, cfg.Console)
	}
	return s
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// deadline bounds every request but long-lived streams, long polls and
// exports (which set their own) by RequestTimeout.
func (s *Server) deadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p := c.Path(); strings.HasSuffix(p, "/stream") || strings.HasSuffix(p, ".csv") || p == "/v1/activities/:id/events" ||
			p == "/v1/checkin-lists/:id/tickets" || strings.HasPrefix(p, "/console") {
			return next(c)
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.RequestTimeout)
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
		return next(c)
	}
}

func (s *Server) healthz(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	body := map[string]any{"postgres": "ok", "redis": "ok"}
	status := http.StatusOK
	if s.draining.Load() {
		body["draining"] = true
		status = http.StatusServiceUnavailable
		c.Response().Header().Set("Retry-After", "1")
	}
	if err := s.cfg.PingPostgres(ctx); err != nil {
		body["postgres"] = "unavailable"
		status = http.StatusServiceUnavailable
		c.Response().Header().Set("Retry-After", "1")
	}
	// Redis gets a budget of its own: a slow PostgreSQL must not make it
	// look degraded.
	rctx, rcancel := context.WithTimeout(c.Request().Context(), time.Second)
	defer rcancel()
	if s.cfg.PingRedis == nil || s.cfg.PingRedis(rctx) != nil {
		body["redis"] = "degraded"
	}
	return writeJSON(c, status, body)
}
