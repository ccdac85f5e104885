package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
	"github.com/physiciansnet/capacityd/stream"
	"github.com/physiciansnet/capacityd/webhook"
)

// devSecret signs tokens under --dev when no CAPACITY_JWT_SECRET is set. It
// is public: never use --dev in production.
const devSecret = "capacityd-development-secret-do-not-use-in-production"

// config is the server's configuration, from the environment with flags of
// the same names overriding it. The settings of the service's packages go
// straight into their own configuration types (App, DB, Tokens), whose
// packages own the defaults.
type config struct {
	DatabaseURL       string
	RedisURL          string
	RedisClusterAddrs []string
	ListenAddr        string
	ShutdownTimeout   time.Duration
	ShutdownDrain     time.Duration
	Dev               bool
	DebugAddr         string
	MetricsAddr       string
	LogLevel          slog.Level
	LogFormat         string
	MigrateOnStart    bool

	// DB is the PostgreSQL connection pool's configuration.
	DB store.ConnPoolConfig
	// Tokens says how tokens are signed and verified (its Logger is
	// serve's).
	Tokens httpapi.TokenConfig
	// App is the service's configuration (its Auth is serve's).
	App app.Options
}

// setting is one configuration value: its environment variable, the flag of
// the same name, its default and how to parse it into the config.
type setting struct {
	env   string
	def   string
	usage string
	parse func(c *config, v string) error
}

func (s setting) flagName() string {
	return strings.ReplaceAll(strings.ToLower(s.env), "_", "-")
}

func durationSetting(env, def, usage string, dst func(*config) *time.Duration) setting {
	return setting{env, def, usage, func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration such as 60s, got %q", v)
		}
		*dst(c) = d
		return nil
	}}
}

// boundedDurationSetting is a duration from 0s (zero meaning what zero
// says in usage) to hi; example is one a user could write.
func boundedDurationSetting(env, def, usage, zero string, hi time.Duration, example string, dst func(*config) *time.Duration) setting {
	return setting{env, def, usage, func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > hi {
			return fmt.Errorf("want a duration from 0s%s to %s such as %s, got %q", zero, shortDuration(hi), example, v)
		}
		*dst(c) = d
		return nil
	}}
}

func intSetting[T int | int32](env, def, usage string, lo, hi T, dst func(*config) *T) setting {
	return setting{env, def, usage, func(c *config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < int64(lo) || n > int64(hi) {
			return fmt.Errorf("want an integer from %d to %d, got %q", lo, hi, v)
		}
		*dst(c) = T(n)
		return nil
	}}
}

// capSetting is a cap from 0 (no cap) to a million of an httpapi.Config
// field, which spells no cap as a negative number (its zero is its
// default, def).
func capSetting(env string, def int, usage string, dst func(*config) *int) setting {
	return setting{env, strconv.Itoa(def), usage, func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1000000 {
			return fmt.Errorf("want an integer from 0 to 1000000, got %q", v)
		}
		if n == 0 {
			n = -1
		}
		*dst(c) = n
		return nil
	}}
}

// serveSettings are the settings of serve: the core ones, then the
// console's.
var serveSettings = slices.Concat(coreSettings, consoleSettings)

var coreSettings = []setting{
	{"DATABASE_URL", "", "PostgreSQL connection string (required)", func(c *config, v string) error {
		if v == "" {
			return errors.New("is required, e.g. postgres://user@127.0.0.1:5432/capacityd")
		}
		c.DatabaseURL = v
		return nil
	}},
	{"REDIS_URL", "", "redis://host:port/db of the display tier (empty: none)", func(c *config, v string) error {
		if v != "" {
			if _, err := redis.ParseURL(v); err != nil {
				return fmt.Errorf("want redis://host:port/db: %v", err)
			}
		}
		c.RedisURL = v
		return nil
	}},
	{"REDIS_CLUSTER_ADDRS", "", "comma-separated Redis Cluster seed addresses (overrides REDIS_URL)", func(c *config, v string) error {
		c.RedisClusterAddrs = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("want host:port addresses, got %q", a)
			}
			c.RedisClusterAddrs = append(c.RedisClusterAddrs, a)
		}
		if len(c.RedisClusterAddrs) == 0 && strings.TrimSpace(v) != "" {
			return fmt.Errorf("want host:port addresses, got %q", v)
		}
		return nil
	}},
	{"LISTEN_ADDR", ":8080", "HTTP listen address", func(c *config, v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return fmt.Errorf("want host:port or :port, got %q", v)
		}
		c.ListenAddr = v
		return nil
	}},
	{"CAPACITY_JWT_SECRET", "", "HS256 secret, at least 32 bytes (required unless --dev)", func(c *config, v string) error {
		c.Tokens.Secret = []byte(v)
		return nil
	}},
	{"CAPACITY_JWT_PREVIOUS_SECRET", "", "the HS256 secret being rotated out: still accepted (never used to sign) until CAPACITY_JWT_PREVIOUS_SECRET_UNTIL", func(c *config, v string) error {
		c.Tokens.PreviousSecret = []byte(v)
		return nil
	}},
	{"CAPACITY_JWT_PREVIOUS_SECRET_UNTIL", "", "end of the previous secret's grace period, RFC 3339 (e.g. 2026-12-01T12:00:00Z)", func(c *config, v string) error {
		if v == "" {
			c.Tokens.PreviousSecretUntil = time.Time{}
			return nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("want an RFC 3339 time such as 2026-12-01T12:00:00Z, got %q", v)
		}
		c.Tokens.PreviousSecretUntil = t
		return nil
	}},
	{"JWT_JWKS_URL", "", "JWK Set URL of an identity provider whose RS256/ES256 tokens are accepted (empty: none)", func(c *config, v string) error {
		if v != "" {
			if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("want an http(s) URL such as https://idp.example.org/.well-known/jwks.json, got %q", v)
			}
		}
		c.Tokens.JWKSURL = v
		return nil
	}},
	{"JWT_ISSUER", "", "when set, every token's iss must equal it", func(c *config, v string) error {
		c.Tokens.Issuer = v
		return nil
	}},
	{"JWT_AUDIENCE", "", "when set, every token's aud must contain it", func(c *config, v string) error {
		c.Tokens.Audience = v
		return nil
	}},
	durationSetting("SEAT_CACHE_TTL", defaultDuration(capacity.DefaultTTL), "lifetime of a display counter", func(c *config) *time.Duration { return &c.App.Seats.TTL }),
	durationSetting("SHUTDOWN_TIMEOUT", "15s", "how long SIGTERM waits for in-flight work", func(c *config) *time.Duration { return &c.ShutdownTimeout }),
	boundedDurationSetting("SHUTDOWN_DRAIN", "0s", "how long SIGTERM keeps the instance serving while /readyz answers 503, before it stops accepting (0s: at once): behind a load balancer, more than its health check's interval times its fall count",
		" (none)", 5*time.Minute, "1s", func(c *config) *time.Duration { return &c.ShutdownDrain }),
	{"LOG_LEVEL", "info", "least severe log level written: debug, info, warn or error", func(c *config, v string) error {
		l, err := parseLogLevel(v)
		c.LogLevel = l
		return err
	}},
	{"LOG_FORMAT", "json", "log line format: json or text", func(c *config, v string) error {
		if v != "json" && v != "text" {
			return fmt.Errorf("want json or text, got %q", v)
		}
		c.LogFormat = v
		return nil
	}},
	{"TRUSTED_PROXIES", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For gives the client address (empty: the peer address)", func(c *config, v string) error {
		nets, err := httpapi.ParseTrustedProxies(v)
		c.App.HTTP.TrustedProxies = nets
		return err
	}},
	boolSetting("MIGRATE_ON_START", "true", "apply pending migrations before serving (false: run capacityd migrate as its own step, which a DATABASE_URL through a transaction pooler such as PgBouncer needs: migrating through one is refused)", func(c *config) *bool { return &c.MigrateOnStart }),
	intSetting("DB_MAX_CONNS", strconv.Itoa(store.DefaultMaxConns), "PostgreSQL pool size", 2, 1000, func(c *config) *int32 { return &c.DB.MaxConns }),
	durationSetting("REQUEST_TIMEOUT", defaultDuration(httpapi.DefaultRequestTimeout), "deadline of every request but streams; also bounds one change transaction (a change still queued at its deadline is withdrawn: 503, nothing written)", func(c *config) *time.Duration { return &c.App.RequestTimeout }),
	durationSetting("EXPIRY_INTERVAL", defaultDuration(app.DefaultExpiryInterval), "how often awaiting_payment holds are expired", func(c *config) *time.Duration { return &c.App.ExpiryInterval }),
	durationSetting("QUEUE_TICK", defaultDuration(onsale.DefaultTick), "how often each instance advances an active admission queue (shuffle at opening, lapses, admissions)", func(c *config) *time.Duration { return &c.App.OnSale.Tick }),
	durationSetting("QUEUE_LIST_INTERVAL", defaultDuration(onsale.DefaultListEvery), "how often each instance lists every admission queue, to take over the lines of an instance that went away (the instances that take a line's joins and polls advance it every QUEUE_TICK)", func(c *config) *time.Duration { return &c.App.OnSale.ListEvery }),
	durationSetting("CHECKIN_KEY_REFRESH", defaultDuration(checkin.KeyRefresh), "how often the ticket keys are read again, so that a key added on another instance signs here too (a ticket naming an unknown key makes the keys be read at once)", func(c *config) *time.Duration { return &c.App.KeyRefreshInterval }),
	durationSetting("RECONCILE_INTERVAL", defaultDuration(app.DefaultReconcileInterval), "how often display counters are compared with the authority", func(c *config) *time.Duration { return &c.App.ReconcileInterval }),
	intSetting("ADMISSION_MAX_BATCH", strconv.Itoa(registration.DefaultMaxBatch), "most commands (signups, cancellations, …) in one change transaction", 1, 100000, func(c *config) *int { return &c.App.Change.MaxBatch }),
	intSetting("ADMISSION_MAX_ACTIVITIES", strconv.Itoa(registration.DefaultMaxActivities), "most activities one change transaction serves", 1, 10000, func(c *config) *int { return &c.App.Change.MaxActivities }),
	intSetting("ADMISSION_MAX_TRANSACTIONS", strconv.Itoa(registration.DefaultMaxTransactions), "most change transactions in flight at once on this instance", 1, 256, func(c *config) *int { return &c.App.Change.MaxTransactions }),
	intSetting("ADMISSION_GATHER_AT", strconv.Itoa(registration.DefaultGatherAt), "a change transaction that took at least this many commands of one activity makes the activity's next one gather (see ADMISSION_GATHER)", 1, 100000, func(c *config) *int { return &c.App.Change.GatherAt }),
	boundedDurationSetting("ADMISSION_GATHER", defaultDuration(registration.DefaultGatherFor), "longest a crowded activity's next change transaction waits for as many commands as its last one took (0s: never waits)",
		"", time.Second, "50ms", func(c *config) *time.Duration { return &c.App.Change.GatherFor }),
	boundedDurationSetting("CHECKIN_GATHER", defaultDuration(checkin.DefaultGatherFor), "longest a busy check-in list's next transaction waits for its devices' next scans, after one of at least "+strconv.Itoa(checkin.GatherAt)+" (0s: never waits)",
		"", 100*time.Millisecond, "5ms", func(c *config) *time.Duration { return &c.App.CheckinGather }),
	{"DEBUG_ADDR", "", "host:port of a separate listener serving Go's /debug/pprof profiles (empty: none; keep it private)", func(c *config, v string) error {
		if v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("want host:port such as 127.0.0.1:6060, got %q", v)
			}
		}
		c.DebugAddr = v
		return nil
	}},
	{"METRICS_ADDR", httpapi.DefaultMetricsAddr, "host:port of a separate listener serving /metrics, without CORS headers (" + httpapi.MetricsOnAPI + ": on the API's listener instead, also without them; keep it private)", func(c *config, v string) error {
		if v != httpapi.MetricsOnAPI {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("want host:port such as 127.0.0.1:9090, or %s, got %q", httpapi.MetricsOnAPI, v)
			}
		}
		c.MetricsAddr = v
		c.App.HTTP.MetricsElsewhere = v != httpapi.MetricsOnAPI
		return nil
	}},
	{"NOTE_COMBINING", "on", "combine concurrent increments of a note into one upsert (on or off)", func(c *config, v string) error {
		switch v {
		case "on":
			c.App.Notes.CombiningOff = false
		case "off":
			c.App.Notes.CombiningOff = true
		default:
			return fmt.Errorf("want on or off, got %q", v)
		}
		return nil
	}},
	intSetting("NOTE_MAX_BATCH", strconv.Itoa(note.DefaultMaxBatch), "most note increments in one upsert", 1, 100000, func(c *config) *int { return &c.App.Notes.MaxBatch }),
	{"NOTES_MODE", note.DefaultMode.String(), "which note ids count views and waters: open (any; for development) or registered (only those an admin created with PUT /v1/notes/{noteId}; for production)", func(c *config, v string) error {
		m, err := note.ParseMode(v)
		c.App.Notes.Mode = m
		return err
	}},
	boundedDurationSetting("NOTE_WATER_WINDOW", strconv.Itoa(int(httpapi.DefaultWaterWindow/time.Second))+"s", "one water per client address per note per this long, per instance (0s: no limit)",
		" (off)", 24*time.Hour, "60s", func(c *config) *time.Duration { return &c.App.HTTP.WaterWindow }),
	intSetting("STREAM_MAX_CLIENTS", strconv.Itoa(stream.DefaultMaxStreams), "most seat streams open on this instance (503 beyond)", 1, 1000000, func(c *config) *int { return &c.App.Streams.MaxStreams }),
	capSetting("STREAM_MAX_PER_ADDRESS", httpapi.DefaultStreamsPerAddress, "most seat streams one client address holds open on this instance (429 beyond; 0: no cap)",
		func(c *config) *int { return &c.App.HTTP.StreamsPerAddress }),
	capSetting("EVENT_FEED_MAX_WAITS_PER_USER", httpapi.DefaultEventWaitsPerUser, "most event feed long polls (wait of 1s or more) one admin holds open on this instance (429 beyond; 0: no cap)",
		func(c *config) *int { return &c.App.HTTP.EventWaitsPerUser }),
	durationSetting("STREAM_PING_INTERVAL", "15s", "time between pings on a seat stream", func(c *config) *time.Duration { return &c.App.HTTP.PingInterval }),
	{"CORS_ALLOWED_ORIGINS", "", "comma-separated origins allowed to send writes from a browser (* for any; reads are open to all)", func(c *config, v string) error {
		c.App.HTTP.CORSAllowedOrigins = nil
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o == "" {
				continue
			}
			if o != "*" {
				if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
					return fmt.Errorf("want origins such as https://example.org, got %q", o)
				}
			}
			c.App.HTTP.CORSAllowedOrigins = append(c.App.HTTP.CORSAllowedOrigins, o)
		}
		return nil
	}},
	{"DEMO_SIGNUPS", "off", "on: the demo page may sign up random users without a token (never in production)", func(c *config, v string) error {
		switch v {
		case "on":
			c.App.HTTP.DemoSignups = true
		case "off":
			c.App.HTTP.DemoSignups = false
		default:
			return fmt.Errorf("want on or off, got %q", v)
		}
		return nil
	}},
	{"WEBHOOK_SECRET_KEY", "", "32 bytes in base64 (openssl rand -base64 32) that seal webhook signing secrets in the database (empty: stored in clear, sealed at the first start with a key)", func(c *config, v string) error {
		c.App.WebhookSecretKey = nil
		if v == "" {
			return nil
		}
		k, err := webhook.ParseKey(v)
		c.App.WebhookSecretKey = k
		return err
	}},
	boolSetting("WEBHOOK_ALLOW_PRIVATE", "false", "allow webhook URLs on loopback, private and link-local addresses", func(c *config) *bool { return &c.App.WebhookGuard.AllowPrivate }),
	durationSetting("WEBHOOK_RETRY_BASE", webhook.DefaultRetryBase.String(), "delay before the first retry of a failed webhook delivery (then doubling, at most 1h apart, for 24h)",
		func(c *config) *time.Duration { return &c.App.Webhooks.RetryBase }),
	durationSetting("WEBHOOK_TIMEOUT", webhook.DefaultTimeout.String(), "time limit of each webhook delivery attempt",
		func(c *config) *time.Duration { return &c.App.Webhooks.Timeout }),
	intSetting("WEBHOOK_CONCURRENCY", strconv.Itoa(webhook.DefaultConcurrency), "most webhook delivery attempts in flight per webhook on one instance", 1, 1000,
		func(c *config) *int { return &c.App.Webhooks.Concurrency }),
	{"WEBHOOK_PIPELINING", "true", "pipeline deliveries to plain-HTTP receivers over few kept-alive connections (false: one request at a time per connection, for a receiver behind a proxy that mishandles pipelining)", func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		c.App.Webhooks.NoPipelining = !b
		return nil
	}},
	durationSetting("WEBHOOK_BACKLOG_INTERVAL", webhook.DefaultBacklogInterval.String(), "how often the webhook backlog gauges are refreshed, which is also how soon an instance with no enabled webhook notices one another instance added",
		func(c *config) *time.Duration { return &c.App.Webhooks.BacklogInterval }),
	rateLimitSetting("RATE_LIMIT_PUBLIC_WRITES", "50:100", "note views and waters per second per client IP, as RATE or RATE:BURST (0: off)",
		func(c *config) *httpapi.RateLimit { return &c.App.HTTP.PublicWriteLimit }),
	rateLimitSetting("RATE_LIMIT_PUBLIC_READS", httpapi.DefaultPublicReadLimit, "public reads that reach PostgreSQL (note stats; activity, seat and seat-stream reads that miss the activity cache; pool reads that miss the pool cache) per second per client IP, as RATE or RATE:BURST (0: off)",
		func(c *config) *httpapi.RateLimit { return &c.App.HTTP.PublicReadLimit }),
	rateLimitSetting("RATE_LIMIT_SIGNUPS", "2:10", "signups per second per user, as RATE or RATE:BURST (0: off)",
		func(c *config) *httpapi.RateLimit { return &c.App.HTTP.SignupLimit }),
	rateLimitSetting("RATE_LIMIT_BLOCK_CODES", "0.1:5", "signups with a block code per second per user, right or wrong, as RATE or RATE:BURST (0: off): 5 at once, then one every 10 seconds, so that codes cannot be guessed; one bucket per user across the instances, kept in Redis (each instance its own while Redis is down)",
		func(c *config) *httpapi.RateLimit { return &c.App.HTTP.CodeLimit }),
}

func boolSetting(env, def, usage string, dst func(*config) *bool) setting {
	return setting{env, def, usage, func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*dst(c) = b
		return nil
	}}
}

func rateLimitSetting(env, def, usage string, dst func(*config) *httpapi.RateLimit) setting {
	return setting{env, def, usage, func(c *config, v string) error {
		l, err := httpapi.ParseRateLimit(v)
		if err != nil {
			return err
		}
		*dst(c) = l
		return nil
	}}
}

// loadConfig reads settings from getenv, then from args (flags of the same
// names), and validates them. An error names the bad setting.
// extra, when not nil, adds the command's own flags.
func loadConfig(name string, settings []setting, args []string, getenv func(string) string, stderr io.Writer, extra func(*flag.FlagSet)) (config, error) {
	var c config
	raw := make(map[string]string, len(settings))
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if extra != nil {
		extra(fs)
	}
	fs.BoolVar(&c.Dev, "dev", false, "development mode: a built-in JWT secret when none is set (never in production)")
	for _, s := range settings {
		raw[s.env] = s.def
		if v := getenv(s.env); v != "" {
			raw[s.env] = v
		}
		fs.Func(s.flagName(), s.usage+" (env "+s.env+", default "+strconv.Quote(s.def)+")", func(v string) error {
			raw[s.env] = v
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range settings {
		if err := s.parse(&c, raw[s.env]); err != nil {
			return c, fmt.Errorf("%s (--%s): %w", s.env, s.flagName(), err)
		}
	}
	if err := c.validateTokens(settings); err != nil {
		return c, err
	}
	return c, c.validateConsole()
}

// validateTokens checks the token settings together, when the command has
// them: a secret of at least 32 bytes unless --dev (which supplies one) or
// a JWK Set is configured, and a previous secret only with the end of its
// grace period.
func (c *config) validateTokens(settings []setting) error {
	needed := false
	for _, s := range settings {
		needed = needed || s.env == "CAPACITY_JWT_SECRET"
	}
	if !needed {
		return nil
	}
	t := &c.Tokens
	if len(t.Secret) == 0 && c.Dev {
		t.Secret = []byte(devSecret)
	}
	if n := len(t.Secret); n < httpapi.MinSecretBytes && (n > 0 || t.JWKSURL == "") {
		if n == 0 {
			return errors.New("CAPACITY_JWT_SECRET (--capacity-jwt-secret): is required (at least 32 bytes) unless --dev or JWT_JWKS_URL")
		}
		return fmt.Errorf("CAPACITY_JWT_SECRET (--capacity-jwt-secret): must be at least %d bytes, got %d", httpapi.MinSecretBytes, n)
	}
	if len(t.PreviousSecret) == 0 {
		return nil
	}
	switch {
	case len(t.PreviousSecret) < httpapi.MinSecretBytes:
		return fmt.Errorf("CAPACITY_JWT_PREVIOUS_SECRET (--capacity-jwt-previous-secret): must be at least %d bytes, got %d", httpapi.MinSecretBytes, len(t.PreviousSecret))
	case string(t.PreviousSecret) == string(t.Secret):
		return errors.New("CAPACITY_JWT_PREVIOUS_SECRET (--capacity-jwt-previous-secret): must differ from CAPACITY_JWT_SECRET")
	case t.PreviousSecretUntil.IsZero():
		return errors.New("CAPACITY_JWT_PREVIOUS_SECRET_UNTIL (--capacity-jwt-previous-secret-until): is required with CAPACITY_JWT_PREVIOUS_SECRET (the end of its grace period)")
	}
	return nil
}

// tokenConfig returns how tokens are signed and verified, logging to log.
func (c *config) tokenConfig(log *slog.Logger) httpapi.TokenConfig {
	t := c.Tokens
	t.Logger = log
	return t
}

// settingsNamed returns the settings with the given environment names.
func settingsNamed(names ...string) []setting {
	var out []setting
	for _, s := range serveSettings {
		for _, n := range names {
			if s.env == n {
				out = append(out, s)
			}
		}
	}
	return out
}

// defaultDuration writes a package's default duration as the settings
// table shows it: whole seconds as "60s", anything else as Go writes it
// ("50ms").
// shortDuration writes d as Go does, without zero trailing units: 5m,
// 24h, 1s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

func defaultDuration(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	return d.String()
}
